// Browser side of `webinfer bench`: onnxruntime-web (webgpu, wasm), webinfer in Pyodide and webinfer's CPU path,
// all served from this origin. window.benchOrt(job, ep), window.benchWebinfer(job) and benchWebinferCpu(job) return the same JSON result as
// benchmarks/runner.py (times, outputs as base64, adapter), so the harness checks every engine alike.
// first_result_ms: from the call (nothing loaded yet: the harness opens a fresh page per job) to the end of
// the engine's first run, so it counts the runtime's start, the model's load and the first run's compiles.
import { loadPyodide } from "./pyodide/pyodide.mjs";

const here = new URL("./", location.href);
const B64 = (bytes) => {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
};
const fromB64 = (b64) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
const ARRAYS = { float32: Float32Array, int64: BigInt64Array, int32: Int32Array };

let ortModule = null;
async function loadOrt() {
  if (!ortModule) {
    ortModule = await import("./ort/ort.webgpu.min.mjs");
    ortModule.env.wasm.wasmPaths = new URL("ort/", here).href;
    ortModule.env.wasm.numThreads = crossOriginIsolated ? navigator.hardwareConcurrency || 1 : 1;
  }
  return ortModule;
}

async function adapterName() {
  const a = navigator.gpu && (await navigator.gpu.requestAdapter());
  return a ? `${a.info.vendor} ${a.info.architecture}` : "no adapter";
}

function tensorOf(ort, spec) {
  const bytes = fromB64(spec.b64);
  const T = ARRAYS[spec.dtype];
  return new ort.Tensor(spec.dtype, new T(bytes.buffer, 0, bytes.byteLength / T.BYTES_PER_ELEMENT), spec.shape);
}

const floatsB64 = (data) => B64(new Uint8Array(Float32Array.from(data).buffer));
const now = () => performance.now();
// Stop timing once the budget is spent (at least one sample), as runner.py does.
const more = (i, runs, t0, budget) => i < 1 || (i < runs && (now() - t0) / 1e3 < budget);

async function ortSingle(ort, session, job) {
  const feeds = Object.fromEntries(Object.entries(job.feeds).map(([n, s]) => [n, tensorOf(ort, s)]));
  let first = null;
  for (let i = 0; i < job.warmup; i++) {
    const t = now();
    await session.run(feeds);
    if (first === null) first = now() - t;
  }
  const times = [];
  let outs = null;
  const t0 = now();
  for (let i = 0; more(i, job.runs, t0, job.budget_s); i++) {
    const t = now();
    outs = await session.run(feeds);
    times.push(now() - t);
  }
  const outputs = {};
  for (const n of job.outputs) outputs[n] = { dtype: "float32", shape: [], b64: floatsB64(outs[n].data) };
  return { latency_ms: times, outputs, first_run_ms: first === null ? times[0] : first };
}

function ids(ort, values, shape) {
  return new ort.Tensor("int64", BigInt64Array.from(values.map(BigInt)), shape);
}

async function ortLlmPass(ort, session, llm, steps, deadline) {
  const n = llm.prompt.length;
  const empty = new ort.Tensor("float32", new Float32Array(0), [1, llm.kv_heads, 0, llm.head_dim]);
  let feeds = { input_ids: ids(ort, llm.prompt, [1, n]), attention_mask: ids(ort, Array(n).fill(1), [1, n]),
                position_ids: ids(ort, [...Array(n).keys()], [1, n]) };
  for (const [past] of llm.cache) feeds[past] = empty;
  let t = now();
  let outs = await session.run(feeds);
  const prefillMs = now() - t;
  const row = (o) => o.logits.data.subarray(o.logits.data.length - llm.vocab);
  const prefillRow = Float32Array.from(row(outs));
  const stepMs = [];
  for (let i = 0; i < steps.length && (i < 2 || now() < deadline); i++) {
    const pos = n + i;
    feeds = { input_ids: ids(ort, [steps[i]], [1, 1]), attention_mask: ids(ort, Array(pos + 1).fill(1), [1, pos + 1]),
              position_ids: ids(ort, [pos], [1, 1]) };
    for (const [past, present] of llm.cache) feeds[past] = outs[present];
    t = now();
    outs = await session.run(feeds);
    stepMs.push(now() - t);
  }
  return { prefillMs, stepMs, prefillRow, lastRow: Float32Array.from(row(outs)) };
}

