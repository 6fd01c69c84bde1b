"""``webinfer run --input NAME=FILE`` with the files a user has: an image file for an artifact built with
--preprocess IMAGE.json, a WAV file for one with the audio front end (natively and, for the image, on the CPU
path), checked against onnxruntime on the source model fed by independent readers (Pillow + numpy, scipy +
transformers' Whisper features); what cannot be fed is refused in one line."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from audio_models import tiny_encoder_export, whisper_reference
from PIL import Image
from scipy.io import wavfile

from tests.graph.test_prepost import MEAN, STD, classifier_model, image, preprocess_reference
from webinfer.build import build
from webinfer.cli import main


def _run(capsys, *args) -> tuple[int, str, str]:
    rc = main(["run", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err.strip()


def _one_line(rc, err, *words):
    assert rc == 2 and err.startswith("webinfer: error: ") and "\n" not in err, err
    for w in words:
        assert w in err, err


@pytest.fixture(scope="module")
def image_artifact(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("img")
    model = classifier_model()
    pre = {"resize": {"shorter": 18}, "crop": [16, 16], "mean": MEAN, "std": STD}
    art = str(tmp / "cls.wi")
    manifest = build(model, art, preprocess=pre, target="software", cpu=True)
    rgba = image(27, 35)
    Image.fromarray(rgba).save(tmp / "photo.png")
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": preprocess_reference(rgba, pre)})[0]
    return art, manifest["preprocess"]["image"], tmp / "photo.png", want


@pytest.mark.parametrize("device", ["gpu", "cpu"])
def test_an_image_file_feeds_the_image_input(image_artifact, tmp_path, capsys, device):
    art, name, photo, want = image_artifact
    rc, out, err = _run(capsys, art, "--input", f"{name}={photo}", "--device", device, "--output", tmp_path / "o.npz")
    assert rc == 0, err
    np.testing.assert_allclose(np.load(tmp_path / "o.npz")["logits"], want, rtol=1e-4, atol=1e-4)


def test_files_that_cannot_feed_are_one_line(image_artifact, tmp_path, capsys):
    art, name, photo, _ = image_artifact
    _one_line(*_run(capsys, art, "--input", f"other={photo}")[::2], "an image file feeds only the image input",
              repr(name))
    (tmp_path / "x.wav").write_bytes(b"RIFF")
    _one_line(*_run(capsys, art, "--input", f"{name}={tmp_path / 'x.wav'}")[::2], "a WAV file feeds only",
              "this one has none")
    (tmp_path / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\nnot an image")
    _one_line(*_run(capsys, art, "--input", f"{name}={tmp_path / 'bad.png'}")[::2], "not an image Pillow can read")
    _one_line(*_run(capsys, art, "--input", f"{name}={tmp_path}")[::2], "a folder, not a file")
    _one_line(*_run(capsys, art, "--input", f"{name}={photo}", "--input", f"{name}={photo}")[::2], "given twice")
    np.save(tmp_path / "rank3.npy", np.zeros((2, 3, 4), np.uint32))  # (uint32: not pixels, the packed input)
    _one_line(*_run(capsys, art, "--device", "cpu", "--input", f"{name}={tmp_path / 'rank3.npy'}")[::2],
              "onnxruntime refused the feeds", "rank")


def test_a_wav_file_feeds_the_audio_input(tmp_path, capsys):
    model = tiny_encoder_export(tmp_path / "export")
    art = str(tmp_path / "enc.wi")
    manifest = build(str(tmp_path / "export" / "encoder_model.onnx"), art, target="software")
    rate = 22050
    t = np.arange(int(rate * 0.7)) / rate
    pcm = (0.4 * np.sin(2 * np.pi * 330 * t) + 0.05 * np.random.default_rng(3).standard_normal(t.size))
    wavfile.write(tmp_path / "clip.wav", rate, (pcm * 32767).astype(np.int16))
    rc, out, err = _run(capsys, art, "--input", f"{manifest['audio']['audio']}={tmp_path / 'clip.wav'}",
                        "--output", tmp_path / "o.npz")
    assert rc == 0, err
    _, data = wavfile.read(tmp_path / "clip.wav")
    features = whisper_reference(data.astype(np.float32) / 32768, rate, 80)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"input_features": features})[0]
    np.testing.assert_allclose(np.load(tmp_path / "o.npz")["logits"], want, rtol=1e-3, atol=1e-4)
    Image.fromarray(image(4, 4)).save(tmp_path / "p.png")
    _one_line(*_run(capsys, art, "--input", f"{manifest['audio']['audio']}={tmp_path / 'p.png'}")[::2],
              "an image file feeds only", "this one has none")


def test_a_folder_where_a_file_is_expected_says_so(tmp_path, capsys, image_artifact):
    """A folder is no model (unless it is an encoder-decoder export), image or WAV file: the line says which."""
    (tmp_path / "folder").mkdir()
    rc = main(["build", str(tmp_path / "folder"), "-o", str(tmp_path / "o.wi")])
    _one_line(rc, capsys.readouterr().err.strip(), "a folder, not an .onnx file", "encoder_model.onnx")
    rc = main(["classify", image_artifact[0], str(tmp_path / "folder")])
    _one_line(rc, capsys.readouterr().err.strip(), "a folder, not an image file")
    rc = main(["transcribe", image_artifact[0], str(tmp_path / "folder")])
    assert rc == 2 and "\n" not in capsys.readouterr().err.strip()


def test_run_on_a_generation_artifact_names_the_command_that_runs_it():
    from types import SimpleNamespace as NS

    from webinfer.cli_feeds import load_feeds
    from webinfer.errors import WebinferError

    io = [NS(name="input_ids"), NS(name="sampling_params")]
    decoder = NS(inputs=io, states=[NS()], seq2seq=None, preprocess=None, audio=None)
    with pytest.raises(WebinferError, match="missing feed for input 'input_ids': .*`webinfer generate"):
        load_feeds({}, decoder)
    with pytest.raises(WebinferError, match="encoder-decoder.*`webinfer transcribe"):
        load_feeds({}, NS(**{**vars(decoder), "seq2seq": NS()}))
