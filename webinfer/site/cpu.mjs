// The CPU path of webinfer's worker: where the page has no WebGPU (navigator.gpu missing, no adapter) or
// `?path=cpu` asks for it, the artifact's CPU model (`build --cpu`: the source model as standard ONNX,
// assets/cpu-model.onnx, sha256-checked like every file) runs on onnxruntime-web's wasm backend, served from
// the site's own ort/ folder (SIMD; threads where the page is cross-origin isolated, as `webinfer serve` makes
// it). onnxruntime runs in a worker of its own (ort_worker.mjs: its start, the model's fetch, the session and
// chat's decode loop) where this worker boots Pyodide for the text meanwhile (the tokenizer, page_cpu.py), else
// here (ort_host.mjs either way). Sessions
// describe their inputs and outputs from the manifest, as the GPU path does, so load -> run is the same API on
// both paths: run, classify (an artifact built with --preprocess/--postprocess), encode (the artifact's
// tokenizer, in Pyodide) and chat (cpu-chat.mjs's loop in onnxruntime's worker, text made here).

import { describe } from "./cpu_session.mjs";
import { settle } from "./replies.mjs";
import { CACHE_NAME, fetchShard } from "./weights.mjs";

export { CpuSession } from "./cpu_session.mjs";  // (onnxruntime's session in this thread: the benchmark page's)

export const CPU_MODEL = "assets/cpu-model.onnx";

const ortHosts = {};  // {worker, here}: {post, pending}, onnxruntime's thread (ort_host.mjs), each started once
let nextId = 1;

// onnxruntime's host, started (its runtime too) on the first call; `base`: the site's ort/ folder. `ownWorker`:
// in a Web Worker of its own (ort_worker.mjs), where Pyodide boots in this one meanwhile; else here, in this
// worker's thread, over the same messages (nothing to overlap: a second worker would only add its start).
// `up` resolves once the worker runs: a nested worker's start needs this thread, which Pyodide's boot holds for
// seconds at a time (a warm chat visit's onnxruntime started only after it, 7.4 s in), so Pyodide waits for it.
function startOrt(base, origin, ownWorker) {
  const where = ownWorker ? "worker" : "here";
  if (ortHosts[where]) return ortHosts[where];
  const pending = new Map();
  let isUp;
  const up = new Promise((resolve) => {
    isUp = resolve;
  });
  const deliver = (data) => {
    if (data.type === "up") isUp();
    settle(pending, data);
  };
  let post;
  if (ownWorker) {
    const worker = new Worker(new URL("./ort_worker.mjs", import.meta.url), { type: "module" });
    worker.onmessage = ({ data }) => deliver(data);
    worker.onerror = (event) => {
      event.preventDefault?.();
      const err = new Error(`onnxruntime's worker failed: ${event.message || "could not start (see the console)"}`);
      for (const call of pending.values()) call.reject(err);
      pending.clear();
      delete ortHosts[where];
      isUp();
    };
    post = (message, transfer) => worker.postMessage(message, transfer);
  } else {
    isUp();
    const host = import("./ort_host.mjs");
    post = (message) => {
      host.then(({ handle }) => handle(message, deliver), (e) => deliver({ id: message.id, type: "error", message: e.message }));
    };
  }
  post({ op: "init", base, origin }, []);
  ortHosts[where] = { post, pending, up };
  return ortHosts[where];
}

function ortCall({ post, pending }, message, onMessage, transfer = []) {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject, onMessage });
    post({ ...message, id }, transfer);
  });
}

// the ArrayBuffers behind `values` (each once), to transfer rather than copy
function buffers(values) {
  const out = new Set();
  for (const v of values) {
    if (v instanceof ArrayBuffer) out.add(v);
    else if (ArrayBuffer.isView(v) && v.buffer instanceof ArrayBuffer) out.add(v.buffer);
  }
  return [...out];
}

// A session in onnxruntime's worker, with its text (page_cpu.py's CpuText, or null) here.
class RemoteSession {
  constructor(host, handle, manifest, kind, text, maxSeq) {
    this.host = host;
    this.handle = handle;
    this.text = text;
    this.maxSeq = maxSeq;
    this.inputs = kind === "chat" ? [] : manifest.inputs.map((io) => describe(manifest, io));
    this.outputs = kind === "chat" ? [] : manifest.programs[0].outputs.map((io) => describe(manifest, io));
  }

  classify(pixels, width, height) {
    return ortCall(this.host, { op: "classify", handle: this.handle, pixels, width, height }, null, buffers([pixels]));
  }

  encode(text) {
    if (!this.text) throw new Error("this artifact carries no tokenizer (build it from a folder holding tokenizer.json)");
    const ids = this.text.encode(text);
    try {
      return ids.toJs();
    } finally {
      ids.destroy();
    }
  }

  // feeds: [[name, type, dims, data]] as webinfer.mjs sends them; resolves to [{name, type, dims, data}].
  run(feeds) {
    return ortCall(this.host, { op: "run", handle: this.handle, feeds }, null, buffers(feeds.map((f) => f[3])));
  }

  // Stream the assistant's reply to `messages`; onToken(id, text) per token; resolves to the turn's stats (as the
  // WebGPU path's Generator.stats). The prompt's ids and the options are made here, the tokens in onnxruntime's
  // worker, each one's text here as it arrives.
  async chat(messages, options, onToken) {
    const o = JSON.parse(this.text.options(JSON.stringify(options || {})));
    const idsProxy = this.text.chat_ids(JSON.stringify(messages));
    const ids = idsProxy.toJs();
    idsProxy.destroy();
    const eos = o.stop_at_eos ? this.text.eos_token_id : -1;
    this.text.start();
    let text = "";
    const stats = await ortCall(this.host, { op: "chat", handle: this.handle, ids, options: o, eos }, ({ token }) => {
      const piece = this.text.push(token);
      text += piece;
      onToken(token, piece);
    });
    return { ...stats, text: text + this.text.flush() };
  }

