"""The audio prologue (PCM at any sample rate -> the model's features, on the GPU) against independent references:
scipy's resample_poly for the resampler, transformers' WhisperFeatureExtractor (its numpy path) and
Wav2Vec2FeatureExtractor for the features, onnxruntime for a tiny encoder behind the prologue, scipy.io.wavfile for
the WAV reader. Speech is made with espeak-ng (22.05 kHz, its own rate)."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import onnxruntime as ort
import pytest
from audio_models import tiny_encoder_export, whisper_reference
from onnx import TensorProto, helper
from scipy.io import wavfile
from scipy.signal import resample_poly

from webinfer.build import build
from webinfer.errors import WebinferError
from webinfer.runtime.audio import audio_feed, read_wav
from webinfer.runtime.inference import InferenceSession

rng = np.random.default_rng(0)
OPSET = [helper.make_opsetid("", 17)]


@pytest.fixture(scope="module")
def speech(tmp_path_factory) -> tuple[np.ndarray, int, str]:
    """(int16 samples, rate, path) of a sentence spoken by espeak-ng."""
    if not shutil.which("espeak-ng"):
        pytest.fail("espeak-ng is missing: scripts/setup.sh installs it")
    path = str(tmp_path_factory.mktemp("speech") / "speech.wav")
    subprocess.run(["espeak-ng", "-w", path, "The quick brown fox jumps over the lazy dog, twice."], check=True)
    rate, data = wavfile.read(path)
    return data, rate, path


def identity(shape) -> object:
    name = "input_features" if len(shape) == 3 else "input_values"
    g = helper.make_graph([helper.make_node("Identity", [name], ["y"])], "id",
                          [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=OPSET)


# -- resampling ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def resampler(tmp_path_factory) -> InferenceSession:
    node = helper.make_node("Resample", ["audio"], ["y"], domain="webinfer", rate_dim="audio_rate", out_rate=16000)
    g = helper.make_graph([node], "resample", [helper.make_tensor_value_info("audio", TensorProto.FLOAT, ["n"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    art = str(tmp_path_factory.mktemp("resample") / "art")
    build(helper.make_model(g, opset_imports=[*OPSET, helper.make_opsetid("webinfer", 1)]), art)
    return InferenceSession(art)


@pytest.mark.parametrize("rate", [44100, 48000, 8000, 22050, 16000, 11025])
def test_resample_matches_scipy_resample_poly(resampler, rate):
    """The kernel builds resample_poly's own filter (Kaiser beta 5, 10 zero crossings per side, unit DC gain) from
    the rates, so the two agree to f32 rounding: |error| <= 1e-5 for signals in [-1, 1] (f32 taps and sums over at
    most 61 taps give ~1e-6; 1e-5 is a third of 16-bit PCM's step). White noise has energy up to the input's
    Nyquist, so the filter's whole response (pass band, transition, stop band) is compared, edges included."""
    t = np.arange(4001) / rate
    for x in (rng.uniform(-1, 1, 4001), 0.9 * np.sin(2 * np.pi * (200 + 1500 * t) * t)):
        got = resampler.run(None, {"audio": x.astype(np.float32)}, dims={"audio_rate": rate})[0]
        want = resample_poly(x.astype(np.float32).astype(np.float64), 16000, rate)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5, err_msg=f"{rate} Hz")


def test_resample_rate_must_be_positive(resampler):
    with pytest.raises(WebinferError, match="sample rate must be at least 1"):
        resampler.run(None, {"audio": np.zeros(10, np.float32)}, dims={"audio_rate": 0})


# -- Whisper features --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mels", [80, 128])
def test_whisper_features_match_transformers(mels, speech, tmp_path):
    data, rate, _ = speech
    art = str(tmp_path / "whisper")
    m = build(identity(["batch", mels, 3000]), art, preprocess={"feature_extractor_type": "WhisperFeatureExtractor",
                                                                "feature_size": mels})
    assert m["audio"]["audio"] == "audio" and m["audio"]["mel_bins"] == mels
    assert [io["name"] for io in m["inputs"]] == ["audio"]
    session = InferenceSession(art)
    pcm = data.astype(np.float32) / 32768
    cases = [(pcm, rate, data)]  # int16 as espeak wrote it, fed at its own rate: resampled on the GPU
    if mels == 80:
        long = rng.uniform(-0.5, 0.5, 16000 * 31).astype(np.float32)  # truncated to 30 s
        # stereo, averaged on the GPU: [samples, channels] as scipy reads a WAV, [channels, samples] as torchaudio
        cases += [(long, 16000, long), (pcm, rate, np.stack([0.5 * pcm, 1.5 * pcm], axis=1)),
                  (pcm, rate, np.stack([1.5 * pcm, 0.5 * pcm]))]
        for other in (44100, 48000, 8000):  # the same speech at other rates (resample_poly there), resampled back
            x = resample_poly(pcm.astype(np.float64), other, rate).astype(np.float32)
            cases.append((x, other, x))
    for ref_pcm, ref_rate, feed in cases:
        got = session.run(None, {"audio": feed, "sample_rate": ref_rate})[0]
        want = whisper_reference(ref_pcm, ref_rate, mels)
        assert got.shape == want.shape == (1, mels, 3000)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-4, err_msg=f"{mels} mels at {ref_rate} Hz")


