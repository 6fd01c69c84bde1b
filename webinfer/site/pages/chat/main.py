"""Chat with SmolLM2-135M-Instruct in the browser: webinfer.llm.Generator over a session whose weights the
page's JavaScript wrote straight into GPU buffers; tokens stream to the page through a JS callback."""

import json

from webinfer.llm.generate import Generator
from webinfer.llm.tokenizer import Tokenizer
from webinfer.runtime.webpage import PageSession

gen = None


async def setup(artifact_url, adapter, device, weight_pairs):
    global gen
    session = await PageSession.open(artifact_url, adapter, device, weight_pairs)
    assets = session.assets
    if "tokenizer.json" not in assets:
        raise ValueError("the chat artifact has no tokenizer.json asset")
    config = assets.get("tokenizer_config.json")
    tokenizer = Tokenizer.from_json(assets["tokenizer.json"].decode(), config.decode() if config else None)
    gen = Generator(session.core, tokenizer)
    # Compile every pipeline (prefill and decode plans) before the visitor's first message.
    async for _ in gen.agenerate("Hi", chat=True, max_new_tokens=2):
        pass


async def chat(prompt: str, max_new_tokens: int, greedy: bool, seed: int, on_token) -> str:
    """Stream the answer to ``prompt``: ``on_token(id, text)`` per token; returns the stats as JSON."""
    if not prompt.strip():
        raise ValueError("the message is empty")
    options = {"temperature": 0.0, "top_k": 0, "top_p": 1.0} if greedy else \
        {"temperature": 0.7, "top_k": 0, "top_p": 0.9}
    async for tok in gen.agenerate(prompt, chat=True, max_new_tokens=int(max_new_tokens), seed=int(seed),
                                   **options):
        on_token(tok.id, tok.text)
    st = gen.stats
    return json.dumps({k: st.get(k) for k in ("prompt_ids", "token_ids", "text", "ttft_s", "prefill_tok_s",
                                              "decode_tok_s", "cancelled")})


def cancel() -> None:
    if gen is not None:
        gen.cancel()