  cancel() {
    this.host.post({ op: "cancel", handle: this.handle }, []);
  }

  close() {
    this.text?.destroy?.();  // (the Python object behind the proxy)
    return ortCall(this.host, { op: "close", handle: this.handle });
  }
}

const sessions = new Map();
let nextHandle = 1;

// The CPU path's load (worker.mjs): in onnxruntime's worker, its runtime started, the CPU model fetched (Cache
// Storage first, stored there meanwhile) and checked like a shard, then the session; here, at the same time, text
// (tokenizer, chat template) in Pyodide (page_cpu.py), awaited once the session is made. timings.timeline: each
// phase's [start, end] in ms since this worker started. host: {python, site, root, started}.
export async function loadCPU(host, artifactURL, manifest, kind, choice, progress) {
  const entry = manifest.assets?.[CPU_MODEL];
  if (!entry) throw new Error(`No WebGPU here (${choice.why}), and this artifact carries no CPU model (build it with --cpu).`);
  const s = await host.site();
  if (!s.ort) throw new Error("this site was bundled without onnxruntime-web (the CPU path): bundle it again");
  const base = new URL(s.ort, host.root).href;
  const needsText = kind === "chat" || Boolean(manifest.assets?.["assets/tokenizer.json"]);
  const ort = startOrt(base, performance.timeOrigin + host.started, needsText);  // (its runtime starts while the rest is fetched)
  const t = performance.now();
  const marks = {};
  const text = needsText ? ort.up.then(() => openText(host, artifactURL, manifest, marks)) : null;
  text?.catch(() => {});  // (awaited once the session is made)
  let labels = null;
  const labelsEntry = manifest.classify?.labels ? manifest.assets?.[`assets/${manifest.classify.labels}`] : null;
  if (labelsEntry) {
    const got = await fetchShard(null, new URL(labelsEntry.file, artifactURL).href, labelsEntry, () => {});
    labels = new TextDecoder().decode(got.bytes).split("\n").filter((line, i, all) => i < all.length - 1 || line);
  }
  const handle = `cpu-${nextHandle++}`;
  const opened = await ortCall(ort, { op: "open", handle, url: new URL(entry.file, artifactURL).href, entry, manifest, kind,
    labels, base }, (m) => progress(m.progress));
  const t2 = performance.now();
  let got = null;
  try {
    got = text ? await text : null;
    if (kind === "chat" && !got) throw new Error("chat needs the artifact's tokenizer (build it from a folder holding tokenizer.json)");
  } catch (e) {
    ortCall(ort, { op: "close", handle }).catch(() => {});
    throw e;
  }
  const session = new RemoteSession(ort, handle, manifest, kind, got, opened.max_seq);
  sessions.set(handle, session);
  const timings = { ...opened.marks, weight_bytes: entry.bytes, shards: 1, load_start_ms: Math.round(t - host.started),
    python_ms: Math.round(performance.now() - t2), ...marks,  // (python_ms: the wait for Pyodide once the session was made)
    worker_ms: Math.round(performance.now() - host.started), timeline: { ...opened.timeline, ...marks.timeline } };
  const n = opened.threads;
  const extra = kind === "chat" ? { max_seq: opened.max_seq } : {};
  return { handle, inputs: session.inputs, outputs: session.outputs, tokenizer: Boolean(got), timings, ...extra,
    adapter: `CPU (onnxruntime-web wasm, ${n} thread${n === 1 ? "" : "s"})`, kernel_class: "cpu",
    kernel_class_why: choice.why, path: "cpu", path_why: choice.why,
    output_formats: manifest.output_formats || [] };  // (classic ML: formatted by webinfer.mjs, as on the GPU path)
}

// page_cpu.py's CpuText for the artifact: its tokenizer files fetched and checked here (while Pyodide starts),
// handed to Python as text.
async function openText(host, artifactURL, manifest, marks) {
  const python = host.python();
  const cache = await caches.open(CACHE_NAME).catch(() => null);
  const texts = await Promise.all(["tokenizer.json", "tokenizer_config.json"].map(async (name) => {
    const entry = manifest.assets?.[`assets/${name}`];
    if (!entry) return null;
    const got = await fetchShard(cache, new URL(entry.file, artifactURL).href, entry, () => {});
    return new TextDecoder().decode(got.bytes);
  }));
  if (texts[0] === null) throw new Error("this artifact carries no tokenizer (build it from a folder holding tokenizer.json)");
  const { pyodide, marks: boot } = await python;
  const t = performance.now();
  const text = pyodide.pyimport("webinfer.page_cpu").CpuText.from_texts(texts[0], texts[1]);
  const { timeline, ...rest } = boot;
  Object.assign(marks, rest, { text_open_ms: Math.round(performance.now() - t),
    timeline: { ...timeline, text_open: [Math.round(t - host.started), Math.round(performance.now() - host.started)] } });
  return text;
}

// The CPU session behind `handle`; undefined for the WebGPU path's handles (numbers).
export function cpuSession(handle) {
  if (typeof handle !== "string") return undefined;
  const session = sessions.get(handle);
  if (!session) throw new Error(`no open session ${handle} (closed?)`);
  return session;
}

// Stop a CPU chat's reply after the current token (worker.mjs's cancel message).
export function cancelCpuSession(handle) {
  sessions.get(handle)?.cancel?.();
}

export async function closeCpuSession(handle) {
  const session = sessions.get(handle);
  sessions.delete(handle);
  await session.close();
  return null;
}
