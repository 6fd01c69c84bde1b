// Generic page: load the artifact with webinfer's JS API, run it once on inputs of ones (symbolic dims set
// to 1), print each output's shape and first values. ?class=NAME forces a kernel class, ?path=cpu|gpu a path
// (without WebGPU, an artifact built with --cpu runs on the CPU by itself); ?limit=NAME:VALUE (repeatable) shows
// the page a device with smaller WebGPU limits (e.g. limit=maxStorageBufferBindingSize:1048576).
import * as webinfer from "../assets/webinfer.mjs";
import { progressBar, showError, timingText } from "../assets/ui.mjs";

const statusEl = document.getElementById("status");
const resultEl = document.getElementById("result");

function ones(io) {
  const dims = io.dims.map((d) => (Number.isInteger(d) ? d : 1));
  const n = dims.reduce((a, b) => a * b, 1);
  return new webinfer.Tensor(io.type, new Array(n).fill(1), dims);
}

function plain(v) {
  return typeof v === "bigint" ? Number(v) : Number.isFinite(v) ? v : String(v);
}

async function runOnce(session) {
  const feeds = Object.fromEntries(session.inputs.map((io) => [io.name, ones(io)]));
  const t0 = performance.now();
  const out = await session.run(feeds);
  const ms = (performance.now() - t0).toFixed(1);
  const preview = Object.fromEntries(Object.entries(out).map(([name, t]) => [name, Array.isArray(t)
    ? { dtype: "list", shape: [t.length], head: t.slice(0, 8) }  // (classic ML: labels, {label: probability} rows)
    : { dtype: t.type, shape: t.dims, head: Array.from(t.data.slice(0, 8), plain) }]));
  resultEl.textContent = Object.entries(preview)
    .map(([n, o]) => `${n}: ${o.dtype}[${o.shape}] ${JSON.stringify(o.head)}`).join("\n") + `\n(${ms} ms)`;
  resultEl.dataset.outputs = JSON.stringify(preview);
  resultEl.dataset.done = "1";
}

function limitsOf(q) {
  const pairs = q.getAll("limit").map((s) => s.split(":")).filter(([k, v]) => /^[a-zA-Z]+$/.test(k) && /^\d+$/.test(v));
  return pairs.length ? Object.fromEntries(pairs.map(([k, v]) => [k, Number(v)])) : undefined;
}

async function main() {
  const q = new URLSearchParams(location.search);
  const session = await webinfer.load("artifact/", {
    onProgress: progressBar(document.getElementById("progress"), statusEl),
    kernelClass: q.get("class") || undefined, path: q.get("path") || undefined, deviceLimits: limitsOf(q) });
  document.getElementById("timings").textContent = `${timingText(session.timings)}; ` + (session.path === "cpu"
    ? `runs on the CPU: ${session.adapter}, because ${session.pathWhy}`
    : `runs on WebGPU; kernel class ${session.kernelClass} (${session.kernelClassWhy})`);
  resultEl.dataset.path = JSON.stringify({ path: session.path, why: session.pathWhy });
  resultEl.dataset.kernelClass = JSON.stringify({ name: session.kernelClass, why: session.kernelClassWhy });
  statusEl.textContent = "running…";
  await runOnce(session);
  statusEl.textContent = "done";
  const btn = document.getElementById("run");
  btn.disabled = false;
  btn.onclick = () => runOnce(session).catch((e) => showError(statusEl, resultEl, e));
}

main().catch((e) => showError(statusEl, resultEl, e));
