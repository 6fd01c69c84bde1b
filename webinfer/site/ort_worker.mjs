// onnxruntime-web in a Web Worker of its own, started by the page's worker (cpu.mjs) for the CPU path. Its
// runtime's start (wasm compiled, threads started), the CPU model's fetch (Cache Storage first, sha256-checked
// like every file), the session's creation and chat's decode loop run on this thread, while the page's worker
// boots Pyodide for the tokenizer: on two cores the two starts overlap instead of taking turns on one thread
// (onnxruntime-web's own proxy worker, `env.wasm.proxy`, is refused inside a worker: it needs a document). The
// decode loop lives here, so a token costs no round trip: each one is posted on, and text is made from it in
// Pyodide (page_cpu.py) on the other thread.
//
// Messages in:  {op: "init", base, origin}  {id, op: "open", handle, url, entry, manifest, kind, labels}
//               {id, op: "run", handle, feeds}  {id, op: "classify", handle, pixels, width, height}
//               {id, op: "chat", handle, ids, options, eos}  {op: "cancel", handle}  {id, op: "close", handle}
// Messages out: {id, type: "progress", progress}  {id, type: "token", token}  {id, type: "result", value}
//               {id, type: "error", message}
// `base`: the site's ort/ folder; `origin`: the page worker's start (epoch ms): the timeline's zero.

import { CpuChat } from "./cpu-chat.mjs";
import { CACHE_NAME, fetchShard } from "./weights.mjs";

// The CPU model's int4 weights are DequantizeLinear of constants: folded into float32 weights when the session is
// made, which onnxruntime does only with its QDQ fusions off (graph/cpu_weights.py SESSION_CONFIG).
const SESSION_OPTIONS = { executionProviders: ["wasm"], extra: { session: { disable_quant_qdq: "1" } } };

// A one-node ONNX model (y = Identity(x), float [1]): opening it starts onnxruntime-web's runtime (its wasm
// fetched and compiled, its threads started), which the first real session would otherwise do only once the
// CPU model is in.
const STARTER = "CAgSADo3ChAKAXgSAXkiCElkZW50aXR5EgFnWg8KAXgSCgoICAESBAoCCAFiDwoBeRIKCggIARIECgIIAUIECgAQDQ==";
const PROGRESS_BYTES = 1 << 20;  // bytes between two progress messages (each crosses two threads)

let origin = performance.timeOrigin;
let ortPromise = null;
const startMarks = {};
const sessions = new Map();

// ms since the page worker's start, on its clock
const since = (t) => Math.round(performance.timeOrigin + t - origin);

// onnxruntime-web, once, from `base`, its runtime started.
function ortWeb(base) {
  ortPromise ??= (async () => {
    const t = performance.now();
    const ort = await import(new URL("ort.wasm.min.mjs", base).href);
    ort.env.wasm.wasmPaths = base;
    ort.env.wasm.numThreads = self.crossOriginIsolated ? Math.max(1, Math.min(4, navigator.hardwareConcurrency || 1)) : 1;
    const starter = await ort.InferenceSession.create(Uint8Array.from(atob(STARTER), (c) => c.charCodeAt(0)),
      { executionProviders: ["wasm"] });
    await starter.release();
    startMarks.ort_init_ms = Math.round(performance.now() - t);
    startMarks.ort_init = [since(t), since(performance.now())];
    return ort;
  })();
  return ortPromise;
}

function dimText(d) {
  return Number.isInteger(d) ? d : typeof d === "string" ? d : JSON.stringify(d);
}

function describe(manifest, io) {
  const t = manifest.tensors[io.tensor];
  return { name: io.name, type: t.dtype, dims: t.shape.map(dimText) };
}

// A plain session: run (feeds as webinfer.mjs sends them) and classify (an artifact built with
// --preprocess/--postprocess: its CPU model carries the same prologue and epilogue as standard ONNX ops).
class CpuSession {
  constructor(ort, session, manifest, labels) {
    this.ort = ort;
    this.session = session;
    this.manifest = manifest;
    this.labels = labels;
    this.outputs = manifest.programs[0].outputs.map((io) => describe(manifest, io));
  }

