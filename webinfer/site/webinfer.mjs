// webinfer's JavaScript API. Everything heavy (Pyodide, WebGPU, the Python runtime) runs in one Web Worker
// (worker.mjs) per page; this module only posts messages, so the page's main thread stays free to render.
//
//   import * as webinfer from "./assets/webinfer.mjs";
//   const s = await webinfer.load("model/artifact/", { onProgress: (p) => console.log(p) });
//   const out = await s.run({ x: new webinfer.Tensor("float32", new Float32Array(6), [1, 6]) });
//   out.y.data, out.y.dims                                       // a typed array and its shape
//   const chat = await webinfer.chat("chat/artifact/");
//   for await (const t of chat.send([{ role: "user", content: "Hi!" }])) console.log(t.text);
//   chat.cancel();                                               // stops the reply after the current token
// load(url, {onProgress, kernelClass, path, deviceLimits}) -> Session {inputs, outputs, adapter, kernelClass, kernelClassWhy,
//   path, pathWhy, timings, run(feeds), classify(image), detect(image), segment(image), encode(text), close()};
//   the artifact's program is chosen for the adapter (kernelClass forces one); close() frees its GPU memory.
//   path: "gpu" (WebGPU) or "cpu": where the page has no WebGPU (or path: "cpu" forces it), an artifact built
//   with --cpu runs its CPU model on onnxruntime-web's wasm backend, with the same run(feeds), classify, encode
//   and chat (site/cpu.mjs, cpu-chat.mjs); session.path and session.pathWhy say which and why.
//   classify(image): an artifact built with --preprocess/--postprocess takes an ImageData (or {data, width,
//   height} of RGBA8 bytes) of any size and resolves to [{label, score}], best first; resizing, cropping and
//   normalising run on the GPU.
//   feeds: {name: Tensor | {data, dims} | typed array | array}; data is converted to the input's type, dims
//   default to the input's static shape. run() resolves to {name: Tensor} (a classic-ML classifier's string labels:
//   an array of strings; its ZipMap: an array of {label: probability} objects, as Python). An audio-prologue artifact
//   (session.audio: the manifest's block) takes {audio: Float32Array of mono PCM, sample_rate: Hz} (or {data,
//   dims: [channels, samples]}, a row per channel): resampling and the features (Whisper's log-mel...) run on
//   the GPU.
// seq2seq(url) -> Seq2Seq (an encoder-decoder artifact): generate(text | encoder feeds, options, onToken) and, with
//   the audio prologue, transcribe(audio, {sampleRate, maxNewTokens, ...}, onToken) -> {text, token_ids, ...}.
// pipeline(task, url) -> one call per task (pipeline.mjs): const asr = await webinfer.pipeline(
//   "automatic-speech-recognition", url); await asr(wavBlob, { onToken: (t) => show(t.text) }) -> {text, token_ids}.
// chat(url, {onProgress, prefixCache}) -> Chat {maxSeq, stats, send(messages, options), cancel(), close()}
//   messages: OpenAI-style [{role: "system" | "user" | "assistant", content}], the whole conversation each turn:
//   the worker keeps the KV cache across turns and prefills only what it does not hold yet.
//   options: {maxNewTokens, temperature, topK, topP, repetitionPenalty, seed, stopAtEos, prefixCache}; temperature
//   0 (the default) is greedy. send() yields {id, text} per token; chat.stats then holds the turn's ids, timings
//   (ttft_s, decode_tok_s) and reused_tokens. {speculative: "ngram", draftTokens: k}: prompt-lookup speculative
//   decoding (same ids when greedy; stats.speculative.acceptance_rate). Constrained output (one of): {jsonSchema:
//   {...}, regex: "...", grammar: "GBNF", jsonObject: true}, with {whitespace: n} for JSON; the mask is applied
//   in the GPU sampler.
//   prefixCache (off by default; per chat, or per send): a conversation that opens with a system message keeps
//   that prompt's KV cache in Cache Storage, so the next visit restores it instead of prefilling it;
//   chat.stats.prefix_cache says what happened ({status: "restored" | "refused" | "miss" | "held", ...}).
// onProgress receives {phase: "python" | "weights" | "compile", loaded, total, cached}.
// onDevice(listener): a lost GPU device is re-created by the worker, with every session re-opened on it and each
//   chat's conversation restored (recover.mjs); listener({phase: "lost" | "recovered" | "failed", reason, message,
//   ms, text}) hears it, and a call the loss interrupted runs again (its stats carry device_recovery).
//   debug.loseDevice() destroys the device, to try it.
// The OpenAI-shaped API (the same requests and answers as Python's webinfer.OpenAI and `webinfer serve --api`,
// with no server: llm/openai_api.py runs in the worker):
//   const chat = await webinfer.chat("chat/artifact/");
//   const r = await chat.chat.completions.create({ messages, temperature: 0, max_tokens: 64, stop: ["\n\n"] });
//   r.choices[0].message.content, r.choices[0].finish_reason, r.usage
//   (response_format json_schema and tools with tool_choice "required" as natively: constrained in the worker)
//   for await (const c of await chat.chat.completions.create({ messages, stream: true })) c.choices[0]?.delta.content
//   const emb = await webinfer.load("minilm/artifact/");       // built with --sentence-embedding
//   (await emb.embeddings.create({ input: ["a", "b"] })).data[0].embedding
//   const client = await webinfer.openai({ chat: url, embeddings: url2 });  // both behind one object