async function ortLlm(ort, session, job) {
  return llmWith(job, (llm, steps, deadline) => ortLlmPass(ort, session, llm, steps, deadline));
}

// prefill and decode rates over `pass(llm, steps, deadline)` (one engine's prefill + decode steps)
async function llmWith(job, pass) {
  const llm = job.llm;
  const t0 = now();
  let first = null;
  for (let i = 0; i < job.warmup; i++) {
    const p = await pass(llm, llm.decode.slice(0, 2), 0);
    if (first === null) first = p.prefillMs;
  }
  const prefill = [], rates = [];
  let rows = null, steps = 0;
  for (let i = 0; i < Math.max(job.runs, llm.decode_passes); i++) {
    const decoding = i < llm.decode_passes;
    if (!decoding && !more(i, job.runs, t0, job.budget_s)) break;
    const deadline = t0 + job.budget_s * 1e3;
    const p = await pass(llm, decoding ? llm.decode : [], deadline);
    if (i < job.runs) prefill.push(p.prefillMs);
    if (decoding) {
      rates.push(p.stepMs.length / (p.stepMs.reduce((a, b) => a + b, 0) / 1e3));
      rows = p;
      steps = p.stepMs.length;
    }
  }
  const outputs = { prefill_logits: { dtype: "float32", shape: [llm.vocab], b64: floatsB64(rows.prefillRow) },
                    decode_logits: { dtype: "float32", shape: [llm.vocab], b64: floatsB64(rows.lastRow) } };
  return { prefill_ms: prefill, decode_tok_s: rates, decode_steps: steps, outputs,
           first_run_ms: first === null ? prefill[0] : first };
}

window.benchOrt = async (job, ep) => {
  try {
    const t0 = now();
    const ort = await loadOrt();
    const session = await ort.InferenceSession.create(new URL(job.onnx, here).href,
                                                      { executionProviders: [ep], graphOptimizationLevel: "all" });
    const loadMs = now() - t0;
    try {
      const result = job.llm ? await ortLlm(ort, session, job) : await ortSingle(ort, session, job);
      result.load_ms = loadMs;
      result.first_result_ms = [loadMs + result.first_run_ms];
      result.adapter = ep === "wasm" ? `wasm x${ort.env.wasm.numThreads}` : await adapterName();
      return JSON.stringify(result);
    } finally {
      await session.release();
    }
  } catch (e) {
    return JSON.stringify({ error: String(e && e.message ? e.message : e).split("\n")[0].slice(0, 300) });
  }
};

// webinfer's CPU path (site/cpu.mjs, cpu-chat.mjs, as a page without WebGPU runs it): the artifact's CPU model,
// its bytes fetched as the worker does, then webinfer's own run / generation step.
async function cpuLlmPass(chat, llm, steps, deadline) {
  const n = llm.prompt.length;
  let t = now();
  let out = await chat.step(llm.prompt, 0, chat.pastFeeds(0));
  const prefillMs = now() - t;
  const prefillRow = Float32Array.from(out.row);
  const stepMs = [];
  for (let i = 0; i < steps.length && (i < 2 || now() < deadline); i++) {
    const past = Object.fromEntries(chat.past.map((p) => [p, out.present[p.replace("past_key_values.", "present.")]]));
    t = now();
    out = await chat.step([steps[i]], n + i, past);
    stepMs.push(now() - t);
  }
  return { prefillMs, stepMs, prefillRow, lastRow: Float32Array.from(out.row) };
}

