"""A lost native GPU device (wgpu-py's device.destroy(), as a driver reset or an out-of-memory loss would lose it):
the generation it interrupts and every later call on its sessions raise one clear WebinferError
(runtime/device_lost.py), and opening the artifact again gets a new device whose greedy ids equal onnxruntime's.
The test runs on a device of its own, so the session's other fixtures keep theirs."""

from __future__ import annotations

import random

import pytest

from demos.recipes.smollm2 import ort_greedy
from webinfer.errors import WebinferError


def _ids(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(3, 512) for _ in range(n)]


@pytest.fixture
def own_device(monkeypatch):
    from webinfer.runtime import native

    monkeypatch.setattr(native, "_DEVICE", None)
    monkeypatch.setattr(native, "_PIPELINES", {})
    return native


def _lost_message(excinfo) -> str:
    text = str(excinfo.value)
    assert text.startswith("the GPU device was lost (") and "open the model again" in text, text
    assert "\n" not in text and "Traceback" not in text
    return text


def test_a_lost_device_is_one_clear_error_and_a_reopen_recovers(own_device, tiny_llama_dir, tiny_wi):
    from webinfer.llm.generate import Generator

    model = tiny_llama_dir / "model.onnx"
    prompt = _ids(20, 3)
    want = ort_greedy(model, prompt, 8)[0]
    gen = Generator.load(str(tiny_wi))
    assert [t.id for t in gen.generate(prompt, max_new_tokens=8, stop_at_eos=False)] == want
    first = gen.core.device.device

    # Lost in the middle of a generation: the tokens before it were right, then one clear error.
    got = []
    with pytest.raises(WebinferError) as excinfo:
        for tok in gen.generate(prompt + _ids(5, 4), max_new_tokens=8, stop_at_eos=False):
            got.append(tok.id)
            if len(got) == 2:
                first.destroy()
    text = _lost_message(excinfo)
    assert got == ort_greedy(model, prompt + _ids(5, 4), 8)[0][:len(got)] and len(got) < 8
    # The next call inherits the same error (not a hang, not garbage), and the process forgot the device.
    with pytest.raises(WebinferError) as again:
        list(gen.generate(prompt, max_new_tokens=4, stop_at_eos=False))
    assert str(again.value) == text
    assert own_device._DEVICE is None and not own_device._PIPELINES

    # Opening the artifact again gets a new device, and the same ids as onnxruntime.
    fresh = Generator.load(str(tiny_wi))
    assert fresh.core.device.device is not first
    assert [t.id for t in fresh.generate(prompt, max_new_tokens=8, stop_at_eos=False)] == want


def test_other_errors_pass_unchanged():
    from webinfer.runtime.device_lost import guard, lost_reason

    class Fake:
        lost = None

        def forget(self):
            raise AssertionError("not lost: nothing to forget")

        @guard
        def fail(self):
            raise ValueError("Validation Error\n\nCaused by:\n  In wgpuDeviceCreateBuffer\n    size too large")

    with pytest.raises(ValueError):
        Fake().fail()
    assert lost_reason(RuntimeError("Caused by:\n  In wgpuQueueSubmit\n    Parent device is lost")) == \
        "Parent device is lost"
