// Chat on the CPU path: the generation loop over the artifact's CPU model (the source decoder, past/present KV
// tensors) on onnxruntime-web's wasm backend, in onnxruntime's worker (ort_worker.mjs). The WebGPU path keeps
// its cache in GPU buffers and samples on the GPU (codegen/kernels/sampling.py); here the present tensors are
// fed back as the next step's past and the next token is chosen on the CPU, with the same rules: repetition
// penalty over the same window, greedy argmax (lowest index on ties), else temperature, top-k (ties kept),
// top-p and a draw from the kept mass with the same counter-based random number (PCG hash of seed and step).
// Text goes through page_cpu.py (Pyodide, in the page's worker: cpu.mjs): the same tokenizer, chat template and
// stream decoder as the WebGPU path, so prompt ids and streamed text are equal; this loop takes the prompt's ids
// and the checked options, and posts each token on as it is chosen.
//
// Like the WebGPU path's Generator, the cache outlives a reply: a conversation that starts with the ids the
// cache holds prefills only the rest (the past tensors are cut back to the common prefix otherwise).

function pcg(v) {
  const s = (Math.imul(v >>> 0, 747796405) + 2891336453) >>> 0;
  const w = Math.imul(((s >>> ((s >>> 28) + 4)) ^ s) >>> 0, 277803737) >>> 0;
  return ((w >>> 22) ^ w) >>> 0;
}

// The next token from `logits` (one row, Float32Array), as sample.wgsl does it.
export function sampleToken(logits, o, history, penaltyLen, step) {
  const V = logits.length;
  const sc = Float32Array.from(logits);
  if (o.repetition_penalty !== 1) {
    for (const id of history.slice(-penaltyLen)) {
      if (id >= 0 && id < V) sc[id] = logits[id] > 0 ? logits[id] / o.repetition_penalty : logits[id] * o.repetition_penalty;
    }
  }
  let best = 0;
  for (let i = 1; i < V; i++) if (sc[i] > sc[best]) best = i;
  if (!(o.temperature > 0)) return best;
  const invT = Math.fround(1 / o.temperature);
  const x = sc.map((v) => Math.fround(v * invT));
  const m = x[best];
  const sorted = Float32Array.from(x).sort().reverse();  // descending
  let lo = -Infinity;  // keep x >= lo
  if (o.top_k > 0 && o.top_k < V) lo = sorted[o.top_k - 1];  // ties at the k-th value are kept
  let total = 0;
  for (let i = 0; i < V; i++) if (x[i] >= lo) total += Math.exp(x[i] - m);
  if (o.top_p < 1) {  // the largest threshold whose mass at or above it is still >= top_p of what top-k kept
    const want = o.top_p * total;
    let mass = 0;
    for (let j = 0; j < V && sorted[j] >= lo; j++) {
      mass += Math.exp(sorted[j] - m);
      while (j + 1 < V && sorted[j + 1] === sorted[j]) mass += Math.exp(sorted[++j] - m);
      if (mass >= want) {
        lo = sorted[j];
        break;
      }
    }
    total = 0;
    for (let i = 0; i < V; i++) if (x[i] >= lo) total += Math.exp(x[i] - m);
  }
  const r = pcg((o.seed >>> 0) ^ pcg((step + 0x9e3779b9) >>> 0));
  const goal = ((r >>> 8) / 16777216) * total;
  let acc = 0;
  let last = best;
  for (let i = 0; i < V; i++) {
    if (x[i] < lo) continue;
    acc += Math.exp(x[i] - m);
    last = i;
    if (goal < acc) return i;
  }
  return last;
}

function commonPrefix(a, b, limit) {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n] && n < limit) n++;
  return n;
}

const yieldToEvents = () => new Promise((resolve) => setTimeout(resolve, 0));  // lets a cancel message in

export class CpuChat {
  constructor(ort, session, manifest) {
    this.ort = ort;
    this.session = session;
    const meta = new Map((session.inputMetadata || []).map((m) => [m.name, m]));
    this.past = session.inputNames.filter((n) => n.startsWith("past_key_values."));
    if (!this.past.length || !session.outputNames.includes("logits")) {
      throw new Error("the CPU model is not a decoder with past_key_values inputs and a logits output");
    }
    // [batch, kv heads, past, head dim]: the empty cache of the first step
    this.pastDims = this.past.map((n) => {
      const shape = meta.get(n)?.shape || [];
      if (shape.length !== 4 || !Number.isInteger(shape[1]) || !Number.isInteger(shape[3])) {
        throw new Error(`the CPU model's ${n} needs static kv-head and head-size dims, got [${shape}]`);
      }
      return [1, shape[1], 0, shape[3]];
    });
    this.feedsIds = new Set(session.inputNames);
    // the WebGPU artifact's cache size and repetition-penalty window, so both paths take the same requests
    const bounds = Object.entries(manifest.bounds || {}).filter(([d]) => d !== "total_sequence");
    this.maxSeq = bounds.length ? bounds[0][1] : Infinity;
    const pen = manifest.inputs.find((io) => io.name === "penalty_ids");
    this.penaltyLen = pen ? manifest.tensors[pen.tensor].shape[0] : 64;
    this.cached = [];
    this.cache = null;  // {name: ort.Tensor} of the cached positions
    this.cancelled = false;
  }

