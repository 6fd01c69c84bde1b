"""The timing loops every Python engine shares (webinfer native and in Pyodide, onnxruntime CPU and WebGPU).

Standard library only: the browser page runs this file in Pyodide. An engine is an ``Engine``: ``tensor``
builds its feed type from raw bytes, ``raw`` reads an output back as bytes, ``run`` is awaited. A job is the
JSON the harness writes (see ``benchmarks.spec.job``); the result carries times and the outputs to check,
and ``first_run_ms``: the first call's duration (warm-up included), which ``run_job`` adds to the engine's
load time to give the first-result time a visitor waits for.
"""

from __future__ import annotations

import base64
import struct
import time


class Engine:
    """What the loops need from an engine; outputs come back in ``names`` order."""

    adapter = ""

    def tensor(self, dtype: str, shape: list, data: bytes):
        raise NotImplementedError

    def raw(self, value) -> bytes:
        raise NotImplementedError

    async def run(self, names: list, feeds: dict) -> list:
        raise NotImplementedError


def encode(dtype: str, shape, data: bytes) -> dict:
    return {"dtype": dtype, "shape": list(shape), "b64": base64.b64encode(data).decode()}


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


def _more(i: int, runs: int, t0: float, budget_s: float) -> bool:
    """Another timed sample? At least one; at most ``runs``; none once the job's budget is spent."""
    return i < 1 or (i < runs and time.perf_counter() - t0 < budget_s)


async def time_single(engine: Engine, job: dict) -> dict:
    """``warmup`` untimed runs, then ``runs`` timed ones; the last run's outputs are returned for checking."""
    feeds = {n: engine.tensor(v["dtype"], v["shape"], base64.b64decode(v["b64"])) for n, v in job["feeds"].items()}
    names = job["outputs"]
    first_ms = None
    for _ in range(job["warmup"]):
        t0 = time.perf_counter()
        await engine.run(names, feeds)
        first_ms = _ms(t0) if first_ms is None else first_ms
    times, outs, start, i = [], None, time.perf_counter(), 0
    while _more(i, job["runs"], start, job["budget_s"]):
        t0 = time.perf_counter()
        outs = await engine.run(names, feeds)
        times.append(_ms(t0))
        i += 1
    outputs = {n: encode("float32", [], engine.raw(o)) for n, o in zip(names, outs)}
    return {"latency_ms": times, "outputs": outputs, "first_run_ms": times[0] if first_ms is None else first_ms}


def _ids(engine: Engine, values: list, shape: list):
    return engine.tensor("int64", shape, struct.pack(f"<{len(values)}q", *values))


def _last_row(engine: Engine, logits, vocab: int) -> bytes:
    raw = engine.raw(logits)
    return raw[len(raw) - vocab * 4:]


async def _llm_pass(engine: Engine, llm: dict, deadline: float) -> tuple[float, list, bytes, bytes]:
    """Prefill ``prompt`` with an empty cache, then decode the given tokens one by one (teacher forcing,
    so every engine computes the same steps; at least 2, none after ``deadline``); returns prefill ms,
    per-token ms and both last logit rows."""
    prompt, steps, vocab = llm["prompt"], llm["decode"], llm["vocab"]
    heads, head_dim = llm["kv_heads"], llm["head_dim"]
    empty = engine.tensor("float32", [1, heads, 0, head_dim], b"")
    past = {p: empty for p, _ in llm["cache"]}
    names = ["logits"] + [present for _, present in llm["cache"]]
    n = len(prompt)
    feeds = {"input_ids": _ids(engine, prompt, [1, n]), "attention_mask": _ids(engine, [1] * n, [1, n]),
             "position_ids": _ids(engine, list(range(n)), [1, n]), **past}
    t0 = time.perf_counter()
    outs = await engine.run(names, feeds)
    prefill_ms = _ms(t0)
    prefill_row = _last_row(engine, outs[0], vocab)
    step_ms = []
    for i, token in enumerate(steps):
        if i >= 2 and time.perf_counter() > deadline:
            break
        pos = n + i
        feeds = {"input_ids": _ids(engine, [token], [1, 1]), "attention_mask": _ids(engine, [1] * (pos + 1),
                 [1, pos + 1]), "position_ids": _ids(engine, [pos], [1, 1])}
        feeds.update({p: v for (p, _), v in zip(llm["cache"], outs[1:])})
        t0 = time.perf_counter()
        outs = await engine.run(names, feeds)
        step_ms.append(_ms(t0))
    return prefill_ms, step_ms, prefill_row, _last_row(engine, outs[0], vocab) if steps else b""


