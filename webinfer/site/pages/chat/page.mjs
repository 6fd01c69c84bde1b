// Chat: stream SmolLM2's answer token by token (?prompt=...&max_new_tokens=N&greedy=1&seed=S runs at once);
// Stop cancels after the current step; shows time to first token and decode tokens/s.
import { query, showError, startPage } from "../assets/webinfer.mjs";

const statusEl = document.getElementById("status");
const answerEl = document.getElementById("answer");
const statsEl = document.getElementById("stats");
const sendBtn = document.getElementById("send");
const stopBtn = document.getElementById("stop");
const promptEl = document.getElementById("prompt");
const greedyEl = document.getElementById("greedy");
const maxEl = document.getElementById("max");

function fmt(v, digits = 1) {
  return v === null || v === undefined ? "–" : Number(v).toFixed(digits);
}

async function send(py, seed) {
  sendBtn.disabled = true;
  stopBtn.disabled = false;
  delete answerEl.dataset.done;
  answerEl.textContent = "";
  statusEl.textContent = "generating…";
  const ids = [];
  const onToken = (id, text) => {
    ids.push(id);
    answerEl.textContent += text;
    answerEl.dataset.tokenIds = JSON.stringify(ids);
  };
  try {
    const stats = JSON.parse(await py.get("chat")(promptEl.value, Number(maxEl.value), greedyEl.checked, seed, onToken));
    statsEl.textContent = `${stats.prompt_ids.length} prompt tokens, ${stats.token_ids.length} generated · ` +
      `first token after ${fmt(stats.ttft_s, 2)} s · prefill ${fmt(stats.prefill_tok_s)} tok/s · ` +
      `decode ${fmt(stats.decode_tok_s, 2)} tok/s${stats.cancelled ? " · stopped" : ""}`;
    answerEl.dataset.tokenIds = JSON.stringify(stats.token_ids);
    answerEl.dataset.promptIds = JSON.stringify(stats.prompt_ids);
    answerEl.dataset.stats = JSON.stringify(stats);
    answerEl.dataset.done = "1";
    statusEl.textContent = "ready";
  } finally {
    sendBtn.disabled = false;
    stopBtn.disabled = true;
  }
}

async function main() {
  const q = query();
  if (q.has("prompt")) promptEl.value = q.get("prompt");
  if (q.has("max_new_tokens")) maxEl.value = q.get("max_new_tokens");
  if (q.has("greedy")) greedyEl.checked = q.get("greedy") === "1";
  const seed = Number(q.get("seed") || 0);
  if (!Number.isInteger(seed) || seed < 0) throw new Error("seed must be a non-negative integer");
  const { py, timings } = await startPage({ artifact: "artifact/", statusEl,
    progressEl: document.getElementById("progress") });
  document.body.dataset.ready = "1";
  document.getElementById("timings").textContent = `ready in ${timings.ready_ms} ms ` +
    `(Python ${timings.python_ms} ms, weights ${timings.weights_ms} ms, kernels + warm-up ${timings.session_ms} ms)`;
  answerEl.dataset.timings = JSON.stringify(timings);
  statusEl.textContent = "ready";
  const guard = (p) => p.catch((e) => showError(statusEl, answerEl, e));
  sendBtn.disabled = false;
  sendBtn.onclick = () => guard(send(py, seed));
  stopBtn.onclick = () => py.get("cancel")();
  if (q.has("prompt")) await send(py, seed);
}

main().catch((e) => showError(statusEl, answerEl, e));