import { present } from "./ml_outputs.mjs";
import { settle } from "./replies.mjs";
import { audioMessage } from "./speech.mjs";
export { pipeline } from "./pipeline.mjs";  // one call per task: webinfer.pipeline("object-detection", url)

const TYPED = {
  float32: Float32Array, float64: Float64Array, float16: Uint16Array, int8: Int8Array, int16: Int16Array,
  int32: Int32Array, int64: BigInt64Array, uint8: Uint8Array, uint16: Uint16Array, uint32: Uint32Array,
  uint64: BigUint64Array, bool: Uint8Array,
};
const OPTIONS = { maxNewTokens: "max_new_tokens", temperature: "temperature", topK: "top_k", topP: "top_p",
  repetitionPenalty: "repetition_penalty", seed: "seed", stopAtEos: "stop_at_eos",
  speculative: "speculative", draftTokens: "draft_tokens",
  jsonSchema: "json_schema", regex: "regex", grammar: "grammar", jsonObject: "json_object", whitespace: "whitespace" };

export class Tensor {
  constructor(type, data, dims) {
    if (!(type in TYPED)) throw new Error(`unknown tensor type ${type} (one of ${Object.keys(TYPED).join(", ")})`);
    this.type = type;
    this.data = toTyped(type, data);
    this.dims = dims ? Array.from(dims, Number) : [this.data.length];
    const n = this.dims.reduce((a, b) => a * b, 1);
    if (n !== this.data.length) throw new Error(`${this.data.length} values do not fill dims [${this.dims}]`);
  }
}

function toTyped(type, data) {
  const Typed = TYPED[type];
  if (data instanceof Typed) return data;
  const big = Typed === BigInt64Array || Typed === BigUint64Array;
  return Typed.from(data, big ? (v) => BigInt(v) : (v) => Number(v));
}

let worker = null;
let nextId = 1;
const pending = new Map();
const deviceListeners = new Set();

/** Hear the worker's GPU device being lost and recovered; returns a function that stops listening. */
export function onDevice(listener) {
  deviceListeners.add(listener);
  return () => deviceListeners.delete(listener);
}

export const debug = { loseDevice: () => call({ op: "loseDevice" }) };

function getWorker() {
  if (worker) return worker;
  worker = new Worker(new URL("./worker.mjs", import.meta.url), { type: "module" });
  worker.onmessage = ({ data }) => {
    if (data.type === "device") for (const listener of deviceListeners) listener(data.event);
    settle(pending, data);
  };
  worker.onerror = (event) => {
    const err = new Error(`webinfer's worker failed: ${event.message || "could not start (see the console)"}`);
    for (const call of pending.values()) call.reject(err);
    pending.clear();
  };
  return worker;
}

function call(message, onMessage, transfer = []) {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject, onMessage });
    getWorker().postMessage({ ...message, id }, transfer);
  });
}

