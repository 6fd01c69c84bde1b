"""The README's Python task examples run as written (``python -c BLOCK`` in a folder holding the files each block's
marker names, built here from small models), their printed results checked against onnxruntime and numpy over
the same models: README drift fails here. The JavaScript twins: tests/browser/test_readme_js.py."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from PIL import Image

from tests import readme_examples as rx
from webinfer.build import build

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = rx.examples("python")


def test_every_task_has_a_short_example_in_both_languages():
    js = rx.examples("js")
    assert sorted(EXAMPLES) == sorted(js) == sorted(rx.TASKS)
    for lang, table in (("python", EXAMPLES), ("js", js)):
        for task, (_, code) in table.items():
            assert len(code.strip().splitlines()) <= 10, f"the {lang} {task} example is over ten lines"


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """The folder the examples run in; photo.png is there from the start."""
    tmp = tmp_path_factory.mktemp("readme")
    Image.fromarray(rx.photo()).save(tmp / "photo.png")
    return tmp


def run_example(task: str, work: Path, provided: set[str]) -> str:
    """Run the README's block for ``task`` in ``work``; every file its marker names must be one the test made."""
    needs, code = EXAMPLES[task]
    assert set(needs) <= provided, f"the {task} example needs {needs}; the test provides {sorted(provided)}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True,
                          timeout=1200)
    assert proc.returncode == 0, f"the README's {task} example failed:\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_image_classification(work):
    from tests.graph.test_prepost import MEAN, STD, classifier_model, preprocess_reference

    model, labels = classifier_model(), ["a", "b", "c", "d", "e", "f"]
    (work / "labels.txt").write_text("\n".join(labels) + "\n")
    pre = {"resize": {"shorter": 18}, "crop": [16, 16], "mean": MEAN, "std": STD}
    build(model, str(work / "cls.wi"), preprocess=pre,
          postprocess={"softmax": True, "top_k": 3, "labels": str(work / "labels.txt")})
    out = run_example("image-classification", work, {"cls.wi", "photo.png"})
    rgba = np.concatenate([rx.photo(), np.full((70, 100, 1), 255, np.uint8)], -1)
    logits = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": preprocess_reference(rgba, pre)})[0][0].astype(np.float64)
    probs = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    rows = [line.split() for line in out.splitlines()]
    assert [r[0] for r in rows] == [labels[i] for i in np.argsort(-probs)[:3]]
    np.testing.assert_allclose([float(r[1]) for r in rows], np.sort(probs)[::-1][:3], atol=2e-4)


def test_feature_extraction(work):
    from sentence_ref import ort_sentence_embeddings

    from webinfer.models import export_minilm

    src = export_minilm()
    build(str(src / "model.onnx"), str(work / "minilm.wi"), target="software", sentence_embedding="auto")
    out = run_example("feature-extraction", work, {"minilm.wi"})
    a, b = ort_sentence_embeddings(src, rx.TEXTS)
    assert out.startswith("cosine ")
    assert abs(float(out.split()[1]) - float(a @ b)) < 2e-4, (out, float(a @ b))


def test_text_generation(work):
    import tiny_llama
    from transformers import AutoTokenizer

    from demos.recipes.smollm2 import ort_greedy

    folder = tiny_llama.tiny_llama(tiny_llama.TINY_CHAT)
    build(str(folder / "model.onnx"), str(work / "smollm.wi"), target="software", max_seq=256)
    out = run_example("text-generation", work, {"smollm.wi"})
    text, ids_line = out[:-1].rsplit("\n", 1)
    ids = json.loads(ids_line)
    tok = AutoTokenizer.from_pretrained(str(tiny_llama.tokenizer_dir()))
    rendered = tok.apply_chat_template(rx.MESSAGES, add_generation_prompt=True, tokenize=False)
    prompt = tok(rendered, add_special_tokens=False)["input_ids"]
    assert 0 < len(ids) <= 16 and ids == ort_greedy(folder / "model.onnx", prompt, len(ids))[0]
    assert text == tok.decode(ids, skip_special_tokens=True)


@pytest.mark.slow
def test_speech_recognition(work, tmp_path):
    import shutil

    from tokenizers import Tokenizer
    from transformers import WhisperFeatureExtractor

    from tests.llm.test_seq2seq import _speech, ort_greedy

    folder = rx.whisper_en()
    build(str(folder), str(work / "whisper.wi"), target="software")  # the audio front end: PCM in
    wav, samples = _speech(tmp_path, 0, rx.SPEECH_TEXT)  # espeak-ng at 16 kHz (sox)
    shutil.copyfile(wav, work / "clip.wav")
    out = run_example("automatic-speech-recognition", work, {"whisper.wi", "clip.wav"})
    ids_line, text = out[:-1].split("\n", 1)
    feats = WhisperFeatureExtractor.from_pretrained(str(folder))(
        np.array(samples), sampling_rate=16000, return_tensors="np").input_features
    want = ort_greedy(folder, {"input_features": feats}, [50257, 50362], {50256}, 24)
    assert ast.literal_eval(ids_line) == want
    assert text == Tokenizer.from_file(str(folder / "tokenizer.json")).decode(want, skip_special_tokens=True)
    assert "tomorrow" in text.lower()


def test_translation(work):
    import seq2seq_fixtures as fx
    from tokenizers import Tokenizer

    from tests.llm.test_seq2seq import _source, ort_greedy

    folder = fx.marian_tiny()
    build(str(folder), str(work / "marian.wi"), target="software")
    out = run_example("translation", work, {"marian.wi"})
    ids_line, text = out[:-1].split("\n", 1)
    want = ort_greedy(folder, _source(folder, rx.SOURCE_TEXT), [2], {1}, 32)
    assert ast.literal_eval(ids_line) == want
    assert text == Tokenizer.from_file(str(folder / "tokenizer.json")).decode(want)


def test_object_detection(work):
    from tests.graph.test_detect_epilogue import assert_same_detections

    det = rx.detector(str(work / "det.wi"), work)
    out = run_example("object-detection", work, {"det.wi", "photo.png"})
    got = []
    for line in out.splitlines():
        label, score, box = line.split(" ", 2)
        got.append({"label": label, "score": float(score), "box": ast.literal_eval(box)})
    want = rx.detections_reference(det["model"], det["post"], rx.photo())
    assert len(want) > 3
    assert_same_detections(got, want, "README object-detection example")


def test_background_removal(work):
    model = rx.matting(str(work / "bg.wi"))
    out = run_example("background-removal", work, {"bg.wi", "photo.png"})
    w, h, kept = map(int, out.split())
    want = rx.matte_reference(model, rx.photo())
    assert (w, h) == (100, 70)
    near = np.abs(want - 0.5) <= 1e-3  # pixels whose side of 0.5 a 1e-3 error may change
    assert int((want > 0.5).sum()) - near.sum() <= kept <= int((want > 0.5).sum()) + near.sum()
    assert 0 < kept < w * h
    cutout = np.asarray(Image.open(work / "cutout.png"))
    assert cutout.shape == (70, 100, 4) and (cutout[..., :3] == rx.photo()).all()
    assert np.abs(cutout[..., 3].astype(np.float64) - np.round(want.clip(0, 1) * 255)).max() <= 1
