// The CPU path of webinfer's worker: where the page has no WebGPU (navigator.gpu missing, no adapter) or
// `?path=cpu` asks for it, the artifact's CPU model (`build --cpu`: the source model as standard ONNX,
// assets/cpu-model.onnx, sha256-checked like every file) runs on onnxruntime-web's wasm backend, served from
// the site's own ort/ folder (SIMD; threads where the page is cross-origin isolated, as `webinfer serve` makes
// it). Sessions describe their inputs and outputs from the manifest, as the GPU path does, so load -> run is
// the same API on both paths: run, classify (an artifact built with --preprocess/--postprocess: its CPU model
// carries the same prologue and epilogue as standard ONNX ops, graph/cpu_model.py), encode (the artifact's
// tokenizer, in Pyodide: page_cpu.py) and chat (cpu-chat.mjs).

import { openCpuChat } from "./cpu-chat.mjs";
import { CACHE_NAME, fetchShard } from "./weights.mjs";

export const CPU_MODEL = "assets/cpu-model.onnx";
// The CPU model's int4 weights are DequantizeLinear of constants: folded into float32 weights when the session is
// made, which onnxruntime does only with its QDQ fusions off (graph/cpu_weights.py SESSION_CONFIG).
const SESSION_OPTIONS = { executionProviders: ["wasm"], extra: { session: { disable_quant_qdq: "1" } } };
let ortPromise = null;

// A one-node ONNX model (y = Identity(x), float [1]): opening it starts onnxruntime-web's runtime (its wasm
// fetched and compiled, its threads started), which the first real session would otherwise do only once the
// CPU model is in.
const STARTER = "CAgSADo3ChAKAXgSAXkiCElkZW50aXR5EgFnWg8KAXgSCgoICAESBAoCCAFiDwoBeRIKCggIARIECgIIAUIECgAQDQ==";