  // RGBA8 pixels of any size -> [{label, score}], best first, as runtime/vision.py classify answers.
  async classify({ pixels, width, height }) {
    const pre = this.manifest.preprocess;
    const info = this.manifest.classify;
    if (!pre) throw new Error("this artifact takes no image (build it with --preprocess); pass the model's inputs to run()");
    if (!info) throw new Error("this artifact has no classification epilogue (build it with --postprocess)");
    const bytes = new Uint8Array(pixels);
    if (!(width >= 1 && height >= 1) || bytes.length !== width * height * 4) {
      throw new Error(`image: ${bytes.length} bytes are not ${width}x${height} RGBA8 pixels`);
    }
    // one uint32 per pixel, R in the low byte: the ImageData's bytes as they are (as on the WebGPU path)
    const image = new this.ort.Tensor("uint32", new Uint32Array(bytes.buffer, bytes.byteOffset, width * height),
      [height, width]);
    const out = await this.session.run({ [pre.image]: image }, [info.scores, info.indices]);
    const scores = Array.from(out[info.scores].data, Number);
    const indices = Array.from(out[info.indices].data, Number);
    return scores.map((score, i) => ({ label: this.labels ? this.labels[indices[i]] : String(indices[i]), score }));
  }

  // feeds: [[name, type, dims, data]]; returns [{name, type, dims, data}].
  async run({ feeds }) {
    const inputs = {};
    for (const [name, type, dims, data] of feeds) inputs[name] = new this.ort.Tensor(type, data, dims);
    const out = await this.session.run(inputs);
    return this.outputs.map(({ name }) => {
      const t = out[name];
      const d = t.data;
      return { name, type: t.type, dims: Array.from(t.dims, Number),
        data: new Uint8Array(d.buffer, d.byteOffset, d.byteLength).slice().buffer };
    });
  }

  close() {
    return this.session.release();
  }
}

// The CPU model fetched and checked, its session made (a chat's warmed up by one short step); the Cache Storage
// copy is stored meanwhile. Resolves to what cpu.mjs's load answers with, and the marks of each phase.
async function open({ handle, url, entry, manifest, kind, labels, base }, post) {
  const ortLoaded = ortWeb(base);
  ortLoaded.catch(() => {});  // (awaited below)
  const marks = {};
  const t = performance.now();
  const cache = await caches.open(CACHE_NAME).catch(() => null);
  let loaded = 0;
  let posted = 0;
  const { bytes, cached, stored } = await fetchShard(cache, url, entry, (n, c) => {
    loaded += n;
    if (loaded - posted < PROGRESS_BYTES && loaded < entry.bytes) return;
    posted = loaded;
    post({ type: "progress", progress: { phase: "weights", loaded, total: entry.bytes, cached: c } });
  }, { marks, deferStore: true });
  const t1 = performance.now();
  post({ type: "progress", progress: { phase: "compile" } });
  const ort = await ortLoaded;
  const t2 = performance.now();
  const made = await ort.InferenceSession.create(bytes, SESSION_OPTIONS);
  const t3 = performance.now();
  const session = kind === "chat" ? new CpuChat(ort, made, manifest) : new CpuSession(ort, made, manifest, labels);
  if (kind === "chat") await session.warmUp();
  const t4 = performance.now();
  await stored;
  sessions.set(handle, session);
  const timeline = { ort_init: startMarks.ort_init, weights: [since(t), since(t1)], session: [since(t2), since(t3)],
    ...(kind === "chat" ? { warm_up: [since(t3), since(t4)] } : {}), stored: [since(t), since(performance.now())] };
  return { threads: ort.env.wasm.numThreads, max_seq: session.maxSeq, timeline,
    marks: { ...marks, ort_init_ms: startMarks.ort_init_ms, weights_ms: Math.round(t1 - t), shards_from_cache: cached ? 1 : 0,
      session_ms: Math.round(t4 - t2) } };
}

function session(handle) {
  const s = sessions.get(handle);
  if (!s) throw new Error(`no open session ${handle} (closed?)`);
  return s;
}

const OPS = {
  open,
  run: (msg) => session(msg.handle).run(msg),
  classify: (msg) => session(msg.handle).classify(msg),
  chat: ({ handle, ids, options, eos }, post) => session(handle).chat(ids, options, eos, (token) => post({ type: "token", token })),
  close: async ({ handle }) => {
    const s = session(handle);
    sessions.delete(handle);
    await s.close();
    return null;
  },
};

self.onmessage = async ({ data: msg }) => {
  if (msg.op === "init") {  // (no answer: open awaits the runtime, and says why it failed)
    origin = msg.origin;
    ortWeb(msg.base).catch(() => {});
    return;
  }
  if (msg.op === "cancel") {  // answered by the chat's own result, which stops after the current step
    sessions.get(msg.handle)?.cancel?.();
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
    post({ type: "error", message: String(err && err.message ? err.message : err) });
  }
};