window.benchWebinferCpu = async (job) => {
  try {
    const t0 = now();
    const { CpuSession } = await import("./wi/cpu.mjs");
    const { CpuChat } = await import("./wi/cpu-chat.mjs");
    const base = new URL(job.artifact, here);
    const manifest = await (await fetch(new URL("manifest.json", base))).json();
    const entry = manifest.assets?.["assets/cpu-model.onnx"];
    if (!entry) throw new Error("the artifact carries no CPU model (build --cpu)");
    const bytes = new Uint8Array(await (await fetch(new URL(entry.file, base))).arrayBuffer());
    const cpu = await CpuSession.open(manifest, bytes, new URL("ort/", here).href);
    const loadMs = now() - t0;
    try {
      let result;
      if (job.llm) {
        const chat = new CpuChat(cpu.ort, cpu.session, manifest, null);
        result = await llmWith(job, (llm, steps, deadline) => cpuLlmPass(chat, llm, steps, deadline));
      } else {
        const feeds = Object.entries(job.feeds).map(([n, sp]) => {
          const t = tensorOf(cpu.ort, sp);
          return [n, t.type, t.dims, t.data];
        });
        let first = null;
        for (let i = 0; i < job.warmup; i++) {
          const t = now();
          await cpu.run(feeds);
          if (first === null) first = now() - t;
        }
        const times = [];
        let outs = null;
        const t1 = now();
        for (let i = 0; more(i, job.runs, t1, job.budget_s); i++) {
          const t = now();
          outs = await cpu.run(feeds);
          times.push(now() - t);
        }
        const outputs = {};
        for (const n of job.outputs) {
          const o = outs.find((x) => x.name === n);
          outputs[n] = { dtype: "float32", shape: [], b64: floatsB64(new Float32Array(o.data)) };
        }
        result = { latency_ms: times, outputs, first_run_ms: first === null ? times[0] : first };
      }
      result.load_ms = loadMs;
      result.first_result_ms = [loadMs + result.first_run_ms];
      result.adapter = `webinfer CPU path, wasm x${cpu.threads}`;
      return JSON.stringify(result);
    } finally {
      await cpu.close();
    }
  } catch (e) {
    return JSON.stringify({ error: String(e && e.message ? e.message : e).split("\n")[0].slice(0, 300) });
  }
};

