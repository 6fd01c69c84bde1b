"""A model's own chat template (``chat_template`` in tokenizer_config.json), rendered two ways.

- Natively, with jinja2's sandbox, set up as transformers' ``apply_chat_template`` does (trim_blocks,
  lstrip_blocks, loop controls, ``raise_exception``, ``strftime_now``, the special tokens as variables), so
  the text is the one transformers gives. jinja2 is imported only when a template is rendered: it is not
  required by the rest of the runtime.
- Without jinja2 (the browser: Pyodide has no wheels offline), from a *chat format* the build derived from
  the template (graph/llm/chat_format.py) and stored beside it in the artifact's tokenizer_config.json
  (``webinfer_chat_format``): the text before the first message by its role, between two messages by their
  roles, and after the last one (with and without the generation prompt), plus whether contents are
  stripped. The build checks this decomposition against jinja2 on probe conversations; a template it
  cannot express (contents moved between messages, counters...) gets no format, and rendering it without
  jinja2 is refused with a clear error rather than rendered wrongly.

Standard library only (the jinja2 import is lazy and optional).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

from ..errors import WebinferError

FORMAT_KEY = "webinfer_chat_format"
_SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")


def template_of(config: Mapping) -> str | None:
    """The config's chat template (a string, or the ``default`` of a list of named templates)."""
    template = config.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, Mapping)}
        template = named.get("default")
    return template if isinstance(template, str) else None


def special_tokens(config: Mapping) -> dict[str, str]:
    out = {}
    for key in _SPECIAL_TOKENS:
        value = config.get(key)
        if isinstance(value, Mapping):
            value = value.get("content")
        if isinstance(value, str):
            out[key] = value
    return out


def jinja_available() -> bool:
    try:
        import jinja2  # noqa: F401
    except ImportError:
        return False
    return True


def render_jinja(template: str, messages: Sequence[Mapping], add_generation_prompt: bool,
                 tokens: Mapping[str, str], tools: Sequence[Mapping] | None = None) -> str:
    """Render with jinja2's immutable sandbox, as transformers does (``tools``: OpenAI tool definitions, for
    templates that offer them)."""
    from jinja2.exceptions import TemplateError

    extra = {"tools": list(tools)} if tools else {}
    try:
        compiled = _compile(template)
        return compiled.render(messages=list(messages), add_generation_prompt=add_generation_prompt, **tokens,
                               **extra)
    except TemplateError as e:
        raise WebinferError(f"the model's chat template refused the conversation: {e}") from None


@functools.lru_cache(maxsize=8)
def _compile(template: str):
    from datetime import datetime

    from jinja2.exceptions import TemplateError
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(template)


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False) -> str:
    import json

    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def render_format(fmt: Mapping, messages: Sequence[Mapping], add_generation_prompt: bool) -> str:
    """Render from a precomputed chat format (see the module docstring)."""
    if not messages:
        raise WebinferError("the conversation is empty")
    roles = [m.get("role") for m in messages]
    parts = []
    for i, (m, role) in enumerate(zip(messages, roles)):
        if i == 0:
            piece = fmt["start"].get(role)
        else:
            piece = fmt["between"].get(f"{roles[i - 1]}>{role}")
        if piece is None:
            raise WebinferError(f"the model's chat template does not accept a {role!r} message here "
                                f"(after {roles[i - 1]!r})" if i else
                                f"the model's chat template does not accept a conversation starting with {role!r}")
        content = m.get("content")
        if not isinstance(content, str):
            raise WebinferError("message contents must be strings")
        parts += [piece, content.strip() if role in fmt.get("strip", ()) else content]
    end = fmt["end_generation" if add_generation_prompt else "end"].get(roles[-1])
    if end is None:
        raise WebinferError(f"the model's chat template does not accept a conversation ending with {roles[-1]!r}")
    parts.append(end)
    return "".join(parts)


def render(config: Mapping, messages: Sequence[Mapping], add_generation_prompt: bool = True,
           use_jinja: bool | None = None) -> str | None:
    """The model's chat template applied to ``messages``; None when the config has no template.

    ``use_jinja`` None: jinja2 when it is installed, else the precomputed format."""
    template = template_of(config)
    if template is None:
        return None
    if use_jinja is None:
        use_jinja = jinja_available()
    if use_jinja:
        return render_jinja(template, messages, add_generation_prompt, special_tokens(config))
    fmt = config.get(FORMAT_KEY)
    if not isinstance(fmt, Mapping):
        raise WebinferError("this model's chat template needs jinja2, which is not available here (its shape could "
                            "not be precomputed at build time); format the prompt yourself")
    return render_format(fmt, messages, add_generation_prompt)


__all__ = ["render", "render_jinja", "render_format", "template_of", "special_tokens", "FORMAT_KEY"]
