// The Web Worker behind webinfer.mjs: Pyodide, WebGPU and webinfer's Python runtime run here, so the page's
// main thread only renders. One worker per page serves every session it opens, over one GPU device.
//
// Messages in:  {id, op: "load", url, kind: "session" | "chat", kernelClass, path: "cpu" | "gpu" | undefined}  {id, op: "run", handle, feeds}
//               {id, op: "encode", handle, text}  {id, op: "chat", handle, messages, options, prefixCache | method (OpenAI API)}
//               {id, op: "seq2seq", handle, text | feeds | audio: {data, sampleRate, channels}, options}
//               {id, op: "classify", handle, pixels, width, height}  {id, op: "vision", handle, task, pixels, width, height}
//               {op: "cancel", handle}  {id, op: "close", handle}  {id, op: "loseDevice"} (destroys the device, to try
//               recovery: webinfer.debug.loseDevice)
// Messages out: {id, type: "progress", ...}  {id, type: "token", token: {id, text}}  {id, type: "chunk", chunk}
//               {id, type: "result", value}  {id, type: "error", message}  {type: "device", event} (recover.mjs)
//
// Weights never pass through Python: the worker fetches each shard (Cache Storage first), checks its sha256
// and writes it into GPU buffers; Python opens the session over those buffers. Everything is fetched from
// this site's own origin (unless the site was bundled with --pyodide-url).
//
// Two paths: WebGPU (Pyodide + webinfer's kernels) and, where the page has no WebGPU or `path: "cpu"` forces
// it, the artifact's CPU model on onnxruntime-web's wasm backend (cpu.mjs: onnxruntime in a worker of its own,
// ort_worker.mjs; Python only for an artifact's tokenizer). Each session says
// which path it runs and why. A lost GPU device is re-created and the sessions re-opened on it (recover.mjs).

import { CPU_MODEL, cancelCpuSession, closeCpuSession, cpuSession, loadCPU } from "./cpu.mjs";
import { chatWithPrefixCache } from "./prefix_store.mjs";
import { visionTask } from "./tasks.mjs";
import { adapterType, chooseProgram, openGPU } from "./gpu_device.mjs";
import { hex, loadWeights } from "./weights.mjs";
import { configure, trackSession, untrackSession, watchDevice, withRecovery } from "./recover.mjs";

const ROOT = new URL("../", import.meta.url);
const started = performance.now();

let sitePromise = null;
let pythonPromise = null;
let pagePromise = null;
let gpuPromise = null;
let hostPromise = null;
let gpuCaps;  // the first load's deviceLimits: a re-created device gets the same view

function site() {
  sitePromise ??= fetch(new URL("site.json", ROOT)).then((r) => {
    if (!r.ok) throw new Error(`GET site.json: HTTP ${r.status}`);
    return r.json();
  });
  return sitePromise;
}

// Pyodide (restored from the site's snapshot where it has one: pyodide_boot.mjs) + webinfer's browser wheel,
// once per worker.
function python() {
  pythonPromise ??= (async () => {
    const t = performance.now();
    const s = await site();
    const base = new URL(s.pyodide || "pyodide/", ROOT).href;
    const { bootPyodide } = await import("./pyodide_boot.mjs");  // (pages without Python never load it)
    const { pyodide, snapshot, snapshotAt } = await bootPyodide(base, s.pyodide_snapshot, ROOT);
    const booted = performance.now();
    await pyodide.loadPackage(new URL(s.wheel, ROOT).href, { messageCallback: () => {} });
    const now = performance.now();
    const at = (x) => Math.round(x - started);
    return { pyodide, ms: Math.round(now - t), marks: { python_start_ms: at(t), pyodide_boot_ms: Math.round(booted - t),
      wheel_ms: Math.round(now - booted), pyodide_snapshot: snapshot, timeline: { pyodide_boot: [at(t), at(booted)], wheel: [at(booted), at(now)],
        ...(snapshot ? { snapshot_bytes: [at(t), at(snapshotAt)] } : {}) } } };
  })();
  return pythonPromise;
}

