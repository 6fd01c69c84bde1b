"""Tiny random decoders paired with their family's tokenizer, for tests/llm/test_decoder_family_tokenizers.py.

Each architecture of scripts/export_fixtures.py is exported by torch dynamo (as the decoder matrix does) with
``vocab_size`` equal to its family's tokenizer size (tokenizer_families.py: the family's documented configuration
over a small trained vocabulary), beside that tokenizer.json and a tokenizer_config.json with the family's chat
template (tests/llm/data/chat_templates.json where it has the family; Qwen2's and Llama 2's as their
instruct models ship them). Cached under ~/.cache/webinfer/models by a hash of the model config and the
tokenizer files: the tokenizers train deterministically, so a second run reuses the export.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path

import tokenizer_families as families

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = json.loads((Path(__file__).parent / "data" / "chat_templates.json").read_text(encoding="utf-8"))
QWEN2_TEMPLATE = TEMPLATES["chatml-smollm2"]["template"].replace(
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face", "You are a helpful assistant.")
LLAMA2_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}"
    "{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}"
    "{% endfor %}")
# family -> (bos, eos, chat template or None)
CONFIGS = {
    "llama3": ("<|begin_of_text|>", "<|eot_id|>", TEMPLATES["llama3"]["template"]),
    "llama2": ("<s>", "</s>", LLAMA2_TEMPLATE),
    "qwen2.5": (None, "<|im_end|>", QWEN2_TEMPLATE),
    "phi3": ("<s>", "<|endoftext|>", TEMPLATES["phi3"]["template"]),
    "mistral": ("<s>", "</s>", TEMPLATES["mistral"]["template"]),
    "gemma": ("<bos>", "<eos>", TEMPLATES["gemma"]["template"]),
    "gpt2": ("<|endoftext|>", "<|endoftext|>", None),
}
# architecture-family pairs: each architecture with the tokenizer its models ship (Qwen3 keeps Qwen2's; Gemma 2
# and 3 keep Gemma's configuration, Gemma 3 over a larger vocabulary)
PAIRS = [("llama", "llama3"), ("llama", "llama2"), ("qwen2", "qwen2.5"), ("qwen3", "qwen2.5"), ("phi3", "phi3"),
         ("mistral", "mistral"), ("gemma", "gemma"), ("gemma2", "gemma"), ("gemma3", "gemma"), ("gpt2", "gpt2")]
_TOKENIZERS: dict[str, str] = {}


def tokenizer_json(family: str) -> str:
    if family not in _TOKENIZERS:
        _TOKENIZERS[family] = families.BUILT[family]()
    return _TOKENIZERS[family]


def tokenizer_config(family: str) -> str:
    bos, eos, template = CONFIGS[family]
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": bos, "eos_token": eos,
              "model_max_length": 512}
    if template is not None:
        config["chat_template"] = template
    return json.dumps(config, ensure_ascii=False, indent=1)


def vocab_size(tok_json: str) -> int:
    """Ids run from 0 to the largest of the model's vocabulary and the added tokens."""
    spec = json.loads(tok_json)
    vocab = spec["model"]["vocab"]
    ids = vocab.values() if isinstance(vocab, dict) else range(len(vocab))
    return max(max(ids), *(t["id"] for t in spec["added_tokens"])) + 1


def cache_root() -> Path:
    return Path(os.environ.get("WEBINFER_CACHE", Path.home() / ".cache" / "webinfer")) / "models"


def _export_fixtures():
    """scripts/export_fixtures.py, by path (scripts/ is not a package)."""
    if "export_fixtures" not in sys.modules:
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        spec = importlib.util.spec_from_file_location("export_fixtures", ROOT / "scripts" / "export_fixtures.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["export_fixtures"] = module
    return sys.modules["export_fixtures"]


def model_dir(arch: str, family: str) -> Path:
    """The folder (model.onnx, tokenizer.json, tokenizer_config.json), exported on the first call."""
    fx = _export_fixtures()
    tok, cfg = tokenizer_json(family), tokenizer_config(family)
    vocab = vocab_size(tok)
    key = hashlib.sha256(repr((arch, fx.ARCHS[arch], fx.COMMON, vocab, "dynamo", tok, cfg)).encode()).hexdigest()
    out = cache_root() / f"family-{arch}-{family}-{key[:10]}"
    if (out / "model.onnx").is_file():
        return out
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(tok, encoding="utf-8")
    (out / "tokenizer_config.json").write_text(cfg, encoding="utf-8")
    tmp = out / f"model.onnx.partial-{os.getpid()}"  # another process may be exporting the same
    fx.export_torch(arch, "dynamo", tmp, vocab=vocab)
    os.replace(tmp, out / "model.onnx")  # last: a folder with model.onnx is complete
    return out
