// The CPU path of webinfer's worker: where the page has no WebGPU (navigator.gpu missing, no adapter) or
// `?path=cpu` asks for it, the artifact's CPU model (`build --cpu`: the source model as standard ONNX,
// assets/cpu-model.onnx, sha256-checked like every file) runs on onnxruntime-web's wasm backend, served from
// the site's own ort/ folder (SIMD; threads where the page is cross-origin isolated, as `webinfer serve` makes
// it). Sessions describe their inputs and outputs from the manifest, as the GPU path does, so load -> run is
// the same API on both paths.

export const CPU_MODEL = "assets/cpu-model.onnx";
let ortPromise = null;

// onnxruntime-web, once per worker, from `base` (the site's ort/ folder).
function ortWeb(base) {
  ortPromise ??= (async () => {
    const ort = await import(new URL("ort.wasm.min.mjs", base).href);
    ort.env.wasm.wasmPaths = base;
    ort.env.wasm.numThreads = self.crossOriginIsolated ? Math.max(1, Math.min(4, navigator.hardwareConcurrency || 1)) : 1;
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
  // bytes: the CPU model (checked against the manifest); base: the ort/ folder's URL.
  static async open(manifest, bytes, base) {
    const ort = await ortWeb(base);
    const session = await ort.InferenceSession.create(bytes, { executionProviders: ["wasm"] });
    return new CpuSession(ort, session, manifest);
  }

  constructor(ort, session, manifest) {
    this.ort = ort;
    this.session = session;
    this.inputs = manifest.inputs.map((io) => describe(manifest, io));
    this.outputs = manifest.programs[0].outputs.map((io) => describe(manifest, io));
    this.threads = ort.env.wasm.numThreads;
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
    return this.session.release();
  }
}

const sessions = new Map();
let nextHandle = 1;

// Open a CPU session; resolves to load's answer (as WorkerHost.open_session's, plus its path and why).
export async function openCpuSession(manifest, bytes, base, choice, timings) {
  const t = performance.now();
  const session = await CpuSession.open(manifest, bytes, base);
  timings.session_ms = Math.round(performance.now() - t);
  const handle = `cpu-${nextHandle++}`;
  sessions.set(handle, session);
  const n = session.threads;
  return { handle, inputs: session.inputs, outputs: session.outputs, tokenizer: false, timings,
    adapter: `CPU (onnxruntime-web wasm, ${n} thread${n === 1 ? "" : "s"})`, kernel_class: "cpu",
    kernel_class_why: choice.why, path: "cpu", path_why: choice.why };
}

// The CPU session behind `handle`; undefined for the WebGPU path's handles (numbers).
export function cpuSession(handle) {
  if (typeof handle !== "string") return undefined;
  const session = sessions.get(handle);
  if (!session) throw new Error(`no open session ${handle} (closed?)`);
  return session;
}

export async function closeCpuSession(handle) {
  const session = sessions.get(handle);
  sessions.delete(handle);
  await session.close();
  return null;
}