function absolute(url) {
  return new URL(url, globalThis.document ? document.baseURI : location.href).href;
}

async function open(url, kind, { onProgress, kernelClass, path, deviceLimits } = {}) {
  const info = await call({ op: "load", url: absolute(url), kind, kernelClass, path, deviceLimits },
    (m) => m.progress && onProgress?.(m.progress));
  info.timings.ready_ms = Math.round(performance.now());  // since this page started loading
  info.model = modelName(absolute(url));
  return info;
}

/** Open an artifact (a folder URL) in the worker; resolves to a Session. */
export async function load(url, options) {
  return new Session(await open(url, "session", options));
}

/** Open a generation artifact (built from a decoder with a KV cache) for chat; resolves to a Chat. */
export async function chat(url, options) {
  return new Chat(await open(url, "chat", options), options?.prefixCache);
}

/** Open an encoder-decoder artifact (speech to text, translation: built from an export folder); resolves to a
 * Seq2Seq whose generate(source, options, onToken) takes text or the encoder's feeds, and transcribe(audio,
 * options, onToken) PCM or a WAV file, and resolves to the stats. */
export async function seq2seq(url, options) {
  return new Seq2Seq(await open(url, "seq2seq", options));
}

/** Chat and embedding artifacts behind one OpenAI-shaped object: {chat.completions.create, embeddings.create,
 * models.list}. */
export async function openai({ chat: chatUrl, embeddings: embeddingsUrl, onProgress } = {}) {
  const c = chatUrl ? await chat(chatUrl, { onProgress }) : null;
  const e = embeddingsUrl ? await load(embeddingsUrl, { onProgress }) : null;
  const missing = (what) => () => Promise.reject(new Error(`no ${what} artifact was given to openai()`));
  return {
    chat: { completions: { create: c ? (r) => c.chat.completions.create(r) : missing("chat") } },
    embeddings: { create: e ? (r) => e.embeddings.create(r) : missing("embeddings") },
    models: { list: async () => ({ object: "list", data: [c, e].filter(Boolean).map((s) => ({ id: s.model, object: "model", owned_by: "webinfer" })) }) },
    sessions: { chat: c, embeddings: e },
  };
}

// One OpenAI API call in the worker: a promise of the answer, or with request.stream an async iterator of chunks.
function apiCall(handle, method, request) {
  if (!request || typeof request !== "object") return Promise.reject(new Error(`${method}.create expects a request object`));
  if (!request.stream) return call({ op: "chat", handle, method, messages: request });
  const chunks = [];
  let wake = null;
  let finished = false;
  let failure = null;
  const reply = call({ op: "chat", handle, method, messages: request }, (m) => {
    if (m.type === "chunk") chunks.push(m.chunk);
    wake?.();
  });
  reply.catch((err) => { failure = err; }).finally(() => { finished = true; wake?.(); });
  async function* stream() {
    try {
      for (;;) {
        if (chunks.length) yield chunks.shift();
        else if (finished) {
          if (failure) throw failure;
          return;
        } else await new Promise((resolve) => { wake = resolve; });
      }
    } finally {
      if (!finished) getWorker().postMessage({ op: "cancel", handle });  // the caller left the loop early
      await reply.catch(() => {});
    }
  }
  return Promise.resolve(stream());
}

function modelName(url) {
  const parts = new URL(url).pathname.split("/").filter(Boolean);
  const base = parts.at(-1) === "artifact" && parts.length > 1 ? parts.at(-2) : parts.at(-1) || "model";
  return base.endsWith(".wi") ? base.slice(0, -3) : base;
}

class Session {
  constructor(info) {
    Object.assign(this, { handle: info.handle, inputs: info.inputs, outputs: info.outputs,
      adapter: info.adapter, timings: info.timings, hasTokenizer: info.tokenizer,
      kernelClass: info.kernel_class, kernelClassWhy: info.kernel_class_why, path: info.path,
      pathWhy: info.path_why, audio: info.audio || null, model: info.model, outputFormats: info.output_formats || [] });
    this.embeddings = { create: (request) => {
      if (this.path === "cpu") return Promise.reject(new Error("embeddings run on the WebGPU path only; this session runs on the CPU"));
      return apiCall(this.handle, "embeddings", request);
    } };
  }

