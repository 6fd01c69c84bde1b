"""webinfer.llm.tokenizers in Chromium through Pyodide (Python 3.14, its own Unicode tables): the same ids and
text as the `tokenizers` package computes natively, for five families (byte-level BPE with a regex Split,
NFC + Split, byte-fallback BPE, Unigram with SentencePiece's charsmap, WordPiece), over the whole corpus each;
plus the time to load each tokenizer and to encode a varied 4,000-token prompt there with empty caches
(printed, not asserted)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from webinfer.serve import serve_in_thread
from webinfer.web import copy_pyodide, pyodide_dir

pytestmark = pytest.mark.browser
LLM_TESTS = Path(__file__).resolve().parents[1] / "llm"
FAMILIES = ["llama3", "qwen2.5", "llama2", "t5", "bert"]

PAGE = """<!doctype html><meta charset="utf-8"><title>tokenizers</title><p id="status">starting</p>
<script type="module">
import { loadPyodide } from "./pyodide/pyodide.mjs";
const status = document.getElementById("status");
try {
  const py = await loadPyodide({ indexURL: new URL("pyodide/", location.href).href });
  await py.loadPackage(new URL("WHEEL", location.href).href, { messageCallback: () => {} });
  py.runPython(await (await fetch("check.py")).text());
  status.dataset.result = await py.globals.get("run")();
} catch (e) { status.dataset.error = String(e && e.message ? e.message : e); }
status.dataset.done = "1";
</script>"""

CHECK = r'''
import json, time
from js import fetch
from webinfer.llm.tokenizers import DecodeStream, check


async def run():
    data = json.loads(await (await fetch("data.json")).text())
    out = {}
    for name, case in data.items():
        text = await (await fetch(case["file"])).text()
        t0 = time.perf_counter()
        tok = check(text)
        load_s = time.perf_counter() - t0
        bad = [i for i, (s, want) in enumerate(zip(case["corpus"], case["ids"])) if tok.encode(s, True) != want]
        texts = [tok.decode(ids, False) for ids in case["decode"]]
        streams = []
        for ids in case["decode"][:200]:
            stream = DecodeStream(tok)
            streams.append([stream.push(i) for i in ids])
        fresh = check(text)  # empty caches: every word of the prompt is new to it
        t0 = time.perf_counter()
        prompt_ids = fresh.encode(case["prompt"], False)
        encode_s = time.perf_counter() - t0
        out[name] = {"n": len(case["corpus"]), "bad": bad[:5], "n_bad": len(bad), "texts": texts, "streams": streams,
                     "load_s": load_s, "prompt_tokens": len(prompt_ids), "prompt_ok": prompt_ids == case["prompt_ids"],
                     "encode_s": encode_s}
    import sys, unicodedata
    out["python"] = [sys.version, unicodedata.unidata_version]
    return json.dumps(out)
'''


def _prompt(ref, n_tokens: int = 4000) -> str:
    """Varied text (prose, code, several scripts, numbers) of about `n_tokens` tokens."""
    from tokenizer_corpus import build_corpus

    held = (LLM_TESTS / "data" / "held_text.txt").read_text(encoding="utf-8")
    text = held + " ".join(build_corpus(n_random=1500, seed=555)[120:])
    ids = ref.encode(text, add_special_tokens=False).ids
    return ref.decode(ids[:n_tokens])


def test_families_agree_in_pyodide(page, tmp_path, webinfer_wheel):
    sys.path.insert(0, str(LLM_TESTS))
    import random

    import tokenizer_families as families
    from tokenizer_corpus import build_corpus, valid
    from tokenizers import Tokenizer
    from tokenizers.decoders import DecodeStream as ReferenceStream

    site = tmp_path / "site"
    site.mkdir()
    copy_pyodide(pyodide_dir(), str(site))
    wheel = shutil.copy(webinfer_wheel, site)
    (site / "index.html").write_text(PAGE.replace("WHEEL", os.path.basename(wheel)), encoding="utf-8")
    (site / "check.py").write_text(CHECK, encoding="utf-8")
    data, refs = {}, {}
    for name in FAMILIES:
        text = families.bert_file().read_text(encoding="utf-8") if name == "bert" else families.BUILT[name]()
        (site / f"{name}.json").write_text(text, encoding="utf-8")
        ref = refs[name] = Tokenizer.from_str(text)
        spec = json.loads(text)
        corpus = build_corpus(specials=[t["content"] for t in spec["added_tokens"]], surrogates=True)
        rng = random.Random(1)
        size = ref.get_vocab_size(with_added_tokens=True)
        decode = [e.ids for e in ref.encode_batch([valid(t) for t in corpus[::20]], add_special_tokens=False)]
        decode += [[rng.randrange(size) for _ in range(rng.randint(1, 10))] for _ in range(200)]
        untruncated = Tokenizer.from_str(text)
        untruncated.no_truncation()
        prompt = _prompt(untruncated)
        data[name] = {"file": f"{name}.json", "corpus": corpus,
                      "ids": [e.ids for e in ref.encode_batch([valid(t) for t in corpus], add_special_tokens=True)],
                      "decode": decode, "prompt": prompt,
                      "prompt_ids": ref.encode(prompt, add_special_tokens=False).ids}
    (site / "data.json").write_text(json.dumps(data), encoding="ascii")
    server, url = serve_in_thread(str(site))
    try:
        page.goto(url)
        page.wait_for_selector("#status[data-done]", state="attached", timeout=600_000)
        status = page.locator("#status")
        assert status.get_attribute("data-error") is None, status.get_attribute("data-error")
        result = json.loads(status.get_attribute("data-result"))
    finally:
        server.shutdown()
        server.server_close()
    print("Pyodide", result.pop("python"))
    for name in FAMILIES:
        got, case, ref = result[name], data[name], refs[name]
        print(f"{name}: {got['n'] - got['n_bad']} of {got['n']} strings equal; load {got['load_s']:.2f} s, "
              f"{got['prompt_tokens']}-token prompt encoded in {got['encode_s'] * 1000:.0f} ms")
        assert got["n_bad"] == 0, (name, [case["corpus"][i][:60] for i in got["bad"]])
        assert got["prompt_ok"], name
        assert got["texts"] == [ref.decode(ids, skip_special_tokens=False) for ids in case["decode"]], name
        for ids, chunks in zip(case["decode"], got["streams"]):
            stream = ReferenceStream(skip_special_tokens=False)
            try:
                want = [stream.step(ref, i) or "" for i in ids]
            except Exception:  # tokenizers refuses some random streams; nothing to compare
                continue
            assert chunks == want, (name, ids)
