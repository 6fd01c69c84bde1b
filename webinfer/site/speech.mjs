// Audio as the user has it -> the worker's seq2seq message (webinfer.mjs: Seq2Seq.transcribe). Only the layout is
// adapted here: channels stay separate rows (the artifact's audio prologue mixes them, resamples and computes the
// log-mel features on the GPU), and a WAV file goes to the worker as its bytes (runtime/audio.py reads it).

function isWav(bytes) {
  const tag = (i) => String.fromCharCode(...bytes.subarray(i, i + 4));
  return bytes.length >= 12 && tag(0) === "RIFF" && tag(8) === "WAVE";
}

/** {message: {data: ArrayBuffer, sampleRate, channels}, transfer: [ArrayBuffer]} for the worker.
 *  `audio`: a Float32Array of mono PCM (with `sampleRate`), {data: Float32Array, sampleRate} or {channels:
 *  [Float32Array, ...], sampleRate}, an AudioBuffer (Web Audio), or a WAV file: a Blob/File, an ArrayBuffer or a
 *  Uint8Array of its bytes. */
export async function audioMessage(audio, sampleRate) {
  if (audio instanceof Blob) audio = await audio.arrayBuffer();
  if (audio instanceof ArrayBuffer || audio instanceof Uint8Array) {
    const bytes = audio instanceof Uint8Array ? audio.slice() : new Uint8Array(audio.slice(0));
    if (!isWav(bytes)) throw new Error("audio bytes must be a WAV file (RIFF/WAVE); give PCM as a Float32Array with its sampleRate");
    return { message: { data: bytes.buffer, sampleRate: 0, channels: 0 }, transfer: [bytes.buffer] };
  }
  let rows;
  if (audio instanceof Float32Array) rows = [audio];
  else if (typeof AudioBuffer !== "undefined" && audio instanceof AudioBuffer) {
    rows = Array.from({ length: audio.numberOfChannels }, (_, c) => audio.getChannelData(c));
    sampleRate = audio.sampleRate;
  } else if (audio && (audio.data instanceof Float32Array || Array.isArray(audio.channels))) {
    rows = audio.data instanceof Float32Array ? [audio.data] : audio.channels;
    sampleRate = audio.sampleRate ?? sampleRate;
  } else {
    throw new Error("audio: expected a Float32Array of PCM (with sampleRate), {data, sampleRate}, an AudioBuffer or a WAV file");
  }
  const rate = Number(sampleRate);
  if (!Number.isInteger(rate) || rate < 1) throw new Error(`audio: give the sample rate in Hz (a positive integer), not ${sampleRate}`);
  const n = rows[0].length;
  if (!n || rows.some((r) => !(r instanceof Float32Array) || r.length !== n)) {
    throw new Error("audio: the channels must be non-empty Float32Arrays of one length");
  }
  const data = new Float32Array(n * rows.length);
  rows.forEach((r, c) => data.set(r, c * n));
  return { message: { data: data.buffer, sampleRate: rate, channels: rows.length }, transfer: [data.buffer] };
}
