// onnxruntime-web's side of the CPU path: its runtime, started once per worker, and a session over the artifact's
// CPU model that runs feeds and classifies pixels. ort_worker.mjs serves these to the page's worker; the
// benchmark page (benchmarks/web/bench.mjs) opens them in the page itself (`CpuSession.open`) to time the engine.

// The CPU model's int4 weights are DequantizeLinear of constants: folded into float32 weights when the session is
// made, which onnxruntime does only with its QDQ fusions off (graph/cpu_weights.py SESSION_CONFIG).
export const SESSION_OPTIONS = { executionProviders: ["wasm"], extra: { session: { disable_quant_qdq: "1" } } };

// A one-node ONNX model (y = Identity(x), float [1]): opening it starts onnxruntime-web's runtime (its wasm
// fetched and compiled, its threads started), which the first real session would otherwise do only once the
// CPU model is in.
const STARTER = "CAgSADo3ChAKAXgSAXkiCElkZW50aXR5EgFnWg8KAXgSCgoICAESBAoCCAFiDwoBeRIKCggIARIECgIIAUIECgAQDQ==";

let ortPromise = null;
export const ortStart = {};  // {begin, end}: performance.now() around the runtime's start (ort_worker's timeline)

// onnxruntime-web, once, from `base` (the site's ort/ folder), its runtime started.
export function ortWeb(base) {
  ortPromise ??= (async () => {
    const t = performance.now();
    const ort = await import(new URL("ort.wasm.min.mjs", base).href);
    ort.env.wasm.wasmPaths = base;
    ort.env.wasm.numThreads = self.crossOriginIsolated ? Math.max(1, Math.min(4, navigator.hardwareConcurrency || 1)) : 1;
    const starter = await ort.InferenceSession.create(Uint8Array.from(atob(STARTER), (c) => c.charCodeAt(0)),
      { executionProviders: ["wasm"] });
    await starter.release();
    Object.assign(ortStart, { begin: t, end: performance.now() });
    return ort;
  })();
  return ortPromise;
}

function dimText(d) {
  return Number.isInteger(d) ? d : typeof d === "string" ? d : JSON.stringify(d);
}

export function describe(manifest, io) {
  const t = manifest.tensors[io.tensor];
  return { name: io.name, type: t.dtype, dims: t.shape.map(dimText) };
}

// A plain session: run (feeds as webinfer.mjs sends them) and classify (an artifact built with
// --preprocess/--postprocess: its CPU model carries the same prologue and epilogue as standard ONNX ops).
export class CpuSession {
  // bytes: the CPU model (checked against the manifest); base: the ort/ folder's URL; labels: the classification
  // labels, or null.
  static async open(manifest, bytes, base, labels = null) {
    const ort = await ortWeb(base);
    return new CpuSession(ort, await ort.InferenceSession.create(bytes, SESSION_OPTIONS), manifest, labels);
  }

  constructor(ort, session, manifest, labels = null) {
    this.ort = ort;
    this.session = session;
    this.manifest = manifest;
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

  // feeds: [[name, type, dims, data]]; returns [{name, type, dims, data}].
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

