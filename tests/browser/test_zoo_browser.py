"""Zoo models in Chromium (Dawn/SwiftShader through Pyodide): real .onnx files that packages ship, each built as
it is and run in one page on the zoo's realistic input, every output equal to onnxruntime CPU (max abs error at
most 1e-3 of the output's max abs value; integer outputs exact). The two symbolic-size detectors of the zoo run
in Chromium in test_symbolic_detector_browser.py."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import onnxruntime as ort
import pytest
from smoke_site import build_smoke_site, encode_inputs, run_smoke_page

from webinfer.build import build

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from benchmarks.zoo.inputs import Recipes  # noqa: E402
from benchmarks.zoo.worker import TOLERANCE, default_cache, load_zoo  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.slow]

MODELS = [
    "mtcnn-pnet", "mtcnn-rnet", "mtcnn-onet",                       # face detection
    "oww-melspectrogram", "oww-embedding",                           # wake word: audio features, embedding
    "oww-alexa", "oww-hey-jarvis", "oww-hey-rhasspy", "oww-timer",   # wake word classifiers
    "magika-v3.3",                                                   # byte classifier
    "silero-vad-openvino-16k",                                       # voice activity
    "paraphrase-minilm-l3",                                          # text embedding
    "dtln-stage2", "gtcrn",                                          # speech enhancement (LSTM; GRU, ConvTranspose)
    "madmom-downbeats-blstm", "romanizer-decoder",                   # bidirectional LSTM; GRU decoder step
]

# Runs in Pyodide instead of web/smoke/main.py: every model of zoo.json in one session of the page.
ZOO_MAIN = '''
import base64, json
from webinfer.runtime.browser import BrowserDevice, fetch_artifact, fetch_bytes
from webinfer.runtime.inference import InferenceSession
from webinfer.runtime.tensor import HostTensor


async def run_page(artifact_url, inputs_url):
    base = inputs_url.rsplit("/", 1)[0] + "/"
    device = await BrowserDevice.create()
    runs = []
    for entry in json.loads(await fetch_bytes(inputs_url)):
        path = await fetch_artifact(base + entry["artifact"], "/tmp/" + entry["id"])
        session = InferenceSession(path, device=device)
        feeds = {n: HostTensor(v["dtype"], v["shape"], base64.b64decode(v["b64"])) for n, v in entry["feeds"].items()}
        out = await session.run_async(None, feeds)
        runs.append({info.name: {"dtype": t.dtype, "shape": list(t.shape), "b64": base64.b64encode(t.data).decode()}
                     for info, t in zip(session.get_outputs(), out)})
    return json.dumps({"outputs": {}, "runs": runs, "timings": {}, "adapter": device.adapter_name})
'''


def _compare(model_id: str, names: list, got: dict, want: list) -> list[str]:
    errors = []
    for name, w in zip(names, want):
        g = got[name]
        w = np.asarray(w)
        assert g.shape == w.shape, f"{model_id} {name}: shape {g.shape} != onnxruntime {w.shape}"
        if w.dtype.kind in "iub":
            np.testing.assert_array_equal(g.astype(np.int64), w.astype(np.int64), err_msg=f"{model_id} {name}")
            errors.append("exact")
            continue
        err = float(np.abs(g.astype(np.float64) - w).max()) if w.size else 0.0
        peak = float(np.abs(w).max()) if w.size else 0.0
        assert err <= TOLERANCE * (peak if peak > 0 else 1.0), \
            f"{model_id} {name} in Chromium: max abs err {err:.3g} > {TOLERANCE:g} x max abs output {peak:.3g}"
        errors.append(f"{err / (peak or 1.0):.1e}")
    return errors


def test_zoo_models_in_chromium(page, tmp_path, webinfer_wheel):
    cache = default_cache()
    zoo = {m["id"]: m for m in load_zoo()["models"]}
    entries, references = [], []
    for model_id in MODELS:
        path = cache / "models" / f"{model_id}.onnx"
        assert path.is_file(), f"{path} is missing: run scripts/fetch_zoo.py (scripts/setup.sh does)"
        ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        feeds = Recipes(cache).make(zoo[model_id], ref.get_inputs())
        names = [o.name for o in ref.get_outputs()]
        references.append((names, ref.run(names, feeds)))
        build(str(path), str(tmp_path / model_id), target="software")  # SwiftShader's class
        entries.append({"id": model_id, "artifact": f"artifacts/{model_id}/", "feeds": encode_inputs(feeds)})
    site = build_smoke_site(str(tmp_path / MODELS[0]), str(tmp_path / "site"), {}, wheel=webinfer_wheel)
    for model_id in MODELS:
        os.makedirs(os.path.join(site, "artifacts"), exist_ok=True)
        os.rename(tmp_path / model_id, os.path.join(site, "artifacts", model_id))
    with open(os.path.join(site, "main.py"), "w") as f:
        f.write(ZOO_MAIN)
    with open(os.path.join(site, "inputs.json"), "w") as f:
        json.dump(entries, f)
    runs = run_smoke_page(page, site, timeout_ms=900_000)["runs"]
    assert len(runs) == len(MODELS)
    lines = []
    for model_id, got, (names, want) in zip(MODELS, runs, references):
        lines.append(f"{model_id}: {', '.join(_compare(model_id, names, got, want))}")
    print(f"{len(MODELS)} zoo models in Chromium, relative error vs onnxruntime per output:\n" + "\n".join(lines))


def test_silero_v5_v6_in_chromium_at_both_rates(page, tmp_path, webinfer_wheel):
    """Silero VAD v5 and v6 (an If on ``sr`` around each half's frame-count If, guarded per branch) in one page,
    each artifact run at 16 kHz (512 + 64 context samples) and 8 kHz (256 + 32) from a nonzero state."""
    cache = default_cache()
    speech = Recipes(cache).speech()
    entries, references, labels = [], [], []
    for model_id in ("silero-vad-v5", "silero-vad-v6"):
        path = cache / "models" / f"{model_id}.onnx"
        assert path.is_file(), f"{path} is missing: run scripts/fetch_zoo.py (scripts/setup.sh does)"
        ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        names = [o.name for o in ref.get_outputs()]
        build(str(path), str(tmp_path / model_id), target="software")
        for sr, n, context in ((16000, 512, 64), (8000, 256, 32)):
            audio = speech if sr == 16000 else speech[::2]
            state = np.random.default_rng(sr).standard_normal((2, 1, 128)).astype(np.float32) * 0.5
            feeds = {"input": audio[None, 8000 - context:8000 + n].astype(np.float32), "state": state,
                     "sr": np.array(sr, np.int64)}
            references.append((names, ref.run(names, feeds)))
            entries.append({"id": f"{model_id}-{sr}", "artifact": f"artifacts/{model_id}/",
                            "feeds": encode_inputs(feeds)})
            labels.append(f"{model_id} at {sr} Hz")
    site = build_smoke_site(str(tmp_path / "silero-vad-v5"), str(tmp_path / "site"), {}, wheel=webinfer_wheel)
    os.makedirs(os.path.join(site, "artifacts"), exist_ok=True)
    for model_id in ("silero-vad-v5", "silero-vad-v6"):
        os.rename(tmp_path / model_id, os.path.join(site, "artifacts", model_id))
    with open(os.path.join(site, "main.py"), "w") as f:
        f.write(ZOO_MAIN)
    with open(os.path.join(site, "inputs.json"), "w") as f:
        json.dump(entries, f)
    runs = run_smoke_page(page, site, timeout_ms=900_000)["runs"]
    assert len(runs) == len(entries)
    lines = [f"{label}: {', '.join(_compare(label, names, got, want))}"
             for label, got, (names, want) in zip(labels, runs, references)]
    print("Silero in Chromium, relative error vs onnxruntime per output:\n" + "\n".join(lines))
