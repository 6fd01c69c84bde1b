"""A prefix cache saved to a file and restored into a fresh Generator (llm/prefix_cache.py): greedy ids after a
restore equal a cold generation's and onnxruntime's over the whole prompt; the saved keys and values equal
onnxruntime's ``present.*`` tensors for those positions; an altered, truncated or foreign blob is refused with
one line, never restored; the CLI's --prefix-cache round trip."""

from __future__ import annotations

import hashlib
import json
import random
import struct
import subprocess
import sys

import numpy as np
import pytest

from demos.recipes.smollm2 import ort_greedy
from webinfer.errors import WebinferError
from webinfer.llm import prefix_cache as pc


def _ids(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(3, 512) for _ in range(n)]


@pytest.fixture(scope="module")
def fresh(tiny_wi):
    from webinfer.llm.generate import Generator

    return lambda: Generator.load(str(tiny_wi))


def _greedy(gen, ids, n=8):
    return [t.id for t in gen.generate(ids, max_new_tokens=n, stop_at_eos=False)]


def _reseal(blob: bytes, edit) -> bytes:
    """A blob whose header ``edit`` changed, with a valid checksum again (what a forger or a bug would write)."""
    hlen = struct.unpack_from("<I", blob, len(pc.MAGIC))[0]
    start = len(pc.MAGIC) + 4
    header = json.loads(blob[start:start + hlen])
    edit(header)
    raw = json.dumps(header, separators=(",", ":")).encode()
    body = pc.MAGIC + struct.pack("<I", len(raw)) + raw + blob[start + hlen:-32]
    return body + hashlib.sha256(body).digest()


def test_restored_prefix_gives_the_cold_ids(tiny_llama_dir, fresh, tmp_path):
    model = tiny_llama_dir / "model.onnx"
    system = _ids(300, 1)
    prompt = system + _ids(12, 2)
    cold_gen = fresh()
    cold = _greedy(cold_gen, prompt)
    assert cold == ort_greedy(model, prompt, 8)[0]
    path = tmp_path / "prefix.bin"
    assert cold_gen.save_prefix(str(path), len(system)) == len(system)

    warm_gen = fresh()
    assert warm_gen.load_prefix(str(path), prompt) == len(system)
    assert _greedy(warm_gen, prompt) == cold
    assert warm_gen.stats["reused_tokens"] == len(system)
    # Another question after the same system ids: only the shared positions are restored, and it still matches.
    other = system[:200] + _ids(9, 3)
    again = fresh()
    assert again.load_prefix(str(path), other) == 200
    assert _greedy(again, other, 6) == ort_greedy(model, other, 6)[0]
    assert again.stats["reused_tokens"] == 200


def test_saved_keys_and_values_are_onnxruntimes(tiny_llama_dir, fresh, tmp_path):
    import onnxruntime as ort

    prompt = _ids(37, 5)
    gen = fresh()
    _greedy(gen, prompt, 1)
    path = tmp_path / "p.bin"
    gen.save_prefix(str(path), len(prompt))
    header, payload = pc.parse(path.read_bytes())
    assert header["ids"] == prompt and header["positions"] == len(prompt)

    sess = ort.InferenceSession(str(tiny_llama_dir / "model.onnx"), providers=["CPUExecutionProvider"])
    pasts = [i for i in sess.get_inputs() if i.name.startswith("past_key_values.")]
    feeds = {"input_ids": np.array([prompt], np.int64), "attention_mask": np.ones((1, len(prompt)), np.int64),
             "position_ids": np.arange(len(prompt), dtype=np.int64)[None]}
    feeds.update({i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32) for i in pasts})
    names = {i.name for i in sess.get_inputs()}
    out = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {k: v for k, v in feeds.items() if k in names})))
    at = 0
    for name, dtype, cap, axis in header["states"]:
        assert dtype == "float32" and axis == 2
        n = cap[1] * len(prompt) * cap[3]
        got = np.frombuffer(payload[at * 4:(at + n) * 4], np.float32).reshape(cap[1], len(prompt), cap[3])
        want = out[name.replace("past_key_values", "present")][0]
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
        at += n
    assert at * 4 == len(payload)


def test_altered_truncated_and_foreign_blobs_are_refused(fresh, tmp_path):
    prompt = _ids(40, 7)
    gen = fresh()
    _greedy(gen, prompt, 2)
    path = tmp_path / "p.bin"
    gen.save_prefix(str(path), len(prompt))
    blob = path.read_bytes()
    cases = {
        "payload byte": blob[:-100] + bytes([blob[-100] ^ 1]) + blob[-99:],
        "truncated": blob[:-1000],
        "not a blob": b"hello" * 20,
        "other artifact": _reseal(blob, lambda h: h.update(artifact="0" * 64)),
        "other program": _reseal(blob, lambda h: h.update(program="gpu")),
        "other layout": _reseal(blob, lambda h: h["states"][0][2].__setitem__(2, 64)),
        "ids and payload disagree": _reseal(blob, lambda h: h.update(ids=h["ids"][:-1], positions=len(h["ids"]) - 1)),
    }
    target = fresh()
    _greedy(target, prompt[:5], 1)
    held = list(target._cached)
    for what, bad in cases.items():
        bad_path = tmp_path / "bad.bin"
        bad_path.write_bytes(bad)
        with pytest.raises(WebinferError) as err:
            target.load_prefix(str(bad_path), prompt)
        assert "\n" not in str(err.value), what
        assert target._cached == held, what  # nothing restored: the cache is as it was
    with pytest.raises(WebinferError, match="does not start with the cached token ids"):
        target.load_prefix(str(path), [prompt[0] + 1] + prompt[1:])


def test_system_prefix_is_a_prefix_of_every_conversation(tiny_chat_dir, tiny_chat_gen):
    """The ids a system message's cache holds start every conversation that opens with it (transformers'
    apply_chat_template + encode is the reference for the conversations)."""
    from transformers import AutoTokenizer

    system = "You are a careful assistant. " * 10
    ids = pc.system_prefix_ids(tiny_chat_gen, system)
    tok = AutoTokenizer.from_pretrained(str(tiny_chat_dir))
    assert len(ids) > len(tok.encode(system, add_special_tokens=False))
    for question in ("What is the capital of France?", "Hello", "1 + 1 = ?"):
        msgs = [{"role": "system", "content": system}, {"role": "user", "content": question}]
        text = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        assert tok.encode(text, add_special_tokens=False)[:len(ids)] == ids


def test_cli_prefix_cache_round_trip(tiny_wi, tmp_path):
    path = tmp_path / "cli.bin"
    prompt = "in the " * 30
    cli = [sys.executable, "-m", "webinfer.cli", "generate", str(tiny_wi), "--prompt", prompt, "--max-new-tokens", "5",
           "--json", "--prefix-cache", str(path)]
    first = subprocess.run(cli, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "positions saved to" in first.stderr and path.exists()
    second = subprocess.run(cli, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert "positions restored from" in second.stderr
    assert json.loads(second.stdout)["token_ids"] == json.loads(first.stdout)["token_ids"]
    data = bytearray(path.read_bytes())
    data[-200] ^= 0xFF
    path.write_bytes(bytes(data))
    bad = subprocess.run(cli, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert "checksum mismatch" in bad.stderr
    folder = subprocess.run(cli[:-1] + [str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert folder.returncode == 2 and folder.stderr.count("\n") == 1 and "is a folder" in folder.stderr, folder.stderr