// The WebGPU path's Python (webinfer.page; the CPU path imports only webinfer.page_cpu).
function webpage() {
  pagePromise ??= python().then((py) => ({ ...py, webpage: py.pyodide.pyimport("webinfer.page") }));
  return pagePromise;
}

// What the CPU path's load (cpu.mjs) takes from this worker.
const CPU_HOST = { python, site, root: ROOT, started };

function gpu(caps) {
  if (!gpuPromise) {
    gpuCaps = caps;
    gpuPromise = openGPU(caps).then((g) => {
      watchDevice(g.device);
      return g;
    });
  }
  return gpuPromise;
}

function host() {
  hostPromise ??= Promise.all([webpage(), gpu()]).then(([py, g]) => py.webpage.WorkerHost(g.adapter, g.device));
  return hostPromise;
}

// The manifest, checked against manifest.sha256 before its chunk table is trusted (Python checks it again,
// with the whole schema, when it opens the session).
async function fetchManifest(artifactURL) {
  const [mresp, sresp] = await Promise.all(["manifest.json", "manifest.sha256"].map((f) => fetch(new URL(f, artifactURL))));
  for (const r of [mresp, sresp]) if (!r.ok) throw new Error(`GET ${r.url}: HTTP ${r.status}`);
  const raw = await mresp.arrayBuffer();
  const want = (await sresp.text()).trim().split(/\s+/)[0];
  if (hex(await crypto.subtle.digest("SHA-256", raw)) !== want) {
    throw new Error(`${mresp.url}: sha256 does not match manifest.sha256 (manifest altered or corrupt)`);
  }
  return JSON.parse(new TextDecoder().decode(raw));
}

// -- the path: WebGPU, else the CPU --------------------------------------------------------------------------
// {path, why}; `forced` is load's `path` option ("cpu" | "gpu"; the generic page's ?path=).
async function choosePath(forced, caps) {
  if (forced !== undefined && forced !== "cpu" && forced !== "gpu") throw new Error(`path must be cpu or gpu, not ${forced}`);
  if (forced === "cpu") return { path: "cpu", why: "forced (path=cpu)" };
  try {
    await gpu(caps);
  } catch (e) {
    if (forced === "gpu") throw e;
    const why = !navigator.gpu ? "this browser has no WebGPU (navigator.gpu is missing)" : e.message;
    return { path: "cpu", why };
  }
  return { path: "gpu", why: forced ? "forced (path=gpu)" : "a WebGPU adapter was found" };
}

