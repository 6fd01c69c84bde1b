// Speech to text: a WAV file (picked or dropped) or the microphone; the audio goes to the worker as it is (WAV
// bytes, or PCM at the microphone's rate), where the artifact's GPU prologue resamples it and computes Whisper's
// log-mel features, and the encoder-decoder streams the transcript token by token into #transcript.
// Test contract: ?max_new_tokens=N; #result gets data-token-ids, data-text, data-streamed (the ids as the tokens
// arrived), data-done or data-error; window.webinferDemo holds the last input ({wav} or {pcm, sampleRate}).
import * as webinfer from "../assets/webinfer.mjs";
import { record } from "../assets/microphone.mjs";
import { fileInputs, progressBar, query, showError, timingText } from "../assets/ui.mjs";

const statusEl = document.getElementById("status");
const resultEl = document.getElementById("result");
const transcriptEl = document.getElementById("transcript");
const micButton = document.getElementById("mic");
const player = document.getElementById("player");
const maxNewTokens = Number(query().get("max_new_tokens") || 128);
let busy = false;

async function transcribe(s2s, audio, options, what) {
  if (busy) throw new Error("still transcribing the previous clip");
  busy = true;
  delete resultEl.dataset.done;
  delete resultEl.dataset.error;
  statusEl.className = "status";
  statusEl.textContent = `transcribing ${what}…`;
  transcriptEl.textContent = "";
  const streamed = [];
  const t0 = performance.now();
  let firstMs = null;
  try {
    const stats = await s2s.transcribe(audio, { maxNewTokens, ...options }, (tok) => {
      firstMs ??= performance.now() - t0;
      streamed.push(tok.id);
      transcriptEl.textContent += tok.text;  // the transcript grows while the decoder runs
    });
    const ms = performance.now() - t0;
    transcriptEl.textContent = stats.text;
    Object.assign(resultEl.dataset, { tokenIds: JSON.stringify(stats.token_ids), text: stats.text,
      streamed: JSON.stringify(streamed) });
    resultEl.textContent = `${stats.token_ids.length} tokens in ${(ms / 1000).toFixed(1)} s (first after ` +
      `${((firstMs ?? ms) / 1000).toFixed(1)} s: resampling, log-mel and the encoder on the GPU)`;
    resultEl.dataset.done = "1";
    statusEl.textContent = "ready: drop or pick a WAV file, or record";
  } finally {
    busy = false;
  }
}

function fromFile(s2s, file) {
  window.webinferDemo = { wav: file };
  player.src = URL.createObjectURL(file);
  player.hidden = false;
  return transcribe(s2s, file, {}, file.name || "the file");
}

function microphone(s2s, guard) {
  let recording = null;
  const finish = (pcm) => {
    micButton.textContent = "Record from the microphone";
    delete resultEl.dataset.recording;
    window.webinferDemo = { pcm, sampleRate: rate };
    return guard(transcribe(s2s, pcm, { sampleRate: rate }, `${(pcm.length / rate).toFixed(1)} s from the microphone`));
  };
  let rate = 0;
  micButton.onclick = () => guard((async () => {
    if (recording) {
      const r = recording;
      recording = null;
      return finish(await r.stop());
    }
    if (busy) throw new Error("still transcribing the previous clip");
    recording = await record({ onStop: (pcm) => {  // (the longest clip Whisper hears)
      if (!recording) return;
      recording = null;
      finish(pcm);
    } });
    rate = recording.sampleRate;
    micButton.textContent = "Stop and transcribe";
    statusEl.textContent = `recording at ${rate} Hz… (click again to stop)`;
    resultEl.dataset.recording = "1";
  })());
}

async function main() {
  const guard = (p) => p.catch((e) => {
    busy = false;
    showError(statusEl, resultEl, e);
  });
  try {
    const s2s = await webinfer.seq2seq("artifact/", {
      onProgress: progressBar(document.getElementById("progress"), statusEl) });
    if (!s2s.audio) throw new Error("this artifact's encoder takes features, not audio: build it with its audio prologue");
    const timings = { ...s2s.timings, ready_ms: Math.round(performance.now()) };
    document.getElementById("timings").textContent = `${timingText(timings)}; ${s2s.adapter}`;
    resultEl.dataset.timings = JSON.stringify(timings);
    fileInputs((f) => guard(fromFile(s2s, f)));
    microphone(s2s, guard);
    micButton.disabled = false;
    document.body.dataset.ready = "1";
    statusEl.textContent = "ready: drop or pick a WAV file, or record";
  } catch (e) {
    showError(statusEl, resultEl, e);
  }
}

main();
