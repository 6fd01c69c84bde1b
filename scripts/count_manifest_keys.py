"""Count string-keyed manifest lookups on the run side (issue 36): ``x["key"]`` and ``x.get("key")`` where
``key`` is a field of the manifest's JSON (format/schema.py's dataclasses and blocks), leaving out the modules
that read other JSON (tokenizer.json, OpenAI requests, JSON Schema) and the dicts a module makes itself (a
best effort by name: ``-v`` lists every hit for review).

  python scripts/count_manifest_keys.py [-v] [--root CHECKOUT]   (the keys are this checkout's schema's)
"""

from __future__ import annotations

import ast
import dataclasses
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
# Modules that read no manifest: their string keys belong to other JSON.
OTHER_JSON = ("webinfer/llm/tokenizers/", "webinfer/llm/constrain/", "webinfer/llm/wordpiece.py",
              "webinfer/llm/api_request.py", "webinfer/llm/chat_completion.py", "webinfer/llm/tool_calls.py",
              "webinfer/llm/__init__.py", "webinfer/page_cpu.py")
# (module, variable): dicts the module builds itself (a report, a state layout, a result), not the manifest's.
OWN_DICTS = {("webinfer/report.py", "report"), ("webinfer/report.py", "p"), ("webinfer/llm/prefix_cache.py", "s"),
             ("webinfer/llm/prefix_cache.py", "ident"), ("webinfer/page.py", "out")}
RUN_SIDE = ("webinfer/runtime", "webinfer/llm", "webinfer/tasks", "webinfer/page.py", "webinfer/page_cpu.py",
            "webinfer/page_recover.py", "webinfer/report.py", "webinfer/inspect.py", "webinfer/artifact.py")


def manifest_keys() -> set[str]:
    from webinfer.format import schema
    from webinfer.format.audio import _AUDIO
    from webinfer.format.vision_fields import _CLASSIFY, _DETECT, _PREPROCESS, _SEGMENT

    keys = {"class", "program", "program_index"}
    for obj in vars(schema).values():
        if isinstance(obj, type) and dataclasses.is_dataclass(obj):
            keys |= {f.name for f in dataclasses.fields(obj)}
    keys |= set(_AUDIO) | set(_CLASSIFY) | set(_DETECT) | set(_PREPROCESS) | set(_SEGMENT)
    keys |= {"encoder", "cross", "source_dim", "encoder_inputs", "first_tokens", "eos", "model_type"}
    keys -= {"name"}  # too common outside the manifest (a tensor's name in feeds, results)
    return keys


def hits(path: str, keys: set[str]):
    tree = ast.parse(open(path).read(), path)
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant)):
            key = node.args[0].value
        if isinstance(key, str) and key in keys:
            target = node.value if isinstance(node, ast.Subscript) else node.func.value
            yield node.lineno, key, _root(target), ast.unparse(node)[:90]


def _root(node) -> str:
    """The variable a lookup starts from (``m`` of ``m["a"]["b"]``, ``self`` of ``self.x["a"]``)."""
    while isinstance(node, (ast.Subscript, ast.Attribute, ast.Call)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else ""


def files(root: str):
    for top in RUN_SIDE:
        full = os.path.join(root, top)
        if os.path.isfile(full):
            yield full
        for d, _, names in os.walk(full):
            yield from (os.path.join(d, n) for n in sorted(names) if n.endswith(".py"))


def main() -> None:
    root = sys.argv[sys.argv.index("--root") + 1] if "--root" in sys.argv else ROOT
    keys, total, per = manifest_keys(), 0, {}
    for path in files(root):
        rel = os.path.relpath(path, root)
        if rel.startswith(OTHER_JSON):
            continue
        found = [h for h in hits(path, keys) if (rel, h[2]) not in OWN_DICTS]
        if found:
            per[rel] = len(found)
            total += len(found)
        if "-v" in sys.argv:
            for line, key, _, text in found:
                print(f"{rel}:{line}: {key}: {text}")
    for rel, n in sorted(per.items(), key=lambda kv: -kv[1]):
        print(f"{n:4d} {rel}")
    print(f"{total} string-keyed manifest lookups on the run side")


if __name__ == "__main__":
    main()
