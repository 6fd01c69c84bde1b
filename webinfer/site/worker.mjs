// The Web Worker behind webinfer.mjs: Pyodide, WebGPU and webinfer's Python runtime run here, so the page's
// main thread only renders. One worker per page serves every session it opens, over one GPU device.
//
// Messages in:  {id, op: "load", url, kind: "session" | "chat", kernelClass, path: "cpu" | "gpu" | undefined}  {id, op: "run", handle, feeds}
//               {id, op: "encode", handle, text}  {id, op: "chat", handle, messages, options, prefixCache | method (OpenAI API)}
//               {id, op: "classify", handle, pixels, width, height}  {id, op: "vision", handle, task, pixels, width, height}
//               {op: "cancel", handle}  {id, op: "close", handle}
// Messages out: {id, type: "progress", ...}  {id, type: "token", token: {id, text}}  {id, type: "chunk", chunk}
//               {id, type: "result", value}  {id, type: "error", message}
//
// Weights never pass through Python: the worker fetches each shard (Cache Storage first), checks its sha256
// and writes it into GPU buffers; Python opens the session over those buffers. Everything is fetched from
// this site's own origin (unless the site was bundled with --pyodide-url).
//
// Two paths: WebGPU (Pyodide + webinfer's kernels) and, where the page has no WebGPU or `path: "cpu"` forces
// it, the artifact's CPU model on onnxruntime-web's wasm backend (cpu.mjs; no Python). Each session says
// which path it runs and why.

import { CPU_MODEL, cancelCpuSession, closeCpuSession, cpuSession, openCpuSession } from "./cpu.mjs";
import { chatWithPrefixCache } from "./prefix_store.mjs";
import { visionTask } from "./tasks.mjs";

const CACHE_NAME = "webinfer-weights-v1";
const ROOT = new URL("../", import.meta.url);
const started = performance.now();

let sitePromise = null;
let pythonPromise = null;
let gpuPromise = null;
let hostPromise = null;

function site() {
  sitePromise ??= fetch(new URL("site.json", ROOT)).then((r) => {
    if (!r.ok) throw new Error(`GET site.json: HTTP ${r.status}`);
    return r.json();
  });
  return sitePromise;
}

// Pyodide + webinfer's browser wheel, once per worker.
function python() {
  pythonPromise ??= (async () => {
    const t = performance.now();
    const s = await site();
    const base = new URL(s.pyodide || "pyodide/", ROOT).href;
    const { loadPyodide } = await import(new URL("pyodide.mjs", base).href);
    const pyodide = await loadPyodide({ indexURL: base });
    await pyodide.loadPackage(new URL(s.wheel, ROOT).href, { messageCallback: () => {} });
    const webpage = pyodide.pyimport("webinfer.page");
    return { pyodide, webpage, ms: Math.round(performance.now() - t) };
  })();
  return pythonPromise;
}

// The WebGPU adapter and device, once per worker.
export async function openGPU(caps) {
  if (!navigator.gpu) {
    throw new Error("This browser has no WebGPU (navigator.gpu is missing in workers). Use a recent Chromium " +
      "on a page served from 127.0.0.1 or over HTTPS; without a GPU, start it with --enable-unsafe-webgpu.");
  }
  const adapter = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
  if (!adapter) throw new Error("navigator.gpu.requestAdapter() found no WebGPU adapter.");
  // The same limits and features BrowserDevice.create asks for: big weights need big bindings, and the kernel
  // classes that need shader-f16 or subgroups can be chosen where the adapter has them.
  const device = await adapter.requestDevice({
    requiredLimits: {
      maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
      maxBufferSize: adapter.limits.maxBufferSize,
    },
    requiredFeatures: ["shader-f16", "subgroups"].filter((f) => adapter.features.has(f)),
  });
  return { adapter, device: caps ? capped(device, caps) : device };
}