async def time_llm(engine: Engine, job: dict) -> dict:
    """Prefill latency over ``runs`` prefills; decode tokens/s over ``decode_passes`` passes of the steps."""
    llm = job["llm"]
    start, first_ms = time.perf_counter(), None
    for _ in range(job["warmup"]):
        p_ms = (await _llm_pass(engine, {**llm, "decode": llm["decode"][:2]}, 0.0))[0]
        first_ms = p_ms if first_ms is None else first_ms
    prefill, rates, rows, steps = [], [], None, 0
    for i in range(max(job["runs"], llm["decode_passes"])):
        decoding = i < llm["decode_passes"]
        if not decoding and not _more(i, job["runs"], start, job["budget_s"]):
            break
        decode = llm["decode"] if decoding else []
        p_ms, step_ms, first, last = await _llm_pass(engine, {**llm, "decode": decode}, start + job["budget_s"])
        if i < job["runs"]:
            prefill.append(p_ms)
        if decoding:
            rates.append(len(step_ms) / (sum(step_ms) / 1e3))
            rows, steps = (first, last), len(step_ms)
    vocab = llm["vocab"]
    outputs = {"prefill_logits": encode("float32", [vocab], rows[0]),
               "decode_logits": encode("float32", [vocab], rows[1])}
    return {"prefill_ms": prefill, "decode_tok_s": rates, "decode_steps": steps, "outputs": outputs,
            "first_run_ms": prefill[0] if first_ms is None else first_ms}


async def time_generator(gen, job: dict) -> dict:
    """webinfer's own generation loop (in-place KV cache, sampling on the GPU): greedy from the prompt's
    ids; prefill = time to the first token, decode = the following tokens. Outputs: the token ids."""
    llm = job["llm"]
    n_new = len(llm["decode"]) + 1
    first_ms = None
    for _ in range(job["warmup"]):
        async for _tok in gen.agenerate(list(llm["prompt"]), max_new_tokens=3, temperature=0.0, stop_at_eos=False):
            pass
        first_ms = gen.stats["ttft_s"] * 1e3 if first_ms is None else first_ms
    prefill, rates, tokens, start = [], [], [], time.perf_counter()
    for i in range(max(job["runs"], llm["decode_passes"])):
        decode = i < llm["decode_passes"]
        if not decode and not _more(i, job["runs"], start, job["budget_s"]):
            break
        deadline = start + job["budget_s"]
        if hasattr(gen, "reset"):  # prefill the whole prompt each time (not the prefix a previous run cached)
            gen.reset()
        async for _tok in gen.agenerate(list(llm["prompt"]), max_new_tokens=n_new if decode else 1,
                                        temperature=0.0, stop_at_eos=False):
            if len(gen.stats["token_ids"]) >= 3 and time.perf_counter() > deadline:
                gen.cancel()  # stops after this step; the stats still cover the tokens made
        if gen.stats.get("reused_tokens"):
            raise RuntimeError(f"the prompt's prefill reused {gen.stats['reused_tokens']} cached tokens")
        if i < job["runs"]:
            prefill.append(gen.stats["ttft_s"] * 1e3)
        if decode:
            rates.append(gen.stats["decode_tok_s"])
            tokens = list(gen.stats["token_ids"])
    return {"prefill_ms": prefill, "decode_tok_s": rates, "decode_steps": len(tokens) - 1,
            "outputs": {"tokens": tokens}, "first_run_ms": prefill[0] if first_ms is None else first_ms}


async def run_job(engine, job: dict, load_ms: float | None = None) -> dict:
    """``engine``: an Engine, or a webinfer Generator for generation artifacts. ``load_ms``: what making the
    engine took (the caller timed it); with it the result has ``first_result_ms``, load + first run."""
    if job.get("llm") and hasattr(engine, "agenerate"):
        result = await time_generator(engine, job)
        result["adapter"] = engine.core.device.adapter_name
    else:
        result = await (time_llm(engine, job) if job.get("llm") else time_single(engine, job))
        result["adapter"] = engine.adapter
    if load_ms is not None:
        result["load_ms"] = load_ms
        result["first_result_ms"] = [load_ms + result["first_run_ms"]]
    return result
