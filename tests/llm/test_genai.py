"""A model from onnxruntime-genai's model builder (int4, CPU) of a tiny random Llama: MatMulNBits,
GatherBlockQuantized, GroupQueryAttention, (Skip)SimplifiedLayerNormalization. Built for generation (the
GroupQueryAttention nodes over the in-place KV cache, graph/llm/gqa.py) it gives onnxruntime's greedy ids, and
its packed int4 weights are in the artifact byte for byte. The fixture comes from scripts/export_genai_fixture.py.

The builder marks MatMulNBits ``accuracy_level=4`` for CPU: onnxruntime may then quantize the activations to
int8 blocks before the product (an approximation it chooses; its WebGPU provider uses other blocks). webinfer
computes the product MatMulNBits defines, exactly, so the reference is onnxruntime on the same file with the
approximation off (accuracy_level 0): every weight, op and attribute else unchanged.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import webinfer
from webinfer.llm.generate import Generator

MODEL = Path(__file__).parent / "data" / "genai" / "llama-int4" / "model.onnx"


def exact(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same model with MatMulNBits' int8 activation approximation turned off."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for node in m.graph.node:
        for a in node.attribute:
            if node.op_type == "MatMulNBits" and a.name == "accuracy_level":
                a.i = 0
    return m


def ort_greedy(model: onnx.ModelProto, prompt: list[int], n: int, kv_heads: int = 2, head: int = 16) -> list[int]:
    """Greedy decoding with onnxruntime CPU, past/present fed back through the host."""
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    present = [o for o in sess.get_outputs() if o.name.startswith("present.")]
    past = {o.name.replace("present.", "past_key_values."): np.zeros((1, kv_heads, 0, head), np.float32)
            for o in present}
    ids, new, step = list(prompt), [], list(prompt)
    for _ in range(n):
        feeds = {"input_ids": np.array([step], np.int64), "attention_mask": np.ones((1, len(ids)), np.int64), **past}
        out = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
        token = int(out["logits"][0, -1].argmax())
        past = {k.replace("present.", "past_key_values."): v for k, v in out.items() if k != "logits"}
        new.append(token)
        ids.append(token)
        step = [token]
    return new


@pytest.fixture(scope="module")
def proto() -> onnx.ModelProto:
    return onnx.load(str(MODEL))


@pytest.fixture(scope="module", params=["software", "gpu"])
def built(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("genai") / "llama-int4.wi"
    manifest = webinfer.build(str(MODEL), str(out), max_seq=512, target=request.param)
    return out, manifest, Generator.load(str(out))


def _prompt(n: int) -> list[int]:
    rng = random.Random(n)
    return [rng.randrange(3, 256) for _ in range(n)]


@pytest.mark.parametrize("n_prompt", [7, 200])
def test_greedy_ids_match_onnxruntime(proto, built, n_prompt):
    _, _, gen = built
    prompt = _prompt(n_prompt)
    want = ort_greedy(exact(proto), prompt, 16)
    got = [t.id for t in gen.generate(prompt, max_new_tokens=16, stop_at_eos=False)]
    assert got == want


def test_kv_cache_on_gpu_and_weights_as_they_are(proto, built):
    out, manifest, _ = built
    assert [o["name"] for o in manifest["programs"][0]["outputs"]] == ["logits", "next_token", "verify_result", "token_logprobs"]
    assert len(manifest["states"]) == 4 and not any(i["name"].startswith("past_") for i in manifest["inputs"])
    labels = [s["label"].split(":")[1] for s in manifest["programs"][0]["steps"]]
    assert "CachedAttention" in labels and "Attention" not in labels  # the cache's kernels, not a plain Attention
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in proto.graph.initializer}
    packed = {n.input[1] for n in proto.graph.node if n.op_type == "MatMulNBits"}
    blob = b"".join(p.read_bytes() for p in sorted((out / "weights").glob("*")))
    for name in packed:  # each packed weight stored unchanged ...
        assert inits[name].tobytes() in blob, name
    shapes = {(n.attribute[0].i, n.attribute[1].i) for n in proto.graph.node if n.op_type == "MatMulNBits"}
    dense = {(k, n) for k, n in shapes} | {(n, k) for k, n in shapes}
    big = [t for t in manifest["tensors"] if t["kind"] == "weight" and t["dtype"] == "float32"
           and tuple(t["shape"][-2:]) in dense]
    assert not big, f"a float copy of a quantized weight: {big}"  # ... and never expanded to f32
    f32_bytes = sum(inits[n].nbytes for n in packed) * 8  # what dequantized weights would take
    assert sum(s["bytes"] for s in manifest["shards"]) < f32_bytes / 3  # with cos/sin tables, norms, params


def test_plain_build_logits_match_onnxruntime(proto, tmp_path):
    """Without a KV cache (generation=False) GroupQueryAttention runs as Attention with past/present."""
    out = tmp_path / "plain.wi"
    webinfer.build(str(MODEL), str(out), generation=False, dims={"batch_size": 1, "kv_cache_dim": 16})
    from webinfer.runtime.inference import InferenceSession

    ids = np.array([_prompt(9)], np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones((1, 9), np.int64),
             **{f"past_key_values.{i}.{kv}": np.zeros((1, 2, 0, 16), np.float32) for i in range(2)
                for kv in ("key", "value")}}
    sess = ort.InferenceSession(exact(proto).SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    got = InferenceSession(str(out)).run([o.name for o in sess.get_outputs()], feeds)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-4)


def test_inspect_lists_the_contrib_ops_as_supported():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "webinfer.cli", "inspect", str(MODEL)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = {ln.split()[0]: ln.split()[1:] for ln in proc.stdout.splitlines() if ln.startswith("com.microsoft.")}
    assert rows["com.microsoft.MatMulNBits"] == ["11", "yes", "(expanded)"]
    assert set(rows) == {f"com.microsoft.{op}" for op in ("MatMulNBits", "GatherBlockQuantized", "GroupQueryAttention",
                                                         "SkipSimplifiedLayerNormalization")}
    assert "all 14 ops are supported" in proc.stdout


def _gqa_decoder(folder: Path, *, packed: bool, rotary: str, softcap: float) -> Path:
    """Embedding -> q/k/v projections -> GroupQueryAttention (past/present as graph I/O) -> LM head, with the
    fixture's tokenizer beside it: the GroupQueryAttention forms the builder writes for other models."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    vocab, hidden, heads, kv_heads, d = 256, 64, 4, 2, 16
    w = lambda *s: numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32))  # noqa: E731
    inits = [w(vocab, hidden), w(hidden, (heads + 2 * kv_heads) * d), w(heads * d, vocab)]
    for t, name in zip(inits, ("emb", "wqkv", "head")):
        t.name = name
    angles = np.arange(512)[:, None] / (10000 ** (np.arange(d // 2) / (d // 2)))[None]
    for name, fn in (("cos", np.cos), ("sin", np.sin)):
        inits.append(numpy_helper.from_array(fn(angles).astype(np.float32), name))
    nodes = [helper.make_node("Gather", ["emb", "input_ids"], ["x"]),
             helper.make_node("MatMul", ["x", "wqkv"], ["qkv"]),
             helper.make_node("ReduceSum", ["attention_mask", "one"], ["total64"], keepdims=0),
             helper.make_node("Sub", ["total64", "one"], ["seqlens64"]),
             helper.make_node("Cast", ["seqlens64"], ["seqlens"], to=TensorProto.INT32),
             helper.make_node("Shape", ["attention_mask"], ["mshape"]),
             helper.make_node("Gather", ["mshape", "one_scalar"], ["total_len64"]),
             helper.make_node("Cast", ["total_len64"], ["total_len"], to=TensorProto.INT32)]
    inits += [numpy_helper.from_array(np.array([1], np.int64), "one"),
              numpy_helper.from_array(np.array(1, np.int64), "one_scalar")]
    qkv = ["qkv", "", ""]
    if not packed:
        inits.append(numpy_helper.from_array(np.array([heads * d, kv_heads * d, kv_heads * d], np.int64), "sizes"))
        nodes.append(helper.make_node("Split", ["qkv", "sizes"], ["q", "k", "v"], axis=-1))
        qkv = ["q", "k", "v"]
    attrs = {"num_heads": heads, "kv_num_heads": kv_heads, "do_rotary": int(rotary != "none"),
             "rotary_interleaved": int(rotary == "interleaved"), "softcap": softcap}
    inputs = [*qkv, "past_key_values.0.key", "past_key_values.0.value", "seqlens", "total_len"]
    inputs += ["cos", "sin"] if rotary != "none" else []
    nodes += [helper.make_node("GroupQueryAttention", inputs, ["attn", "present.0.key", "present.0.value"],
                               domain="com.microsoft", **attrs),
              helper.make_node("MatMul", ["attn", "head"], ["logits"])]
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    past = [helper.make_tensor_value_info(f"past_key_values.0.{kv}", f32, ["batch", kv_heads, "past", d])
            for kv in ("key", "value")]
    present = [helper.make_tensor_value_info(f"present.0.{kv}", f32, ["batch", kv_heads, "total", d])
               for kv in ("key", "value")]
    graph = helper.make_graph(nodes, "gqa", [helper.make_tensor_value_info("input_ids", i64, ["batch", "seq"]),
                                             helper.make_tensor_value_info("attention_mask", i64, ["batch", "total"]),
                                             *past],
                              [helper.make_tensor_value_info("logits", f32, ["batch", "seq", vocab]), *present], inits,
                              value_info=[helper.make_tensor_value_info("attn", f32, ["batch", "seq", heads * d])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).write_bytes((MODEL.parent / name).read_bytes())
    onnx.save(model, str(folder / "model.onnx"))
    return folder / "model.onnx"


@pytest.mark.parametrize("packed,rotary,softcap", [(False, "half", 0.0), (True, "interleaved", 0.0),
                                                   (True, "none", 0.0), (True, "half", 2.0)])
def test_group_query_attention_forms_generate_like_onnxruntime(tmp_path, packed, rotary, softcap):
    path = _gqa_decoder(tmp_path / "m", packed=packed, rotary=rotary, softcap=softcap)
    webinfer.build(str(path), str(tmp_path / "a"), max_seq=64)
    gen = Generator.load(str(tmp_path / "a"))
    for prompt in (_prompt(5), _prompt(20)):
        got = [t.id for t in gen.generate(prompt, max_new_tokens=8, stop_at_eos=False)]
        assert got == ort_greedy(onnx.load(str(path)), prompt, 8, kv_heads=2, head=16)