  // One short step before the first message: onnxruntime's first run allocates what later steps reuse (the
  // WebGPU path warms up the same way).
  async warmUp() {
    await this.step([0, 0], 0, this.pastFeeds(0));
  }

  cancel() {
    this.cancelled = true;
  }

  // past tensors holding the first `n` positions of the cache
  pastFeeds(n) {
    const out = {};
    this.past.forEach((name, i) => {
      const t = this.cache?.[name.replace("past_key_values.", "present.")];
      if (!t || n === 0) {
        out[name] = new this.ort.Tensor("float32", new Float32Array(0), this.pastDims[i]);
        return;
      }
      const [b, h, len, d] = t.dims;
      if (len === n) {
        out[name] = t;
        return;
      }
      const src = t.data;
      const dst = new Float32Array(b * h * n * d);
      for (let r = 0; r < b * h; r++) dst.set(src.subarray(r * len * d, r * len * d + n * d), r * n * d);
      out[name] = new this.ort.Tensor("float32", dst, [b, h, n, d]);
    });
    return out;
  }

  async step(ids, pos, past) {
    const n = ids.length;
    const i64 = (values) => BigInt64Array.from(values, (v) => BigInt(v));
    const feeds = {
      input_ids: new this.ort.Tensor("int64", i64(ids), [1, n]),
      attention_mask: new this.ort.Tensor("int64", new BigInt64Array(pos + n).fill(1n), [1, pos + n]),
      position_ids: new this.ort.Tensor("int64", i64(Array.from({ length: n }, (_, k) => pos + k)), [1, n]),
      ...past,
    };
    for (const k of Object.keys(feeds)) if (!this.feedsIds.has(k)) delete feeds[k];
    const out = await this.session.run(feeds);
    const logits = out.logits;
    const V = logits.dims[logits.dims.length - 1];
    const row = logits.data.subarray(logits.data.length - V);
    return { row, present: Object.fromEntries(Object.entries(out).filter(([k]) => k.startsWith("present."))) };
  }

  // The reply to the prompt `ids` (page_cpu.py's chat template) under the checked options `o`; onToken(id) per
  // token; stops at `eos` (-1: never). Resolves to the turn's stats (as the WebGPU path's Generator.stats, less
  // the text, which the page's worker makes).
  async chat(ids, o, eos, onToken) {
    if (!ids.length) throw new Error("the prompt is empty");
    if (ids.length + o.max_new_tokens > this.maxSeq) {
      throw new Error(`prompt (${ids.length} tokens) + max_new_tokens (${o.max_new_tokens}) exceeds the KV cache of ` +
        `${this.maxSeq} positions (start a new conversation, ask for fewer tokens, or rebuild with a larger --max-seq)`);
    }
    this.cancelled = false;
    const reused = commonPrefix(this.cached, ids, ids.length - 1);
    const stats = { prompt_ids: ids, token_ids: [], reused_tokens: reused };
    const history = ids.slice();
    const t0 = performance.now();
    let tFirst = null;
    let feed = ids.slice(reused);
    let pos = reused;
    let past = this.pastFeeds(reused);
    this.cached = [];  // unknown while steps run
    let failed = true;
    try {
      for (let step = 0; step < o.max_new_tokens; step++) {
        const { row, present } = await this.step(feed, pos, past);
        this.cache = present;
        const token = sampleToken(row, o, history, this.penaltyLen, step);
        tFirst ??= performance.now();
        pos += feed.length;
        stats.token_ids.push(token);
        history.push(token);
        onToken(token);
        failed = false;
        await yieldToEvents();
        if (token === eos || this.cancelled || step + 1 === o.max_new_tokens) break;
        failed = true;
        feed = [token];
        past = Object.fromEntries(this.past.map((n) => [n, present[n.replace("past_key_values.", "present.")]]));
      }
    } finally {
      // every token but the last was fed to a step: the cache holds their keys and values
      this.cached = failed ? [] : ids.concat(stats.token_ids.slice(0, -1));
    }
    const tEnd = performance.now();
    const nDecode = stats.token_ids.length - 1;
    Object.assign(stats, {
      ttft_s: tFirst === null ? null : (tFirst - t0) / 1000,
      prefill_tok_s: tFirst === null ? null : (ids.length - reused) / ((tFirst - t0) / 1000),
      decode_tok_s: tFirst !== null && nDecode > 0 && tEnd > tFirst ? nDecode / ((tEnd - tFirst) / 1000) : null,
      cancelled: this.cancelled,
    });
    return stats;
  }

  close() {
    this.cache = null;
    return this.session.release();
  }
}
