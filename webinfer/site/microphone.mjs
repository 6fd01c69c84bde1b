// Microphone -> PCM for the speech-to-text page: getUserMedia, then an AudioWorklet that copies each 128-sample
// block of the first channel, at the AudioContext's own rate (the artifact's prologue resamples on the GPU).
// The audio never leaves the page.

const RECORDER = `registerProcessor("webinfer-recorder", class extends AudioWorkletProcessor {
  process(inputs) {
    const ch = inputs[0] && inputs[0][0];
    if (ch && ch.length) this.port.postMessage(ch.slice(0));
    return true;
  }
});`;

/** Start recording; resolves to {sampleRate, stop()} where stop() resolves to the Float32Array recorded so far.
 *  `maxSeconds` stops it by itself (Whisper hears 30 s at most); `onStop` is then called with the samples. */
export async function record({ maxSeconds = 30, onStop } = {}) {
  if (!navigator.mediaDevices?.getUserMedia) throw new Error("this browser gives no microphone to pages (getUserMedia)");
  const stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: false,
    noiseSuppression: false, autoGainControl: false } });
  const ctx = new AudioContext();
  const url = URL.createObjectURL(new Blob([RECORDER], { type: "text/javascript" }));
  try {
    await ctx.audioWorklet.addModule(url);
  } finally {
    URL.revokeObjectURL(url);
  }
  const source = ctx.createMediaStreamSource(stream);
  const node = new AudioWorkletNode(ctx, "webinfer-recorder");
  const mute = new GainNode(ctx, { gain: 0 });  // (pulled by the destination, so the worklet runs; nothing is heard)
  const chunks = [];
  let count = 0;
  let stopped = null;
  const limit = Math.round(maxSeconds * ctx.sampleRate);
  const stop = async () => {
    if (stopped) return stopped;
    stopped = (async () => {
      node.port.onmessage = null;
      source.disconnect();
      stream.getTracks().forEach((t) => t.stop());
      await ctx.close();
      const out = new Float32Array(Math.min(count, limit));
      let at = 0;
      for (const c of chunks) {
        if (at >= out.length) break;
        out.set(c.subarray(0, out.length - at), at);
        at += c.length;
      }
      return out;
    })();
    return stopped;
  };
  node.port.onmessage = ({ data }) => {
    chunks.push(data);
    count += data.length;
    if (count >= limit) stop().then((pcm) => onStop?.(pcm));
  };
  source.connect(node).connect(mute).connect(ctx.destination);
  if (ctx.state === "suspended") await ctx.resume();
  return { sampleRate: ctx.sampleRate, stop };
}
