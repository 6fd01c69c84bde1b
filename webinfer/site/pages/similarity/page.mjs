// Similarity: embed two texts (?a=...&b=... runs at once) as sentence-transformers does (the artifact's
// WordPiece tokenizer, the model's last hidden state, mean pooling over the mask, L2 normalisation) and
// show their cosine similarity.
import * as webinfer from "../assets/webinfer.mjs";
import { pathText, progressBar, query, showError, timingText } from "../assets/ui.mjs";

const statusEl = document.getElementById("status");
const resultEl = document.getElementById("result");
const boxA = document.getElementById("a");
const boxB = document.getElementById("b");

// Unit-length sentence embeddings of `texts` (one batch, padded to the longest) and their token ids.
async function embed(session, texts) {
  const ids = await Promise.all(texts.map((t) => session.encode(t)));
  const n = Math.max(...ids.map((i) => i.length));
  const mask = ids.map((i) => i.map(() => 1).concat(new Array(n - i.length).fill(0)));
  const padded = ids.map((i) => i.concat(new Array(n - i.length).fill(0)));
  const dims = [texts.length, n];
  const out = await session.run({
    input_ids: { data: padded.flat(), dims },
    attention_mask: { data: mask.flat(), dims },
    token_type_ids: { data: new Array(texts.length * n).fill(0), dims },
  });
  const hidden = out.last_hidden_state.data;
  const width = out.last_hidden_state.dims[2];
  const vectors = mask.map((m, b) => {
    const acc = new Float64Array(width);
    m.forEach((on, t) => {
      if (!on) return;
      for (let k = 0; k < width; k++) acc[k] += hidden[(b * n + t) * width + k];
    });
    const count = Math.max(m.reduce((a, v) => a + v, 0), 1e-9);
    const norm = Math.max(Math.hypot(...acc.map((v) => v / count)), 1e-12);
    return acc.map((v) => v / count / norm);
  });
  return { vectors, ids };
}

async function compare(session) {
  if (!boxA.value.trim() || !boxB.value.trim()) throw new Error("both texts must be non-empty");
  statusEl.textContent = "embedding…";
  const t0 = performance.now();
  const { vectors: [va, vb], ids } = await embed(session, [boxA.value, boxB.value]);
  const score = va.reduce((s, v, k) => s + v * vb[k], 0);
  const big = document.createElement("div");
  big.className = "big";
  big.textContent = `cosine similarity ${score.toFixed(4)}`;
  const note = document.createElement("div");
  note.className = "stats";
  note.textContent = `${ids[0].length} + ${ids[1].length} tokens, ${(performance.now() - t0).toFixed(1)} ms`;
  resultEl.replaceChildren(big, note);
  resultEl.dataset.scores = JSON.stringify([score]);
  resultEl.dataset.tokenIds = JSON.stringify(ids);
  resultEl.dataset.done = "1";
  statusEl.textContent = "ready";
}

async function main() {
  const q = query();
  if (q.has("a")) boxA.value = q.get("a");
  if (q.has("b")) boxB.value = q.get("b");
  const session = await webinfer.load("artifact/", { path: q.get("path") || undefined,
    onProgress: progressBar(document.getElementById("progress"), statusEl) });
  await embed(session, ["warm up the kernels", "once"]);
  const timings = { ...session.timings, ready_ms: Math.round(performance.now()) };
  document.body.dataset.ready = "1";
  document.getElementById("timings").textContent = `${timingText(timings)}; ${pathText(session)}`;
  resultEl.dataset.path = JSON.stringify({ path: session.path, why: session.pathWhy });
  resultEl.dataset.timings = JSON.stringify(timings);
  statusEl.textContent = "ready";
  const btn = document.getElementById("compare");
  btn.disabled = false;
  btn.onclick = () => compare(session).catch((e) => showError(statusEl, resultEl, e));
  if (q.has("a") && q.has("b")) await compare(session);
}

main().catch((e) => showError(statusEl, resultEl, e));