// A device that reports limits no larger than `caps` (load(url, {deviceLimits})): WebGPU grants at least its
// defaults, so a smaller device is seen through this view, to try how a page behaves on one. Program choice,
// in the worker and in Python, reads these limits; everything else is the device itself.
function capped(device, caps) {
  const limits = {};
  for (const name in device.limits) limits[name] = Math.min(device.limits[name], caps[name] ?? Infinity);
  return new Proxy(device, {
    get: (target, key) => {
      if (key === "limits") return limits;
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

// runtime/select.py's rule, kept in step with it (Python applies it again and the two must agree): the first
// program the device can run (features, WGSL language features, limits) that is tuned for this adapter's
// type, else the first it can run; `forced` (load(url, {kernelClass})) picks one by name.
const SOFTWARE_ADAPTERS = ["swiftshader", "llvmpipe", "lavapipe", "softpipe", "warp", "microsoft basic render"];
const LIMIT_NAMES = {
  "max-storage-buffers-per-shader-stage": "maxStorageBuffersPerShaderStage",
  "max-compute-invocations-per-workgroup": "maxComputeInvocationsPerWorkgroup",
  "max-compute-workgroup-storage-size": "maxComputeWorkgroupStorageSize",
  "max-storage-buffer-binding-size": "maxStorageBufferBindingSize",
  "max-buffer-size": "maxBufferSize",
};

function adapterType(adapter) {
  const i = adapter.info || {};
  const text = [i.vendor, i.architecture, i.device, i.description].join(" ").toLowerCase();
  if (i.isFallbackAdapter || adapter.isFallbackAdapter || SOFTWARE_ADAPTERS.some((n) => text.includes(n))) return "cpu";
  return "unknown";  // browsers do not say integrated or discrete
}

export function chooseProgram(manifest, adapter, device, forced) {
  const has = (f) => device.features.has(f) || Boolean(navigator.gpu.wgslLanguageFeatures?.has(f));
  const missing = (p) => (p.requires.features || []).filter((f) => !has(f)).map((f) => `feature ${f}`).concat(
    Object.entries(p.requires.limits || {}).filter(([k, v]) => k in LIMIT_NAMES && device.limits[LIMIT_NAMES[k]] < v)
      .map(([k, v]) => `${k} ${v} (device: ${device.limits[LIMIT_NAMES[k]]})`));
  const runs = (p) => !missing(p).length;
  const programs = manifest.programs;
  if (forced) {
    const p = programs.find((q) => q.class === forced);
    if (!p) throw new Error(`kernel class ${forced} is not in this artifact`);
    if (!runs(p)) throw new Error(`kernel class ${forced} cannot run on this adapter: needs ${missing(p).join(", ")}`);
    return p;
  }
  const type = adapterType(adapter);
  const runnable = programs.filter(runs);
  // (before any weight shard is fetched: the page says why in one line instead of downloading what cannot run)
  if (!runnable.length) {
    throw new Error("no program of this artifact runs on this adapter: " +
      programs.map((p) => `${p.class} needs ${missing(p).join(", ")}`).join("; "));
  }
  return runnable.find((p) => p.adapter_types.includes(type)) || runnable[0];
}

function gpu(caps) {
  gpuPromise ??= openGPU(caps);
  return gpuPromise;
}

function host() {
  hostPromise ??= Promise.all([python(), gpu()]).then(([py, g]) => py.webpage.WorkerHost(g.adapter, g.device));
  return hostPromise;
}

function hex(buf) {
  return Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, "0")).join("");
}

async function readBody(response, expected, onBytes) {
  const out = new Uint8Array(expected);
  let at = 0;
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (at + value.length > expected) throw new Error(`${response.url}: larger than the manifest says`);
    out.set(value, at);
    at += value.length;
    onBytes(value.length);
  }
  if (at !== expected) throw new Error(`${response.url}: ${at} bytes, the manifest expects ${expected}`);
  return out;
}

// Fetch one shard (Cache Storage first), check its size and sha256; returns its bytes and where they came from.
async function fetchShard(cache, url, entry, onBytes) {
  const key = `${url}?sha256=${entry.sha256}`;
  let response = cache ? await cache.match(key) : undefined;
  const cached = Boolean(response);
  if (!response) {
    response = await fetch(url);
    if (!response.ok) throw new Error(`GET ${url}: HTTP ${response.status}`);
  }
  const bytes = await readBody(response, entry.bytes, (n) => onBytes(n, cached));
  const digest = hex(await crypto.subtle.digest("SHA-256", bytes));
  if (digest !== entry.sha256) {
    if (cache) await cache.delete(key);
    throw new Error(`${url}: sha256 does not match the manifest (file altered or corrupt)`);
  }
  if (cache && !cached) {  // (a full quota must not fail the load: the next visit fetches it again)
    await cache.put(key, new Response(bytes)).catch((e) => console.warn(`Cache Storage refused ${url}: ${e.message}`));
  }
  return { bytes, cached };
}

// A weight bound as a texture (the program's `textures`), laid out as webinfer/format/textures.py says: texels
// row by row, a power-of-two width of at least 256 texels (a shorter tensor: its count rounded up), at most
// 8192 rows and columns. Returns [width, height].
const TEXEL_BYTES = { rgba32uint: 16, rg32float: 8, r32float: 4 };
function pow2AtLeast(n) {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}
export function textureSize(nbytes, format) {
  const texels = Math.max(1, Math.ceil(nbytes / TEXEL_BYTES[format]));
  const width = Math.max(pow2AtLeast(Math.min(texels, 256)), pow2AtLeast(Math.ceil(texels / 8192)));
  const height = Math.ceil(texels / width);
  if (!(format in TEXEL_BYTES) || width > 8192 || height > 8192) {
    throw new Error(`a weight of ${nbytes} bytes cannot be a ${format} texture`);
  }
  return [width, height];
}

// One storage buffer per weight tensor the program reads, as SessionCore._upload_weights makes them; every
// chunk is written from its shard with queue.writeBuffer. A weight the program binds as a texture is gathered
// in memory and written once, when its shards are in. Returns [[tensorId, GPUBuffer | GPUTexture], ...].
export async function loadWeights(device, artifactURL, manifest, progress, program = manifest.programs[0]) {
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  const pairs = [];
  const perShard = manifest.shards.map(() => []);
  const textureFormats = new Map(program.textures || []);
  const staged = [];
  program.weights.forEach((tid) => {
    const t = manifest.tensors[tid];
    for (const d of t.shape) {
      if (!Number.isInteger(d)) throw new Error(`weight tensor ${tid} has a symbolic shape`);
    }
    // the bytes its chunks write: 4 per element, less for packed types (int4, bfloat16, float8...)
    let nbytes = 0;
    for (const [, , size, dst] of t.chunks) nbytes = Math.max(nbytes, dst + size);
    if (textureFormats.has(tid)) {
      const format = textureFormats.get(tid);
      const [width, height] = textureSize(nbytes, format);
      const texture = device.createTexture({
        size: [width, height], format, usage: GPUTextureUsage.TEXTURE_BINDING | GPUTextureUsage.COPY_DST,
      });
      const bytes = new Uint8Array(width * height * TEXEL_BYTES[format]);
      pairs.push([tid, texture]);
      staged.push({ texture, bytes, width, height, row: width * TEXEL_BYTES[format] });
      for (const [shard, offset, size, dst] of t.chunks) if (size) perShard[shard].push([bytes, offset, size, dst]);
      return;
    }
    const buffer = device.createBuffer({ size: Math.max(16, Math.ceil(nbytes / 16) * 16), usage });
    pairs.push([tid, buffer]);
    for (const [shard, offset, size, dst] of t.chunks) if (size) perShard[shard].push([buffer, offset, size, dst]);
  });
  const total = manifest.shards.reduce((s, e) => s + e.bytes, 0);
  let loaded = 0;
  let fromCache = 0;
  let cache = null;
  try {
    cache = await caches.open(CACHE_NAME);
  } catch (e) {
    console.warn("Cache Storage unavailable; weights will be fetched every visit:", e);
  }
  progress({ phase: "weights", loaded: 0, total, cached: false });
  for (let i = 0; i < manifest.shards.length; i++) {
    const entry = manifest.shards[i];
    const url = new URL(entry.file, artifactURL).href;
    const { bytes, cached } = await fetchShard(cache, url, entry, (n, fromCacheNow) => {
      loaded += n;
      progress({ phase: "weights", loaded, total, cached: fromCacheNow });
    });
    if (cached) fromCache += 1;
    for (const [target, offset, size, dst] of perShard[i]) {
      if (target instanceof Uint8Array) target.set(bytes.subarray(offset, offset + size), dst);
      else device.queue.writeBuffer(target, dst, bytes, offset, size);
    }
  }
  for (const s of staged) {
    device.queue.writeTexture({ texture: s.texture }, s.bytes, { bytesPerRow: s.row, rowsPerImage: s.height },
      [s.width, s.height]);
  }
  return { pairs, total, fromCache, shards: manifest.shards.length };
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

// The CPU path's load: the CPU model fetched (Cache Storage first) and checked like a shard, then cpu.mjs; text
// (tokenizer, chat template) in Pyodide (page_cpu.py), which boots while the model streams in.
async function loadCPU(artifactURL, manifest, kind, choice, progress) {
  const entry = manifest.assets?.[CPU_MODEL];
  if (!entry) throw new Error(`No WebGPU here (${choice.why}), and this artifact carries no CPU model (build it with --cpu).`);
  const text = kind === "chat" || manifest.assets?.["assets/tokenizer.json"]
    ? python().then(({ pyodide }) => pyodide.pyimport("webinfer.page_cpu").CpuText.open(artifactURL)) : null;
  text?.catch(() => {});  // (awaited below)
  const labelsEntry = manifest.classify?.labels ? manifest.assets?.[`assets/${manifest.classify.labels}`] : null;
  const s = await site();
  if (!s.ort) throw new Error("this site was bundled without onnxruntime-web (the CPU path): bundle it again");
  const t = performance.now();
  const cache = await caches.open(CACHE_NAME).catch(() => null);
  let loaded = 0;
  const { bytes, cached } = await fetchShard(cache, new URL(entry.file, artifactURL).href, entry, (n, c) => {
    loaded += n;
    progress({ phase: "weights", loaded, total: entry.bytes, cached: c });
  });
  const timings = { weights_ms: Math.round(performance.now() - t), weight_bytes: entry.bytes, shards: 1,
    shards_from_cache: cached ? 1 : 0, python_ms: 0 };
  let labels = null;
  if (labelsEntry) {
    const got = await fetchShard(null, new URL(labelsEntry.file, artifactURL).href, labelsEntry, () => {});
    labels = new TextDecoder().decode(got.bytes).split("\n").filter((line, i, all) => i < all.length - 1 || line);
  }
  const t2 = performance.now();
  const extras = { text: text ? await text : null, labels };
  timings.python_ms = Math.round(performance.now() - t2);
  progress({ phase: "compile" });
  const info = await openCpuSession(manifest, bytes, new URL(s.ort, ROOT).href, choice, timings, kind, extras);
  timings.worker_ms = Math.round(performance.now() - started);
  return info;
}

// -- operations ------------------------------------------------------------------------------------------
async function load({ url, kind, kernelClass, path, deviceLimits }, post) {
  const progress = (p) => post({ type: "progress", progress: p });
  const timings = {};
  const artifactURL = new URL(url.endsWith("/") ? url : url + "/", ROOT).href;
  const choice = await choosePath(path, deviceLimits);
  if (choice.path === "cpu") {
    if (kernelClass) throw new Error(`kernel class ${kernelClass}: a GPU program, but this session runs on the CPU (${choice.why})`);
    return loadCPU(artifactURL, await fetchManifest(artifactURL), kind, choice, progress);
  }
  const { adapter, device } = await gpu();
  const t = performance.now();
  const manifest = await fetchManifest(artifactURL);
  if (!path && !kernelClass && adapterType(adapter) === "cpu" && manifest.assets?.[CPU_MODEL]) {
    // WebGPU emulated on the CPU (SwiftShader) runs these models 1-25x slower than onnxruntime-web's wasm
    // backend in the same page (docs/notes.md, `webinfer bench`): the visitor gets the faster path.
    const name = [adapter.info?.vendor, adapter.info?.architecture, adapter.info?.description].filter(Boolean).join(" ");
    return loadCPU(artifactURL, manifest, kind, { path: "cpu", why: `the WebGPU adapter (${name || "fallback"}) is ` +
      "a software one; onnxruntime-web's wasm backend is faster here (path=gpu forces WebGPU)" }, progress);
  }
  progress({ phase: "python" });
  const py = python();  // Pyodide boots while the weights stream in
  const program = chooseProgram(manifest, adapter, device, kernelClass);
  const weights = await loadWeights(device, artifactURL, manifest, progress, program);
  Object.assign(timings, { weights_ms: Math.round(performance.now() - t), weight_bytes: weights.total,
    shards_from_cache: weights.fromCache, shards: weights.shards });
  timings.python_ms = (await py).ms;
  progress({ phase: "compile" });
  const t2 = performance.now();
  const h = await host();
  let info;
  if (kind === "seq2seq") {  // the nested encoder artifact's weights too, on the same device
    if (!manifest.seq2seq) throw new Error("not an encoder-decoder artifact (its manifest has no seq2seq block)");
    const encURL = new URL(manifest.seq2seq.encoder + "/", artifactURL).href;
    const encManifest = await fetchManifest(encURL);
    const enc = await loadWeights(device, encURL, encManifest, progress,
      chooseProgram(encManifest, adapter, device, kernelClass));
    info = JSON.parse(await h.open_seq2seq(artifactURL, weights.pairs, enc.pairs, kernelClass || undefined));
  } else {
    const open = kind === "chat" ? h.open_chat : h.open_session;
    info = JSON.parse(await open(artifactURL, weights.pairs, kernelClass || undefined));
  }
  if (info.kernel_class !== program.class) {
    throw new Error(`kernel class: the worker chose ${program.class}, Python ${info.kernel_class} (${info.kernel_class_why})`);
  }
  timings.session_ms = Math.round(performance.now() - t2);
  timings.worker_ms = Math.round(performance.now() - started);
  return { ...info, timings, path: "gpu", path_why: choice.why };
}

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

async function seq2seq({ handle, text, feeds, options }, post) {
  const h = await host();
  const onToken = (id, t) => post({ type: "token", token: { id, text: t } });
  return JSON.parse(await h.seq2seq(handle, text !== undefined ? text : feeds, JSON.stringify(options || {}), onToken));
}

async function close({ handle }) {
  if (cpuSession(handle)) return closeCpuSession(handle);
  (await host()).close(handle);
  return null;
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
    if (!op) throw new Error(`unknown operation ${msg.op}`);
    const value = await op(msg, post);
    const transfer = Array.isArray(value) ? value.map((o) => o.data).filter((d) => d instanceof ArrayBuffer) : [];
    self.postMessage({ id: msg.id, type: "result", value }, transfer);
  } catch (err) {
    console.error(err);
    post({ type: "error", message: errorText(err) });
  }
};
