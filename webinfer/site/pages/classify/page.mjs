// Classify: pick, drop or pass (?image=URL on this origin, ?image=sample) an image; its raw RGBA8 pixels go to
// the artifact (session.classify), whose GPU prologue resizes, crops and normalises them
// (demos/classify/preprocess.json) and whose epilogue gives labelled scores; show label and scores. Without WebGPU
// (or ?path=cpu) the artifact's CPU model carries the same prologue and epilogue as standard ONNX ops.
import * as webinfer from "../assets/webinfer.mjs";
import { fileInputs, pathText, progressBar, query, showError, timingText } from "../assets/ui.mjs";

const statusEl = document.getElementById("status");
const resultEl = document.getElementById("result");
const preview = document.getElementById("preview");

function pixels(bitmap) {
  const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
  const ctx = canvas.getContext("2d", { willReadFrequently: true });
  ctx.drawImage(bitmap, 0, 0);
  return ctx.getImageData(0, 0, bitmap.width, bitmap.height);  // RGBA8 at the image's own size
}

function render(result) {
  const rows = result.top.map(({ label, score }) => {
    const tr = document.createElement("tr");
    tr.className = "score-row";
    const bar = document.createElement("span");
    bar.className = "bar";
    bar.style.width = `${Math.round(score * 200)}px`;
    for (const v of [label, bar, score.toFixed(4)]) tr.insertCell().append(v);
    return tr;
  });
  const head = document.createElement("div");
  head.className = "big";
  head.textContent = `rotated ${result.top[0].label}`;
  const table = document.createElement("table");
  table.append(...rows);
  const note = document.createElement("div");
  note.className = "stats";
  note.textContent = `${result.width}x${result.height} image, model run (with its pre-processing) ${result.run_ms} ms`;
  resultEl.replaceChildren(head, table, note);
}

async function run(session, blob) {
  statusEl.textContent = "classifying…";
  preview.src = URL.createObjectURL(blob);
  const image = pixels(await createImageBitmap(blob));
  window.webinferDemo = { input: image.data, width: image.width, height: image.height };  // for automated checks
  const t0 = performance.now();
  const top = await session.classify(image);  // [{label, score}], best first
  const result = { top, width: image.width, height: image.height, run_ms: (performance.now() - t0).toFixed(1) };
  render(result);
  resultEl.dataset.scores = JSON.stringify(Object.fromEntries(top.map((t) => [t.label, t.score])));
  resultEl.dataset.label = top[0].label;
  resultEl.dataset.done = "1";
  statusEl.textContent = "ready";
  return result;
}

async function fetchImage(spec) {
  const url = new URL(spec === "sample" ? "sample.png" : spec, location.href);
  if (url.origin !== location.origin) throw new Error(`image must come from this site (${location.origin}), not ${url.origin}`);
  const r = await fetch(url);
  if (!r.ok) throw new Error(`GET ${url.pathname}: HTTP ${r.status}`);
  return r.blob();
}

async function main() {
  const session = await webinfer.load("artifact/", { path: query().get("path") || undefined,
    onProgress: progressBar(document.getElementById("progress"), statusEl) });
  // One run on a blank image compiles every kernel before the first real one.
  await session.classify({ data: new Uint8Array(4 * 256 * 256), width: 256, height: 256 });
  const timings = { ...session.timings, ready_ms: Math.round(performance.now()) };
  document.body.dataset.ready = "1";
  document.getElementById("timings").textContent = `${timingText(timings)}; ${pathText(session)}`;
  resultEl.dataset.path = JSON.stringify({ path: session.path, why: session.pathWhy });
  resultEl.dataset.timings = JSON.stringify(timings);
  statusEl.textContent = "ready: drop or pick an image";
  const guard = (p) => p.catch((e) => showError(statusEl, resultEl, e));
  const sampleBtn = document.getElementById("sample");
  sampleBtn.disabled = false;
  sampleBtn.onclick = () => guard(fetchImage("sample").then((b) => run(session, b)));
  fileInputs((f) => guard(run(session, f)));
  const image = query().get("image");
  if (image) await run(session, await fetchImage(image));
}

main().catch((e) => showError(statusEl, resultEl, e));