// onnxruntime-web, once per worker, from `base` (the site's ort/ folder), its runtime started; marks.ort_init_ms
// says how long that took.
function ortWeb(base, marks = {}) {
  ortPromise ??= (async () => {
    const t = performance.now();
    const ort = await import(new URL("ort.wasm.min.mjs", base).href);
    ort.env.wasm.wasmPaths = base;
    ort.env.wasm.numThreads = self.crossOriginIsolated ? Math.max(1, Math.min(4, navigator.hardwareConcurrency || 1)) : 1;
    const starter = await ort.InferenceSession.create(Uint8Array.from(atob(STARTER), (c) => c.charCodeAt(0)),
      { executionProviders: ["wasm"] });
    await starter.release();
    marks.ort_init_ms = Math.round(performance.now() - t);
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

export class CpuSession {
  // bytes: the CPU model (checked against the manifest); base: the ort/ folder's URL; extras: {text (page_cpu.py's
  // CpuText, or null), labels (the classification labels, or null)}.
  static async open(manifest, bytes, base, extras = {}) {
    const ort = await ortWeb(base);
    const session = await ort.InferenceSession.create(bytes, SESSION_OPTIONS);
    return new CpuSession(ort, session, manifest, extras);
  }

  constructor(ort, session, manifest, { text = null, labels = null } = {}) {
    this.ort = ort;
    this.session = session;
    this.manifest = manifest;
    this.text = text;
    this.labels = labels;
    this.inputs = manifest.inputs.map((io) => describe(manifest, io));
    this.outputs = manifest.programs[0].outputs.map((io) => describe(manifest, io));
    this.threads = ort.env.wasm.numThreads;
  }

  // RGBA8 pixels of any size -> [{label, score}], best first, as runtime/vision.py classify answers.
  async classify(pixels, width, height) {
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

  encode(text) {
    if (!this.text) throw new Error("this artifact carries no tokenizer (build it from a folder holding tokenizer.json)");
    const ids = this.text.encode(text);
    try {
      return ids.toJs();
    } finally {
      ids.destroy();
    }
  }

  // feeds: [[name, type, dims, data]] as webinfer.mjs sends them; returns [{name, type, dims, data}].
  async run(feeds) {
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
    this.text?.destroy?.();  // (the Python object behind the proxy)
    return this.session.release();
  }
}

const sessions = new Map();
let nextHandle = 1;

// Open a CPU session; resolves to load's answer (as WorkerHost.open_session's, plus its path and why).
// kind: "session" or "chat" (a decoder built for generation: cpu-chat.mjs loops over its past/present tensors).
// extras.text: the promise of page_cpu.py's CpuText (or null), awaited once onnxruntime's session is made.
export async function openCpuSession(manifest, bytes, base, choice, timings, kind = "session", extras = {}) {
  const t = performance.now();
  const ort = await ortWeb(base);
  const made = await ort.InferenceSession.create(bytes, SESSION_OPTIONS);
  const session = kind === "chat" ? await openCpuChat(ort, made, manifest)
    : new CpuSession(ort, made, manifest, { labels: extras.labels });
  const t2 = performance.now();
  timings.session_ms = Math.round(t2 - t);
  const text = extras.text ? await extras.text : null;
  timings.python_ms = Math.round(performance.now() - t2);  // (the wait for Pyodide once the session was made)
  if (kind === "chat" && !text) throw new Error("chat needs the artifact's tokenizer (build it from a folder holding tokenizer.json)");
  session.text = text;
  const handle = `cpu-${nextHandle++}`;
  sessions.set(handle, session);
  const n = session.threads;
  const extra = kind === "chat" ? { max_seq: session.maxSeq } : {};
  return { handle, inputs: session.inputs, outputs: session.outputs, tokenizer: Boolean(text), timings, ...extra,
    adapter: `CPU (onnxruntime-web wasm, ${n} thread${n === 1 ? "" : "s"})`, kernel_class: "cpu",
    kernel_class_why: choice.why, path: "cpu", path_why: choice.why };
}

// The CPU path's load (worker.mjs): the CPU model fetched (Cache Storage first) and checked like a shard, then
// onnxruntime's session; text (tokenizer, chat template) in Pyodide (page_cpu.py), which starts first (its
// runtime's download and compile overlap the model's) and is awaited only once the session is made; the model's
// Cache Storage copy is stored meanwhile too. host: {python, site, root, started}.
export async function loadCPU(host, artifactURL, manifest, kind, choice, progress) {
  const entry = manifest.assets?.[CPU_MODEL];
  if (!entry) throw new Error(`No WebGPU here (${choice.why}), and this artifact carries no CPU model (build it with --cpu).`);
  const s = await host.site();
  if (!s.ort) throw new Error("this site was bundled without onnxruntime-web (the CPU path): bundle it again");
  const base = new URL(s.ort, host.root).href;
  const marks = {};
  const ortLoaded = ortWeb(base, marks);  // (its module and runtime load while the model streams in)
  ortLoaded.catch(() => {});
  const t = performance.now();
  const cache = await caches.open(CACHE_NAME).catch(() => null);
  const text = kind === "chat" || manifest.assets?.["assets/tokenizer.json"]
    ? openText(host, artifactURL, manifest, cache, marks) : null;
  text?.catch(() => {});  // (awaited in openCpuSession)
  let loaded = 0;
  const { bytes, cached, stored } = await fetchShard(cache, new URL(entry.file, artifactURL).href, entry, (n, c) => {
    loaded += n;
    progress({ phase: "weights", loaded, total: entry.bytes, cached: c });
  }, { marks, deferStore: true });
  const timings = { weights_ms: Math.round(performance.now() - t), weight_bytes: entry.bytes, shards: 1,
    shards_from_cache: cached ? 1 : 0, load_start_ms: Math.round(t - host.started) };
  let labels = null;
  const labelsEntry = manifest.classify?.labels ? manifest.assets?.[`assets/${manifest.classify.labels}`] : null;
  if (labelsEntry) {
    const got = await fetchShard(null, new URL(labelsEntry.file, artifactURL).href, labelsEntry, () => {});
    labels = new TextDecoder().decode(got.bytes).split("\n").filter((line, i, all) => i < all.length - 1 || line);
  }
  progress({ phase: "compile" });
  const info = await openCpuSession(manifest, bytes, base, choice, timings, kind, { text, labels });
  await stored;
  Object.assign(timings, marks, { worker_ms: Math.round(performance.now() - host.started) });
  return info;
}

// page_cpu.py's CpuText for the artifact: its tokenizer files fetched and checked here (while Pyodide starts),
// handed to Python as text.
async function openText(host, artifactURL, manifest, cache, marks) {
  const python = host.python();
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
  Object.assign(marks, boot, { text_open_ms: Math.round(performance.now() - t) });
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