// -- operations ------------------------------------------------------------------------------------------
async function load({ url, kind, kernelClass, path, deviceLimits }, post) {
  const progress = (p) => post({ type: "progress", progress: p });
  const timings = {};
  const artifactURL = new URL(url.endsWith("/") ? url : url + "/", ROOT).href;
  const choice = await choosePath(path, deviceLimits);
  if (choice.path === "cpu") {
    if (kind === "seq2seq") throw new Error(`encoder-decoder artifacts run on WebGPU only; this page has none (${choice.why})`);
    if (kernelClass) throw new Error(`kernel class ${kernelClass}: a GPU program, but this session runs on the CPU (${choice.why})`);
    return loadCPU(CPU_HOST, artifactURL, await fetchManifest(artifactURL), kind, choice, progress);
  }
  const { adapter, device } = await gpu();
  const t = performance.now();
  const manifest = await fetchManifest(artifactURL);
  if (!path && !kernelClass && kind !== "seq2seq" && adapterType(adapter) === "cpu" && manifest.assets?.[CPU_MODEL]) {
    // WebGPU emulated on the CPU (SwiftShader) runs these models 1-25x slower than onnxruntime-web's wasm
    // backend in the same page (docs/notes.md, `webinfer bench`): the visitor gets the faster path.
    const name = [adapter.info?.vendor, adapter.info?.architecture, adapter.info?.description].filter(Boolean).join(" ");
    return loadCPU(CPU_HOST, artifactURL, manifest, kind, { path: "cpu", why: `the WebGPU adapter (${name || "fallback"}) is ` +
      "a software one; onnxruntime-web's wasm backend is faster here (path=gpu forces WebGPU)" }, progress);
  }
  progress({ phase: "python" });
  const py = webpage();  // Pyodide boots while the weights stream in
  const { program, weights, encoder } = await gpuWeights({ adapter, device }, artifactURL, manifest, kind, kernelClass,
    progress);
  Object.assign(timings, { weights_ms: Math.round(performance.now() - t), weight_bytes: weights.total,
    shards_from_cache: weights.fromCache, shards: weights.shards });
  timings.python_ms = (await py).ms;
  progress({ phase: "compile" });
  const t2 = performance.now();
  const h = await host();
  let info;
  if (kind === "seq2seq") {
    info = JSON.parse(await h.open_seq2seq(artifactURL, weights.pairs, encoder.pairs, kernelClass || undefined));
  } else {
    const open = kind === "chat" ? h.open_chat : h.open_session;
    info = JSON.parse(await open(artifactURL, weights.pairs, kernelClass || undefined));
  }
  if (info.kernel_class !== program.class) {
    throw new Error(`kernel class: the worker chose ${program.class}, Python ${info.kernel_class} (${info.kernel_class_why})`);
  }
  timings.session_ms = Math.round(performance.now() - t2);
  timings.worker_ms = Math.round(performance.now() - started);
  trackSession(info.handle, { artifactURL, kind, kernelClass, manifest });
  return { ...info, timings, path: "gpu", path_why: choice.why };
}

// A GPU session's weights on device `g`: the chosen program's, and an encoder-decoder's nested encoder's too.
async function gpuWeights(g, artifactURL, manifest, kind, kernelClass, progress) {
  const program = chooseProgram(manifest, g.adapter, g.device, kernelClass);
  const weights = await loadWeights(g.device, artifactURL, manifest, progress, program);
  let encoder = null;
  if (kind === "seq2seq") {
    if (!manifest.seq2seq) throw new Error("not an encoder-decoder artifact (its manifest has no seq2seq block)");
    const encURL = new URL(manifest.seq2seq.encoder + "/", artifactURL).href;
    const encManifest = await fetchManifest(encURL);
    encoder = await loadWeights(g.device, encURL, encManifest, progress,
      chooseProgram(encManifest, g.adapter, g.device, kernelClass));
  }
  return { program, weights, encoder };
}

// recover.mjs's side here: a new device (the old sessions' host moved onto it), then each session again.
configure({
  async openDevice() {
    gpuPromise = null;
    const g = await gpu(gpuCaps);
    if (hostPromise) (await hostPromise).rebind(g.adapter, g.device);
    return g;
  },
  async reopen(g, handle, { artifactURL, kind, kernelClass, manifest }) {
    const t = performance.now();
    const { weights, encoder } = await gpuWeights(g, artifactURL, manifest, kind, kernelClass, () => {});
    const t2 = performance.now();
    const h = await hostPromise;
    const out = JSON.parse(await h.reopen(handle, kind, artifactURL, weights.pairs, encoder?.pairs, kernelClass || undefined));
    return { weights_ms: Math.round(t2 - t), reopen_ms: Math.round(performance.now() - t2), restored_tokens: out.restored_tokens };
  },
  notify: (event) => self.postMessage({ type: "device", event }),
});

async function run({ handle, feeds, dims }) {
  if (cpuSession(handle)) return cpuSession(handle).run(feeds);
  const h = await host();
  const out = await h.run(handle, feeds, dims ? JSON.stringify(dims) : null);  // (dims: an audio feed's rate)
  try {
    const list = out.toJs({ create_proxies: false });
    return list.map(([name, type, dims, data]) => ({ name, type, dims, data: new Uint8Array(data).buffer }));
  } finally {
    out.destroy();
  }
}