  /** Run the model; feeds: {name: Tensor | {data, dims} | typed array | array}. Resolves to {name: Tensor}.
   *  An artifact with the audio prologue (session.audio) takes {audio: Float32Array of mono PCM (or {data,
   *  dims: [channels, samples]}), sample_rate: Hz}: resampling and features run on the GPU. */
  async run(feeds) {
    const audio = this.audio;
    let dims = null;
    if (audio && audio.rate in feeds) {
      feeds = { ...feeds };
      dims = { [audio.rate_dim]: Number(feeds[audio.rate]) };
      delete feeds[audio.rate];
      const pcm = feeds[audio.audio];
      if (ArrayBuffer.isView(pcm)) feeds[audio.audio] = { data: pcm, dims: [1, pcm.length] };
    }
    const list = this.inputs.map((io) => {
      if (!(io.name in feeds)) throw new Error(`missing feed for input ${io.name}`);
      return toFeed(io, feeds[io.name]);
    });
    for (const name of Object.keys(feeds)) {
      if (!this.inputs.some((io) => io.name === name)) throw new Error(`unknown input ${name}`);
    }
    const out = await call({ op: "run", handle: this.handle, feeds: list, dims });
    const tensors = Object.fromEntries(out.map((o) => [o.name, new Tensor(o.type, new TYPED[o.type](o.data), o.dims)]));
    return present(this.outputFormats, tensors);  // (classic ML: ZipMap dicts, string labels, as Python gives)
  }

  /** Labels and scores of an image (ImageData or {data: RGBA8 bytes, width, height}), best first. */
  classify(image) {
    const { data, width, height } = image;
    if (!data || data.length !== width * height * 4) throw new Error("classify expects RGBA8 pixels: {data, width, height}");
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength).slice();
    return call({ op: "classify", handle: this.handle, pixels: bytes.buffer, width, height }, null, [bytes.buffer]);
  }

  /** Objects in an image (an artifact built with --task object-detection): [{label, score, box: [x0, y0, x1,
   *  y1]}], best first, boxes in the image's pixels; decoding and non-maximum suppression run on the GPU. */
  async detect(image) {
    return (await this.#vision("detect", image)).detections;
  }

  /** The mask of an image (--task background-removal: {width, height, cutout: RGBA8 Uint8ClampedArray with the
   *  matte as alpha}; --task image-segmentation: {width, height, segments: Int32Array class map, labels}). */
  async segment(image) {
    const out = await this.#vision("segment", image);
    if (out.mode === "matte") out.cutout = new Uint8ClampedArray(out.data);
    else out.segments = new Int32Array(out.data);
    delete out.data;
    return out;
  }

  #vision(task, image) {
    const { data, width, height } = image;
    if (!data || data.length !== width * height * 4) throw new Error(`${task} expects RGBA8 pixels: {data, width, height}`);
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength).slice();
    return call({ op: "vision", task, handle: this.handle, pixels: bytes.buffer, width, height }, null, [bytes.buffer]);
  }

  /** Token ids of `text` with the artifact's tokenizer (tokenizer.json bundled beside the model). */
  encode(text) {
    return call({ op: "encode", handle: this.handle, text: String(text) });
  }

  /** Free the session's GPU memory (weights, KV cache); the session cannot run afterwards. */
  close() {
    return call({ op: "close", handle: this.handle });
  }
}

function toFeed(io, value) {
  let t = value;
  if (!(value instanceof Tensor)) {
    const plain = ArrayBuffer.isView(value) || Array.isArray(value);
    const data = plain ? value : value.data;
    let dims = plain ? undefined : value.dims;
    if (!dims) {
      if (!io.dims.every(Number.isInteger)) {
        throw new Error(`input ${io.name} has symbolic dims [${io.dims}]: pass {data, dims}`);
      }
      dims = io.dims;
    }
    t = new Tensor(plain ? io.type : value.type || io.type, data, dims);
  }
  if (t.type !== io.type) t = new Tensor(io.type, Array.from(t.data), t.dims);
  const fixed = io.dims.every((d, i) => !Number.isInteger(d) || d === Number(t.dims[i]));  // (symbolic: any size)
  if (!fixed || t.dims.length !== io.dims.length) throw new Error(`input ${io.name} expects dims [${io.dims}], got [${t.dims}]`);
  return [io.name, t.type, t.dims, t.data];
}

