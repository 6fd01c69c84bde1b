"""Chat templates: the model's own template, rendered natively with jinja2 and in the browser's way (the format the
build precomputes, no jinja2), both equal to transformers' apply_chat_template, for six template families
(ChatML with a default system prompt as SmolLM2/Qwen write it, Llama 3, Gemma, Phi-3, Mistral, Zephyr)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from webinfer.errors import WebinferError
from webinfer.graph.llm import chat_format
from webinfer.llm import chat_template

TEMPLATES = json.loads((Path(__file__).parent / "data" / "chat_templates.json").read_text(encoding="utf-8"))
CONVERSATIONS = [
    [{"role": "user", "content": "Hello there!"}],
    [{"role": "system", "content": "You are terse.\n"}, {"role": "user", "content": "  What is 2 + 2?  "}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": " Hello! How can I help?"},
     {"role": "user", "content": "Tell me a joke.\n\nA short one."}],
    [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
     {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}, {"role": "user", "content": "é ü 😀"}],
    [{"role": "assistant", "content": "I start."}],
]


def _hf(family: str):
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    spec = TEMPLATES[family]
    hf = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")),
                                 bos_token=spec["bos_token"], eos_token=spec["eos_token"])
    hf.chat_template = spec["template"]
    return hf


def _config(family: str) -> dict:
    spec = TEMPLATES[family]
    config = {"chat_template": spec["template"], "bos_token": spec["bos_token"], "eos_token": spec["eos_token"]}
    return json.loads(chat_format.with_chat_format(json.dumps(config).encode()))


@pytest.mark.parametrize("family", sorted(TEMPLATES))
def test_matches_transformers_natively_and_without_jinja(family):
    hf, config = _hf(family), _config(family)
    assert chat_template.FORMAT_KEY in config, "the build could not precompute this family's format"
    rendered = 0
    for messages in CONVERSATIONS:
        for gen in (True, False):
            try:
                want = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
            except Exception:  # the template refuses this conversation (Gemma: no system role)
                for use_jinja in (True, False):
                    with pytest.raises(WebinferError):
                        chat_template.render(config, messages, gen, use_jinja=use_jinja)
                continue
            assert chat_template.render(config, messages, gen, use_jinja=True) == want
            assert chat_template.render(config, messages, gen, use_jinja=False) == want
            rendered += 1
    assert rendered >= 4


def test_a_template_the_format_cannot_express_is_refused_without_jinja():
    """Contents numbered by position: no per-role prefix/suffix can say that, so no format is stored and the
    browser path refuses instead of rendering something else."""
    config = {"chat_template": "{% for m in messages %}{{ loop.index }}. {{ m['role'] }}: {{ m['content'] }}\n"
                               "{% endfor %}"}
    out = json.loads(chat_format.with_chat_format(json.dumps(config).encode()))
    assert chat_template.FORMAT_KEY not in out
    messages = CONVERSATIONS[2]
    assert chat_template.render(out, messages, True, use_jinja=True) == \
        "1. user: Hi\n2. assistant:  Hello! How can I help?\n3. user: Tell me a joke.\n\nA short one.\n"
    with pytest.raises(WebinferError, match="needs jinja2"):
        chat_template.render(out, messages, True, use_jinja=False)


def test_tokenizer_uses_the_models_template(tokenizer_dir):
    """SmolLM2's artifact tokenizer: apply_chat_template renders the model's own template (ChatML there), the
    same through both paths."""
    from webinfer.graph.llm import tokenizer_assets
    from webinfer.llm.tokenizer import Tokenizer

    assets = tokenizer_assets(str(tokenizer_dir / "model.onnx"))
    tok = Tokenizer.from_json(assets["tokenizer.json"].decode(), assets["tokenizer_config.json"].decode())
    messages = CONVERSATIONS[2]
    native = tok.apply_chat_template(messages, tokenize=False, use_jinja=True)
    assert tok.apply_chat_template(messages, tokenize=False, use_jinja=False) == native
    assert native.startswith("<|im_start|>system\n") and native.endswith("<|im_start|>assistant\n")
