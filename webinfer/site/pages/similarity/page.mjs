// Similarity: embed two texts (?a=...&b=... runs at once) and show their cosine similarity.
import { query, showError, startPage } from "../assets/webinfer.mjs";

const statusEl = document.getElementById("status");
const resultEl = document.getElementById("result");
const boxA = document.getElementById("a");
const boxB = document.getElementById("b");

async function compare(py) {
  statusEl.textContent = "embedding…";
  const r = JSON.parse(await py.get("compare")(boxA.value, boxB.value));
  const score = r.scores[0];
  const big = document.createElement("div");
  big.className = "big";
  big.textContent = `cosine similarity ${score.toFixed(4)}`;
  const note = document.createElement("div");
  note.className = "stats";
  note.textContent = `${r.token_ids[0].length} + ${r.token_ids[1].length} tokens, model run ${r.run_ms} ms`;
  resultEl.replaceChildren(big, note);
  resultEl.dataset.scores = JSON.stringify(r.scores);
  resultEl.dataset.tokenIds = JSON.stringify(r.token_ids);
  resultEl.dataset.done = "1";
  statusEl.textContent = "ready";
}

async function main() {
  const q = query();
  if (q.has("a")) boxA.value = q.get("a");
  if (q.has("b")) boxB.value = q.get("b");
  const { py, timings } = await startPage({ artifact: "artifact/", statusEl,
    progressEl: document.getElementById("progress") });
  document.body.dataset.ready = "1";
  document.getElementById("timings").textContent = `ready in ${timings.ready_ms} ms ` +
    `(Python ${timings.python_ms} ms, weights ${timings.weights_ms} ms, kernels ${timings.session_ms} ms)`;
  resultEl.dataset.timings = JSON.stringify(timings);
  statusEl.textContent = "ready";
  const btn = document.getElementById("compare");
  btn.disabled = false;
  btn.onclick = () => compare(py).catch((e) => showError(statusEl, resultEl, e));
  if (q.has("a") && q.has("b")) await compare(py);
}

main().catch((e) => showError(statusEl, resultEl, e));