async function classify({ handle, pixels, width, height }) {
  if (cpuSession(handle)) return cpuSession(handle).classify(pixels, width, height);
  const h = await host();
  const out = await h.classify(handle, new Uint8Array(pixels), width, height);
  try {
    return out.toJs().map(([label, score]) => ({ label, score }));
  } finally {
    out.destroy();
  }
}

async function encode({ handle, text }) {
  if (cpuSession(handle)) return cpuSession(handle).encode(text);
  const h = await host();
  const ids = h.encode(handle, text);
  try {
    return ids.toJs();
  } finally {
    ids.destroy();
  }
}

async function chat({ handle, messages, options, prefixCache, method }, post) {
  const onToken = (id, text) => post({ type: "token", token: { id, text } });
  if (cpuSession(handle)) return cpuSession(handle).chat(messages, options, onToken);
  const h = await host();
  if (method) return JSON.parse(await h.api(handle, method, JSON.stringify(messages), (c) => post({ type: "chunk", chunk: JSON.parse(c) })));
  if (prefixCache) return chatWithPrefixCache(h, handle, messages, options || {}, onToken);
  return JSON.parse(await h.chat(handle, JSON.stringify(messages), JSON.stringify(options || {}), onToken));
}

async function seq2seq({ handle, text, feeds, audio, options }, post) {
  const h = await host();
  const onToken = (id, t) => post({ type: "token", token: { id, text: t } });
  const opts = JSON.stringify(options || {});
  if (audio) {  // {data: ArrayBuffer, sampleRate, channels}: float32 PCM rows, or a WAV file's bytes (sampleRate 0)
    return JSON.parse(await h.transcribe(handle, new Uint8Array(audio.data), audio.sampleRate, audio.channels, opts, onToken));
  }
  return JSON.parse(await h.seq2seq(handle, text !== undefined ? text : feeds, opts, onToken));
}

async function close({ handle }) {
  if (cpuSession(handle)) return closeCpuSession(handle);
  untrackSession(handle);
  (await host()).close(handle);
  return null;
}

// Destroy the device, as a driver reset would lose it (tests and demos of recovery; harmless otherwise: the page
// recovers). Resolves once the loss is seen, to its {reason, message}.
async function loseDevice() {
  if (!gpuPromise) throw new Error("no GPU device is open");
  const { device } = await gpuPromise;
  device.destroy();
  const info = await device.lost;
  return { reason: info.reason, message: info.message };
}

const OPS = { load, run, classify, encode, chat, seq2seq, close, vision: (msg) => visionTask(msg, host, cpuSession) };

// A Python exception arrives with its traceback: keep its last line, without webinfer's class path.
function errorText(err) {
  const text = String(err && err.message ? err.message : err);
  const lines = text.trim().split("\n");
  const last = lines[lines.length - 1];
  if (!text.includes("Traceback")) return text;
  return last.replace(/^webinfer\.errors\.WebinferError: /, "");
}

self.onmessage = async (event) => {
  const msg = event.data;
  if (msg.op === "cancel") {  // answered by the chat's own result, which stops after the current step
    if (typeof msg.handle === "string") cancelCpuSession(msg.handle);
    else hostPromise?.then((h) => h.cancel(msg.handle));
    return;
  }
  const post = (m) => self.postMessage({ id: msg.id, ...m });
  try {
    const op = OPS[msg.op];
    if (!op && msg.op !== "loseDevice") throw new Error(`unknown operation ${msg.op}`);
    const value = op ? await withRecovery(op, msg, post) : await loseDevice();
    const transfer = Array.isArray(value) ? value.map((o) => o.data).filter((d) => d instanceof ArrayBuffer) : [];
    self.postMessage({ id: msg.id, type: "result", value }, transfer);
  } catch (err) {
    console.error(err);
    post({ type: "error", message: errorText(err) });
  }
};
