"""Derive a chat format from a model's jinja chat template at build time, for runtimes without jinja2.

The template is rendered (jinja2 sandbox, llm/chat_template.py) on probe conversations whose contents are
unique markers with a space on each side; the text around the markers gives, per role, what comes before a
conversation's first message, between two messages, and after the last (with and without the generation
prompt), and whether the template strips contents. The format is kept only when it reproduces the template
exactly on every probe conversation (up to 5 messages, with and without a system message); a conversation
shape the template refuses (``raise_exception``, say a system message for Gemma) is simply absent from the
format, so the runtime refuses it too.
"""

from __future__ import annotations

import itertools
import json

from ...errors import WebinferError
from ...llm import chat_template as ct

ROLES = ("system", "user", "assistant")
_MAX_MESSAGES = 5


def _marker(i: int) -> str:
    return f"\x02m{i}\x03"


def _conversations():
    """Every role sequence of up to _MAX_MESSAGES messages (system only first)."""
    for n in range(1, _MAX_MESSAGES + 1):
        for roles in itertools.product(ROLES, repeat=n):
            if "system" not in roles[1:]:
                yield roles


def _render(template: str, tokens: dict, roles, gen: bool, pad: str = " ") -> str | None:
    messages = [{"role": r, "content": f"{pad}{_marker(i)}{pad}"} for i, r in enumerate(roles)]
    try:
        return ct.render_jinja(template, messages, gen, tokens)
    except WebinferError:
        return None
    except Exception:  # a template that fails on a probe (e.g. indexing a missing key) refuses that shape
        return None


def _split(text: str, n: int) -> tuple[list[str], list[bool]] | None:
    """The n + 1 texts around the markers, and whether each content kept its surrounding spaces."""
    pieces, kept, pos = [], [], 0
    for i in range(n):
        at = text.find(_marker(i), pos)
        if at < 0 or text.find(_marker(i), at + 1) >= 0:
            return None
        end = at + len(_marker(i))
        padded = text[at - 1:at] == " " and text[end:end + 1] == " "
        pieces.append(text[pos:at - 1] if padded else text[pos:at])
        kept.append(padded)
        pos = end + 1 if padded else end
    pieces.append(text[pos:])
    return pieces, kept


def derive(template: str, tokens: dict) -> dict | None:
    """The chat format of ``template`` (see llm/chat_template.py), or None when it cannot be expressed."""
    fmt: dict = {"start": {}, "between": {}, "end": {}, "end_generation": {}, "strip": []}
    seen: dict[str, str] = {}
    strip: dict[str, bool] = {}

    def record(table: dict, key: str, value: str) -> bool:
        if table.get(key, value) != value:
            return False
        table[key] = value
        return True

    for roles in _conversations():
        for gen in (False, True):
            text = _render(template, tokens, roles, gen)
            if text is None:
                continue
            split = _split(text, len(roles))
            if split is None:
                return None
            pieces, kept = split
            for role, k in zip(roles, kept):
                if strip.setdefault(role, not k) != (not k):
                    return None
            ok = record(fmt["start"], roles[0], pieces[0])
            for i in range(1, len(roles)):
                ok = ok and record(fmt["between"], f"{roles[i - 1]}>{roles[i]}", pieces[i])
            ok = ok and record(fmt["end_generation" if gen else "end"], roles[-1], pieces[-1])
            if not ok:
                return None
            seen[json.dumps([roles, gen])] = text
    if not seen:
        return None
    fmt["strip"] = sorted(r for r, s in strip.items() if s)
    for key, text in seen.items():  # the decomposition must give back every probe exactly
        roles, gen = json.loads(key)
        messages = [{"role": r, "content": f" {_marker(i)} "} for i, r in enumerate(roles)]
        try:
            if ct.render_format(fmt, messages, gen) != text:
                return None
        except WebinferError:
            return None
    return fmt


def with_chat_format(config_json: bytes) -> bytes:
    """tokenizer_config.json with the derived chat format added (unchanged when there is no template or it
    cannot be expressed)."""
    try:
        config = json.loads(config_json)
    except ValueError:
        return config_json
    template = ct.template_of(config) if isinstance(config, dict) else None
    if template is None:
        return config_json
    fmt = derive(template, ct.special_tokens(config))
    if fmt is None:
        return config_json
    config[ct.FORMAT_KEY] = fmt
    return json.dumps(config, ensure_ascii=False, indent=1).encode("utf-8")
