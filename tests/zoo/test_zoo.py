"""Zoo models (real .onnx files that packages ship, benchmarks/zoo/models.json) built as they are, vs onnxruntime.

Each model is built with its symbolic dims left symbolic, run natively on the zoo's realistic input
(benchmarks/zoo/inputs.py) and every output compared with onnxruntime CPU on the same feeds: max abs error at
most 1e-3 of the output's max abs value, integer outputs exact. The models come from the cache that
scripts/fetch_zoo.py fills (scripts/setup.sh runs it); nothing is downloaded here. The list holds models that
pass today and keep the file to a few minutes; the ones that do not pass yet are in docs/zoo.md, not here.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import onnxruntime as ort
import pytest

from webinfer.build import build
from webinfer.runtime.inference import InferenceSession

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from benchmarks.zoo.inputs import Recipes  # noqa: E402
from benchmarks.zoo.worker import TOLERANCE, default_cache, load_zoo  # noqa: E402

pytestmark = pytest.mark.slow

MODELS = [
    "mtcnn-pnet", "mtcnn-rnet", "mtcnn-onet",                      # face detection (NHWC, symbolic H/W)
    "oww-melspectrogram", "oww-embedding",                          # wake word: audio features, embedding
    "oww-alexa", "oww-hey-jarvis", "oww-hey-rhasspy", "oww-timer",  # wake word classifiers (Gemm; If in hey-jarvis)
    "magika-v3.3",                                                  # byte classifier (int32 input, Gather)
    "dnsmos-p808",                                                  # audio quality
    "ddddocr-det", "ppocrv4-rec-opset9",                            # YOLOX detector, CTC text recognizer
    "silero-vad-op18-ifless", "silero-vad-openvino-16k",            # voice activity (If, LSTM)
    "silero-vad-16k-op15", "silero-vad-half",                       # ... an If on a frame-count predicate
    "silero-vad-v5", "silero-vad-v6",                               # ... inside the If on the sample rate
    "paraphrase-minilm-l3", "minilm-l6-int8",                       # text embeddings (int64 + float outputs)
    "gender-v1", "age-v1", "orinet-orientation",                    # face-chip and document classifiers
    "open-nsfw", "malviz-resnet18",                                 # tf2onnx NHWC opset 9; torch external data
    "dtln-stage2", "gtcrn",                                         # speech enhancement (LSTM; GRU, ConvTranspose)
    "madmom-downbeats-blstm", "madmom-chords-cnnfeat",              # Squeeze without axes, untraced [n] outputs
    "romanizer-encoder", "romanizer-decoder",                       # GRU seq2seq (bool mask, int64 ids)
    "voicefilter-lite-int8",                                        # DynamicQuantizeLSTM, MatMulInteger
    "table-det-cls", "lore-process", "ppocrv4-seal-det",            # table orientation; LORE (two inputs' "width"); stamps
    "slanet-1m-table",                                              # table structure: a Loop with a hand-kept counter
]
ZOO = {m["id"]: m for m in load_zoo()["models"]}


def test_zoo_list_is_in_the_manifest():
    assert set(MODELS) <= set(ZOO), sorted(set(MODELS) - set(ZOO))
    assert len(MODELS) >= 15


@pytest.mark.parametrize("model_id", MODELS)
def test_zoo_model_matches_onnxruntime(model_id, tmp_path):
    cache = default_cache()
    path = cache / "models" / f"{model_id}.onnx"
    assert path.is_file(), f"{path} is missing: run scripts/fetch_zoo.py (scripts/setup.sh does)"
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = Recipes(cache).make(ZOO[model_id], ref.get_inputs())
    names = [o.name for o in ref.get_outputs()]
    want = ref.run(names, feeds)

    build(str(path), str(tmp_path / "artifact"))
    got = InferenceSession(str(tmp_path / "artifact")).run(names, feeds)

    assert len(got) == len(want)
    for name, g, w in zip(names, got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"{model_id} {name}: shape {g.shape} != onnxruntime {w.shape}"
        if w.dtype.kind in "iub":
            np.testing.assert_array_equal(g.astype(np.int64), w.astype(np.int64), err_msg=f"{model_id} {name}")
            continue
        err = float(np.abs(g.astype(np.float64) - w).max()) if w.size else 0.0
        peak = float(np.abs(w).max()) if w.size else 0.0
        assert err <= TOLERANCE * (peak if peak > 0 else 1.0), \
            f"{model_id} {name}: max abs err {err:.3g} > {TOLERANCE:g} x max abs output {peak:.3g}"


@pytest.mark.parametrize("model_id", ["silero-vad-v5", "silero-vad-v6"])
def test_silero_streams_at_both_sample_rates(model_id, tmp_path):
    """As silero-vad's OnnxWrapper feeds it: chunks of 512 samples at 16 kHz (256 at 8 kHz) after 64 (32) samples
    of context, the state carried from chunk to chunk, both rates from one artifact (the ``sr`` If picks the half;
    each half's frame-count If is guarded only when it runs), each chunk equal to onnxruntime carrying its own."""
    cache = default_cache()
    path = cache / "models" / f"{model_id}.onnx"
    assert path.is_file(), f"{path} is missing: run scripts/fetch_zoo.py (scripts/setup.sh does)"
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    build(str(path), str(tmp_path / "artifact"))
    session = InferenceSession(str(tmp_path / "artifact"))
    speech = Recipes(cache).speech()
    for sr, n, context in ((16000, 512, 64), (8000, 256, 32), (16000, 512, 64)):
        audio = speech if sr == 16000 else speech[::2]
        mine = theirs = np.zeros((2, 1, 128), np.float32)
        x = np.zeros((1, context + n), np.float32)
        for k in range(4):
            x = np.concatenate([x[:, -context:], audio[None, 8000 + k * n:8000 + (k + 1) * n]], 1).astype(np.float32)
            feeds = {"input": x, "sr": np.array(sr, np.int64)}
            want, theirs = ref.run(None, {**feeds, "state": theirs})
            got, mine = session.run(None, {**feeds, "state": mine})
            for name, g, w in (("output", got, want), ("stateN", mine, theirs)):
                assert g.shape == w.shape, f"{model_id} sr={sr} chunk {k} {name}: shape {g.shape} != {w.shape}"
                err, peak = float(np.abs(g - w).max()), float(np.abs(w).max())
                assert err <= TOLERANCE * peak, f"{model_id} sr={sr} chunk {k} {name}: max abs err {err:.3g}"