def test_wav2vec2_normalisation_matches_transformers(speech, tmp_path):
    from transformers import Wav2Vec2FeatureExtractor

    data, rate, _ = speech
    art = str(tmp_path / "w2v")
    spec = tmp_path / "audio.json"  # (the JSON file form of the spec)
    spec.write_text('{"feature_extractor_type": "Wav2Vec2FeatureExtractor", "do_normalize": true, '
                    '"sampling_rate": 16000}')
    build(identity(["batch", "sequence"]), art, preprocess=str(spec))
    pcm = data.astype(np.float32) / 32768
    got = InferenceSession(art).run(None, {"audio": pcm, "sample_rate": rate})[0]
    at16k = resample_poly(pcm.astype(np.float64), 16000, rate).astype(np.float32)
    want = Wav2Vec2FeatureExtractor(do_normalize=True)(at16k, sampling_rate=16000, return_tensors="np").input_values
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)  # (divided by the std, ~0.1: 1e-5 of PCM becomes 1e-4)


def test_wav2vec2_attention_mask_becomes_ones(speech, tmp_path):
    """A raw-audio encoder that also takes attention_mask: the prologue feeds it ones of the waveform's shape."""
    from transformers import Wav2Vec2FeatureExtractor

    data, rate, _ = speech
    nodes = [helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["input_values", "m"], ["y"]),
             helper.make_node("ReduceSum", ["m"], ["count"], keepdims=0)]
    g = helper.make_graph(nodes, "masked", [helper.make_tensor_value_info("input_values", TensorProto.FLOAT, ["b", "s"]),
                                            helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                                                          ["b", "s"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("count", TensorProto.FLOAT, None)])
    art = str(tmp_path / "masked")
    m = build(helper.make_model(g, opset_imports=OPSET), art,
              preprocess={"feature_extractor_type": "Wav2Vec2FeatureExtractor", "return_attention_mask": True})
    assert [io["name"] for io in m["inputs"]] == ["audio"]
    pcm = data.astype(np.float32) / 32768
    y, count = InferenceSession(art).run(None, {"audio": pcm, "sample_rate": rate})
    at16k = resample_poly(pcm.astype(np.float64), 16000, rate).astype(np.float32)
    want = Wav2Vec2FeatureExtractor(do_normalize=True, return_attention_mask=True)(
        at16k, sampling_rate=16000, return_tensors="np")
    np.testing.assert_allclose(y, want.input_values, rtol=0, atol=1e-4)
    assert count == want.attention_mask.sum()


def test_tiny_encoder_behind_the_prologue_equals_onnxruntime(speech, tmp_path):
    """The encoder in a folder with Whisper's preprocessor_config.json: the build adds the prologue by itself; its
    output on a WAV file equals onnxruntime's on transformers' features of the same audio."""
    data, rate, path = speech
    model = tiny_encoder_export(tmp_path / "export")
    art = str(tmp_path / "art")
    m = build(str(tmp_path / "export" / "encoder_model.onnx"), art)
    assert m["audio"]["input"] == "input_features"
    kept = build(str(tmp_path / "export" / "encoder_model.onnx"), str(tmp_path / "kept"), preprocess="none")
    assert "audio" not in kept and [io["name"] for io in kept["inputs"]] == ["input_features"]
    pcm, got_rate = read_wav(path)
    got = InferenceSession(art).run(None, {"audio": pcm, "sample_rate": got_rate})[0]
    features = whisper_reference(data.astype(np.float32) / 32768, rate, 80)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"input_features": features})[0]
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