class Chat extends Session {
  constructor(info, prefixCache) {
    super(info);
    this.prefixCache = Boolean(prefixCache);
    this.maxSeq = info.max_seq;
    this.stats = null;
    this.busy = false;
    this.chat = { completions: { create: (request) => apiCall(this.handle, "chat.completions", request) } };
  }

  /** Stream the assistant's reply to the conversation `messages`: yields {id, text} per token. */
  async *send(messages, options = {}) {
    if (this.busy) throw new Error("a reply is still streaming: cancel it or wait for it first");
    const opts = {};
    const { prefixCache = this.prefixCache, ...rest } = options;
    for (const [k, v] of Object.entries(rest)) {
      if (!(k in OPTIONS)) throw new Error(`unknown chat option ${k} (${Object.keys(OPTIONS).join(", ")}, prefixCache)`);
      opts[OPTIONS[k]] = v;
    }
    this.busy = true;
    const queue = [];
    let wake = null;
    let finished = false;
    let failure = null;
    const reply = call({ op: "chat", handle: this.handle, messages, options: opts, prefixCache: Boolean(prefixCache) }, (m) => {
      if (m.type === "token") queue.push(m.token);
      wake?.();
    });
    reply.then((stats) => { this.stats = stats; }, (err) => { failure = err; })
      .finally(() => { finished = true; wake?.(); });
    try {
      for (;;) {
        if (queue.length) {
          yield queue.shift();
        } else if (finished) {
          if (failure) throw failure;
          return;
        } else {
          await new Promise((resolve) => { wake = resolve; });
          wake = null;
        }
      }
    } finally {
      if (!finished) this.cancel();  // the caller left the loop early
      await reply.catch(() => {});
      this.busy = false;
    }
  }

  /** Stop the streaming reply after the current token (the cache keeps what was generated). */
  cancel() {
    getWorker().postMessage({ op: "cancel", handle: this.handle });
  }
}

class Seq2Seq extends Session {
  constructor(info) {
    super(info);
    Object.assign(this, { maxSeq: info.max_seq, firstTokens: info.first_tokens, encoderInputs: info.encoder_inputs });
  }

  /** `source`: text (translation) or {name: feed} for the encoder (e.g. {input_features: {data, dims}});
   * resolves to {token_ids, text, ...}; `onToken({id, text})` sees each token as it comes. */
  async generate(source, options = {}, onToken) {
    const message = { op: "seq2seq", handle: this.handle, options: generationOptions(options) };
    if (typeof source === "string") message.text = source;
    else message.feeds = this.encoderInputs.filter((io) => io.name in source).map((io) => toFeed(io, source[io.name]));
    return call(message, (m) => m.type === "token" && onToken?.(m.token));
  }

  /** Speech to text with an artifact whose encoder has the audio prologue (session.audio): `audio` is a
   * Float32Array of mono PCM with options.sampleRate, {data | channels, sampleRate}, an AudioBuffer, or a WAV
   * file (Blob, ArrayBuffer, Uint8Array); resampling and log-mel features run on the GPU. Resolves to {text,
   * token_ids, ...}; `onToken({id, text})` sees the transcript grow token by token. */
  async transcribe(audio, options = {}, onToken) {
    if (!this.audio) throw new Error("this artifact's encoder takes features, not audio (built with --preprocess none)");
    const { sampleRate, ...rest } = options;
    const opts = generationOptions(rest);
    const { message, transfer } = await audioMessage(audio, sampleRate);
    return call({ op: "seq2seq", handle: this.handle, options: opts, audio: message },
      (m) => m.type === "token" && onToken?.(m.token), transfer);
  }
}

function generationOptions(options) {
  const opts = {};
  for (const [k, v] of Object.entries(options)) {
    if (!(k in OPTIONS)) throw new Error(`unknown option ${k} (${Object.keys(OPTIONS).join(", ")})`);
    opts[OPTIONS[k]] = v;
  }
  return opts;
}