// webinfer's CPU path and onnxruntime-web wasm in the same page, timed in turns: round r runs one engine then the
// other (the order swapped every round), so the machine's other load falls on both alike and the per-round ratio
// means something where wall times do not. Both run the same ONNX where the artifact's CPU model is the source
// model (an int4 artifact's CPU model is its fp32 source). Ratios > 1: webinfer's CPU path faster.
async function openCpuPath(job) {
  const { CpuSession } = await import("./wi/cpu.mjs");
  const base = new URL(job.artifact, here);
  const manifest = await (await fetch(new URL("manifest.json", base))).json();
  const entry = manifest.assets?.["assets/cpu-model.onnx"];
  if (!entry) throw new Error("the artifact carries no CPU model (build --cpu)");
  const bytes = new Uint8Array(await (await fetch(new URL(entry.file, base))).arrayBuffer());
  return { cpu: await CpuSession.open(manifest, bytes, new URL("ort/", here).href), manifest, cpuBytes: entry.bytes };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

window.benchCpuPair = async (job, rounds) => {
  let wi = null, peer = null;
  try {
    const { cpu, manifest, cpuBytes } = await openCpuPath(job);
    wi = cpu;
    const ort = await loadOrt();
    peer = await ort.InferenceSession.create(new URL(job.onnx, here).href,
                                             { executionProviders: ["wasm"], graphOptimizationLevel: "all" });
    let engines;  // name -> one timed turn: {ms} or {prefill, tok_s}
    const outputs = {};
    if (job.llm) {
      const { CpuChat } = await import("./wi/cpu-chat.mjs");
      const chat = new CpuChat(cpu.ort, cpu.session, manifest, null);
      const steps = job.llm.decode.slice(0, job.llm.pair_steps);
      const turn = (pass) => async () => {
        const p = await pass(job.llm, steps, Infinity);
        return { prefill: p.prefillMs, tok_s: p.stepMs.length / (p.stepMs.reduce((a, b) => a + b, 0) / 1e3), p };
      };
      engines = { wi: turn((llm, st, d) => cpuLlmPass(chat, llm, st, d)),
                  ort: turn((llm, st, d) => ortLlmPass(ort, peer, llm, st, d)) };
    } else {
      const wiFeeds = Object.entries(job.feeds).map(([n, sp]) => {
        const t = tensorOf(cpu.ort, sp);
        return [n, t.type, t.dims, t.data];
      });
      const ortFeeds = Object.fromEntries(Object.entries(job.feeds).map(([n, sp]) => [n, tensorOf(ort, sp)]));
      const timed = (run) => async () => {
        const t = now();
        const out = await run();
        return { ms: now() - t, out };
      };
      engines = { wi: timed(() => wi.run(wiFeeds)), ort: timed(() => peer.run(ortFeeds)) };
    }
    for (let i = 0; i < (job.llm ? 1 : job.warmup); i++) for (const go of Object.values(engines)) await go();
    const perRound = Math.max(1, Math.floor(job.runs / rounds));
    const ratios = job.llm ? { prefill_ms: [], decode_tok_s: [] } : { latency_ms: [] };
    const raw = [];
    let last = null;
    // a round's first engine runs perRound times or until its share of the budget is spent; the second as often
    const share = (job.budget_s * 1e3) / rounds / 2;
    for (let r = 0; r < rounds; r++) {
      const got = { wi: [], ort: [] };
      const [first, second] = r % 2 ? ["ort", "wi"] : ["wi", "ort"];
      const t0 = now();
      for (let k = 0; k < (job.llm ? 1 : perRound) && (k < 1 || now() - t0 < share); k++) {
        got[first].push(await engines[first]());
      }
      for (let k = 0; k < got[first].length; k++) got[second].push(await engines[second]());
      if (job.llm) {
        const [w, o] = [got.wi[0], got.ort[0]];
        ratios.prefill_ms.push(o.prefill / w.prefill);
        ratios.decode_tok_s.push(w.tok_s / o.tok_s);
        raw.push({ wi_prefill_ms: w.prefill, ort_prefill_ms: o.prefill, wi_tok_s: w.tok_s, ort_tok_s: o.tok_s });
        last = w.p;
      } else {
        const [w, o] = [median(got.wi.map((x) => x.ms)), median(got.ort.map((x) => x.ms))];
        ratios.latency_ms.push(o / w);
        raw.push({ wi_ms: w, ort_ms: o });
        last = got.wi[got.wi.length - 1].out;
      }
    }
    if (job.llm) {
      outputs.prefill_logits = { dtype: "float32", shape: [job.llm.vocab], b64: floatsB64(last.prefillRow) };
      outputs.decode_logits = { dtype: "float32", shape: [job.llm.vocab], b64: floatsB64(last.lastRow) };
    } else {
      for (const n of job.outputs) {
        const o = last.find((x) => x.name === n);
        outputs[n] = { dtype: "float32", shape: [], b64: floatsB64(new Float32Array(o.data)) };
      }
    }
    return JSON.stringify({ ...ratios, raw, outputs, decode_steps: job.llm ? last.stepMs.length : undefined,
      adapter: `webinfer CPU path (artifact's CPU model, ${cpuBytes} bytes) vs onnxruntime-web wasm (${job.onnx}), ` +
        `wasm x${cpu.threads} each, ${rounds} rounds in turns` });
  } catch (e) {
    return JSON.stringify({ error: String(e && e.message ? e.message : e).split("\n")[0].slice(0, 300) });
  } finally {
    await wi?.close();
    await peer?.release();
  }
};

let pyodide = null;
window.benchWebinfer = async (job) => {
  try {
    const t0 = now();
    if (!pyodide) {
      const site = await (await fetch(new URL("site.json", here))).json();
      pyodide = await loadPyodide({ indexURL: new URL("pyodide/", here).href });
      await pyodide.loadPackage(new URL(site.wheel, here).href, { messageCallback: () => {} });
      for (const file of ["runner.py", "wi_page.py"]) {
        pyodide.runPython(await (await fetch(new URL(file, here))).text(), { filename: file });
      }
    }
    const benchJob = pyodide.globals.get("bench_job");
    try {
      return await benchJob(JSON.stringify({ ...job, artifact: new URL(job.artifact, here).href, boot_ms: now() - t0 }));
    } finally {
      benchJob.destroy();
    }
  } catch (e) {
    return JSON.stringify({ error: String(e && e.message ? e.message : e).split("\n").filter(Boolean).pop().slice(0, 300) });
  }
};
document.getElementById("status").textContent = "ready";