def test_cli_preprocess_audio_without_a_config(tmp_path, capsys):
    from webinfer.cli import main

    (tmp_path / "m.onnx").write_bytes(identity(["batch", 80, 3000]).SerializeToString())
    assert main(["build", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "art"), "--preprocess", "audio"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("webinfer: error: --preprocess audio: no preprocessor_config.json") and "\n" not in err


def test_prologue_spec_errors(tmp_path):
    model = identity(["batch", 80, 3000])
    for spec, words in [
        ("audio", "no preprocessor_config.json"),
        ({"feature_extractor_type": "SpeechT5FeatureExtractor"}, "feature_extractor_type"),
        ({"feature_extractor_type": "WhisperFeatureExtractor", "feature_size": 128}, "the WhisperFeatureExtractor gives"),
        ({"feature_extractor_type": "WhisperFeatureExtractor", "dither": 1e-4}, "dither"),
        ({"feature_extractor_type": "WhisperFeatureExtractor", "hop": 3}, "unknown key 'hop'"),
    ]:
        with pytest.raises(WebinferError, match=words):
            build(model, str(tmp_path / "x"), preprocess=spec)


# -- the run side: PCM forms and WAV files -------------------------------------------------------------------------
def test_audio_feed_forms():
    from array import array

    x = rng.integers(-32768, 32767, 50).astype(np.int16)
    want = (x.astype(np.float32) / 32768).reshape(1, -1)
    for form, dtype in ((x, None), (x.astype(np.float64) / 32768, None), (want.tobytes(), None),
                        (x.tobytes(), "int16"), (array("h", x.tobytes()), None), ([float(v) / 32768 for v in x], None)):
        t = audio_feed(form, dtype=dtype)
        got = np.frombuffer(t.data, np.float32).reshape(t.shape)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-7)
    with pytest.raises(WebinferError, match="not whole frames"):
        audio_feed(np.zeros(5, np.float32).tobytes(), channels=2)
    frames = np.arange(12, dtype=np.float32).reshape(6, 2)  # interleaved bytes of 2 channels -> a row per channel
    t = audio_feed(frames.tobytes(), channels=2)
    np.testing.assert_array_equal(np.frombuffer(t.data, np.float32).reshape(t.shape), frames.T)
    with pytest.raises(WebinferError, match="expected float32, float64 or int16"):
        audio_feed(np.zeros(5, np.int32))


@pytest.mark.parametrize("fmt", [["-b", "16"], ["-b", "8"], ["-b", "24"], ["-b", "32"], ["-c", "2"], ["-c", "3"],
                                 ["-e", "floating-point", "-b", "32"]])
def test_read_wav_matches_scipy(speech, tmp_path, fmt):
    if not shutil.which("sox"):
        pytest.fail("sox is missing: scripts/setup.sh installs it")
    path = str(tmp_path / "x.wav")
    encoding = [] if "-e" in fmt else ["-e", "signed-integer" if fmt != ["-b", "8"] else "unsigned-integer"]
    subprocess.run(["sox", speech[2], *fmt, *encoding, path], check=True)
    rate, data = wavfile.read(path)
    scale = {np.dtype(np.uint8): 128.0, np.dtype(np.int16): 32768.0, np.dtype(np.int32): 2.0**31,
             np.dtype(np.float32): 1.0}[data.dtype]
    want = (data.astype(np.float64) - (128 if data.dtype == np.uint8 else 0)) / scale
    got, got_rate = read_wav(path)
    assert got_rate == rate
    np.testing.assert_allclose(np.frombuffer(got.data, np.float32).reshape(got.shape), want.reshape(len(data), -1).T,
                               rtol=0, atol=1e-7)


def test_read_wav_errors(speech, tmp_path):
    good = open(speech[2], "rb").read()
    alaw = str(tmp_path / "a.wav")
    subprocess.run(["sox", speech[2], "-e", "a-law", alaw], check=True)
    for source, words in [(good[:30], "no format chunk"), (b"RIFF" + bytes(rng.integers(0, 256, 60, np.uint8)),
                                                           "not a WAV file"),
                          (good[:100], "truncated WAV file"), (good[:36] + b"LIST" + b"\xff" * 8, "no data chunk"),
                          (alaw, "unsupported WAV \\(format 6, 8-bit"), (str(tmp_path / "none.wav"), "no such file"),
                          (good[:40] + bytes(4), "holds no samples")]:
        with pytest.raises(WebinferError, match=words) as e:
            read_wav(source)
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("edit, words", [
    (lambda a: a.__setitem__("audio", "pcm"), ["audio.audio", "'pcm' is not an input"]),
    (lambda a: a.__setitem__("rate_dim", "hz"), ["audio.rate_dim", "not one of the artifact's dims"]),
    (lambda a: a.__setitem__("features", "mfcc"), ["audio.features", "not one of log_mel, waveform"]),
    (lambda a: a.__setitem__("sampling_rate", 0), ["audio.sampling_rate", "out of range"]),
    (lambda a: a.__setitem__("window", "hann"), ["audio", "unknown field 'window'"]),
])
def test_corrupt_audio_block_is_named(tmp_path, edit, words):
    """The manifest's audio block (runtime/audio.py and the page read it) is typed: a forged one is a named error."""
    from test_manifest import _forge, load

    from webinfer.format.manifest import parse_manifest

    art = str(tmp_path / "w2v")
    build(identity(["batch", "sequence"]), art, preprocess={"feature_extractor_type": "Wav2Vec2FeatureExtractor"})
    m = load(art)
    assert parse_manifest(m, "a").to_json() == m and m["audio"]["features"] == "waveform"
    _forge(art, lambda m: edit(m["audio"]))
    with pytest.raises(WebinferError) as e:
        InferenceSession(art)
    assert "\n" not in str(e.value)
    for w in words:
        assert w in str(e.value), str(e.value)
