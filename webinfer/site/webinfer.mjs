// Shared boot for webinfer's pages: Pyodide + webinfer's wheel on one side, and on the other the GPU
// device plus the artifact's weights, which JavaScript fetches shard by shard, checks (sha256), keeps in
// Cache Storage and writes straight into GPU buffers, so they never pass through Python's heap.
// Everything is fetched from this page's own origin (unless the site was bundled with --pyodide-url).

const CACHE_NAME = "webinfer-weights-v1";

export class NoWebGPU extends Error {}

export async function openGPU() {
  if (!navigator.gpu) {
    throw new NoWebGPU("This browser has no WebGPU (navigator.gpu is missing). Use a recent Chromium " +
      "on a page served from 127.0.0.1 or over HTTPS; without a GPU, start it with --enable-unsafe-webgpu.");
  }
  const adapter = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
  if (!adapter) throw new NoWebGPU("navigator.gpu.requestAdapter() found no WebGPU adapter.");
  // The same limits BrowserDevice.create asks for: big weights need big bindings.
  const device = await adapter.requestDevice({ requiredLimits: {
    maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
    maxBufferSize: adapter.limits.maxBufferSize,
  } });
  return { adapter, device };
}

export function adapterText(adapter) {
  const i = adapter.info || {};
  return [i.vendor, i.architecture, i.device, i.description].filter(Boolean).join(" ") +
    (adapter.isFallbackAdapter ? " (fallback adapter)" : "");
}

function hex(buf) {
  return Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, "0")).join("");
}

function mib(n) {
  return (n / 1048576).toFixed(1);
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
  if (cache && !cached) await cache.put(key, new Response(bytes));
  return { bytes, cached };
}

// One storage buffer per weight tensor, as SessionCore._upload_weights makes them; every chunk is written
// from its shard with queue.writeBuffer. Returns [[tensorId, GPUBuffer], ...] for the Python session.
export async function loadWeights(device, artifactURL, manifest, progress) {
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  const pairs = [];
  const perShard = manifest.shards.map(() => []);
  manifest.tensors.forEach((t, tid) => {
    if (t.kind !== "weight") return;
    let n = 1;
    for (const d of t.shape) {
      if (!Number.isInteger(d)) throw new Error(`weight tensor ${tid} has a symbolic shape`);
      n *= d;
    }
    const buffer = device.createBuffer({ size: Math.max(16, Math.ceil((n * 4) / 16) * 16), usage });
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
  progress(0, total, false);
  for (let i = 0; i < manifest.shards.length; i++) {
    const entry = manifest.shards[i];
    const url = new URL(entry.file, artifactURL).href;
    const { bytes, cached } = await fetchShard(cache, url, entry, (n, fromCacheNow) => {
      loaded += n;
      progress(loaded, total, fromCacheNow);
    });
    if (cached) fromCache += 1;
    for (const [buffer, offset, size, dst] of perShard[i]) device.queue.writeBuffer(buffer, dst, bytes, offset, size);
  }
  return { pairs, total, fromCache, shards: manifest.shards.length };
}

export function progressBar(el) {
  const bar = el.querySelector("progress");
  const label = el.querySelector(".progress-label");
  return (loaded, total, cached) => {
    bar.max = total || 1;
    bar.value = loaded;
    const pct = total ? Math.floor((100 * loaded) / total) : 100;
    label.textContent = `weights ${mib(loaded)} / ${mib(total)} MiB (${pct}%)${cached ? " from cache" : ""}`;
  };
}

// Boot a demo page: Pyodide + wheel in parallel with device + weights, then the page's main.py `setup`.
// Returns { pyodide, py, adapter, device, timings }; `py` is main.py's globals.
export async function startPage({ artifact, statusEl, progressEl, main = "main.py" }) {
  const timings = {};
  const here = new URL("./", location.href);
  const root = new URL("../", here);
  const status = (s) => { statusEl.textContent = s; };
  const site = await (await fetch(new URL("site.json", root))).json();
  const artifactURL = new URL(artifact, here);
  status("loading Python, the GPU device and the weights…");
  const python = (async () => {
    const t = performance.now();
    const pyodideURL = new URL(site.pyodide || "pyodide/", root).href;
    const { loadPyodide } = await import(new URL("pyodide.mjs", pyodideURL).href);
    const pyodide = await loadPyodide({ indexURL: pyodideURL });
    await pyodide.loadPackage(new URL(site.wheel, root).href, { messageCallback: () => {} });
    const source = await (await fetch(new URL(main, here))).text();
    pyodide.runPython(source, { filename: main });
    timings.python_ms = Math.round(performance.now() - t);
    return pyodide;
  })();
  const gpu = (async () => {
    const t = performance.now();
    const { adapter, device } = await openGPU();
    const manifest = await (await fetch(new URL("manifest.json", artifactURL))).json();
    const weights = await loadWeights(device, artifactURL.href, manifest, progressBar(progressEl));
    timings.weights_ms = Math.round(performance.now() - t);
    timings.weight_bytes = weights.total;
    timings.shards_from_cache = weights.fromCache;
    timings.shards = weights.shards;
    return { adapter, device, weights };
  })();
  const [pyodide, { adapter, device, weights }] = await Promise.all([python, gpu]);
  status("compiling kernels…");
  const t = performance.now();
  const py = pyodide.globals;
  await py.get("setup")(artifactURL.href, adapter, device, weights.pairs);
  timings.session_ms = Math.round(performance.now() - t);
  timings.ready_ms = Math.round(performance.now());  // since navigation start
  return { pyodide, py, adapter, device, timings };
}

export function showError(statusEl, outEl, err) {
  const text = String(err && err.message ? err.message : err);
  console.error(text);
  statusEl.textContent = text;
  statusEl.className = "error";
  outEl.dataset.error = text;
  outEl.dataset.done = "1";
}

export function query() {
  return new URLSearchParams(location.search);
}
