"""Seeded mutations of an artifact folder for tests/runtime/test_fuzz_artifact.py (and tests/test_manifest.py).

Each mutator changes a fresh copy of a clean artifact in one way and returns a short description. Two families:
- *corruption* (``file-*``): bytes of a file change and nothing is re-signed, as when a download or a disk
  goes wrong: manifest.sha256 and the manifest's sha256 entries must catch it.
- *forged* (everything else): the manifest (and any file it describes) is changed and re-signed, as a buggy or
  hostile producer would write it: the schema (webinfer/manifest*.py) must refuse it, or it must run exactly.
  Forged values are chosen outside the field's domain (a wrong JSON type, a negative or past-the-end number, an
  undeclared name, an unknown key, an invalid path or shader): a value inside the domain (another valid index,
  a different uniform constant, another dtype) is a different program, not a corrupt one, and no validator can
  tell it from the real one; manifest.sha256 is what protects those from accidents.
"""

from __future__ import annotations

import hashlib
import json
import os
import random

POOL = [None, True, False, 1.5, -7, "", "zz", "../x", [], {}, [[]], {"k": 1}, 2**70, float("inf")]
INDEX_FIELDS = {"tensor", "reads", "writes", "weights", "alias", "shader"}
SIZE_FIELDS = {"bytes"}
EXPRESSION_KEYS = {"uniforms", "when"}  # program text: only their types are mutated


def sign_manifest(art: str, manifest: dict | None = None, text: bytes | None = None) -> None:
    """Write manifest.json (from ``manifest`` or raw ``text``) and a matching manifest.sha256."""
    data = text if text is not None else json.dumps(manifest, indent=1).encode()
    with open(os.path.join(art, "manifest.json"), "wb") as f:
        f.write(data)
    with open(os.path.join(art, "manifest.sha256"), "w") as f:
        f.write(f"{hashlib.sha256(data).hexdigest()}  manifest.json\n")


def load(art: str) -> dict:
    with open(os.path.join(art, "manifest.json")) as f:
        return json.load(f)


def rewrite_file(art: str, manifest: dict, entry: dict, data: bytes) -> None:
    """Replace a file the manifest names and re-sign its entry (forged)."""
    with open(os.path.join(art, entry["file"]), "wb") as f:
        f.write(data)
    entry["bytes"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()


def nodes(obj, path=()):
    """Every (path, value) in the JSON tree."""
    yield path, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from nodes(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from nodes(v, path + (i,))


def get(obj, path):
    for p in path:
        obj = obj[p]
    return obj


def put(obj, path, value) -> None:
    get(obj, path[:-1])[path[-1]] = value


def _field(path) -> str:
    """The name of the field a path ends in (the last string key)."""
    return next((p for p in reversed(path) if isinstance(p, str)), "")


def _in_expression(path) -> bool:
    """Inside program text (uniform values, conditions) or nested inside a dim expression."""
    if any(p in EXPRESSION_KEYS for p in path if isinstance(p, str)):
        return True
    for key in ("shape", "grid"):
        if key in path and len(path) - path.index(key) > 2:
            return True
    return False


def _files(art: str) -> list[str]:
    out = []
    for d, _, fs in os.walk(art):
        out += [os.path.relpath(os.path.join(d, f), art) for f in fs]
    return sorted(out)


# -- corruption: bytes change, nothing is re-signed ------------------------------------------------------

def file_flip(rng: random.Random, art: str) -> str:
    rel = rng.choice(_files(art))
    data = bytearray(open(os.path.join(art, rel), "rb").read())
    if not data:
        data = bytearray(b"\0")
    i = rng.randrange(len(data))
    data[i] ^= 1 << rng.randrange(8)
    open(os.path.join(art, rel), "wb").write(bytes(data))
    return f"{rel} byte {i} flipped"


def file_truncate(rng: random.Random, art: str) -> str:
    rel = rng.choice(_files(art))
    data = open(os.path.join(art, rel), "rb").read()
    n = rng.randrange(len(data)) if data else 0
    open(os.path.join(art, rel), "wb").write(data[:n])
    return f"{rel} truncated to {n}"


def file_extend(rng: random.Random, art: str) -> str:
    rel = rng.choice(_files(art))
    extra = bytes(rng.randrange(256) for _ in range(rng.choice([1, 3, 256])))
    with open(os.path.join(art, rel), "ab") as f:
        f.write(extra)
    return f"{rel} + {len(extra)} bytes"


def file_remove(rng: random.Random, art: str) -> str:
    rel = rng.choice(_files(art))
    os.remove(os.path.join(art, rel))
    if rng.random() < 0.3:
        os.mkdir(os.path.join(art, rel))  # a folder where the file was
        return f"{rel} replaced by a folder"
    return f"{rel} removed"


def file_link_out(rng: random.Random, art: str) -> str:
    """A file becomes a symbolic link to an identical copy outside the artifact."""
    rel = rng.choice(_files(art))
    outside = art.rstrip("/") + f".outside-{rng.randrange(10**9)}"
    os.replace(os.path.join(art, rel), outside)
    os.symlink(outside, os.path.join(art, rel))
    return f"{rel} -> link out of the artifact"


# -- forged: the manifest is changed and re-signed -----------------------------------------------------

def forged_type(rng: random.Random, art: str) -> str:
    m = load(art)
    path, old = rng.choice([(p, v) for p, v in nodes(m) if p])
    # inside program text an int (or a nested expression) is another valid expression: only non-dims go there
    dim_values = _in_expression(path) or (len(path) > 1 and path[-2] in ("shape", "grid"))
    new = rng.choice([v for v in POOL if _json_type(v) != _json_type(old)
                      and not (dim_values and type(v) is int and abs(v) < 2**53)])
    put(m, path, new)
    sign_manifest(art, m)
    return f"{_text(path)}: {_json_type(old)} -> {new!r}"


def forged_int(rng: random.Random, art: str) -> str:
    m = load(art)
    ints = [(p, v) for p, v in nodes(m) if p and type(v) is int and not _in_expression(p)]
    path, old = rng.choice(ints)
    field = _field(path)
    if field in INDEX_FIELDS:
        table = {"shader": len(m["shaders"])}.get(field, len(m["tensors"]))
        new = rng.choice([-1, table, table + 7, 2**32, 2**53 + 1])
    elif field in ("chunks", "bytes"):
        new = rng.choice([old + 1, old - 1, -1, 2**32 + old, 2**53 + 1])
    elif field in ("shape", "grid"):
        new = rng.choice([-1, 2**40, 2**53 + 1])
    else:
        new = rng.choice([-1, old + 1, 2**53 + 1])
    put(m, path, new)
    sign_manifest(art, m)
    return f"{_text(path)}: {old} -> {new}"


def forged_name(rng: random.Random, art: str) -> str:
    """A string that names something (dtype, kind, uniform type, condition, dim, file) becomes an unknown one."""
    m = load(art)
    strings = [(p, v) for p, v in nodes(m) if p and isinstance(v, str)
               and _field(p) in ("dtype", "kind", "shape", "grid", "dims", "file", "format", "uniforms", "when")]
    path, old = rng.choice(strings)
    new = rng.choice(["", "float128", "zz", old + "x", old.upper() if old.upper() != old else old + "_",
                      "shaders/../manifest.json", "/etc/passwd", "weights/..", "assets/x", "ü"])
    put(m, path, new)
    sign_manifest(art, m)
    return f"{_text(path)}: {old!r} -> {new!r}"


def forged_structure(rng: random.Random, art: str) -> str:
    """Delete or duplicate a list item, empty a list, add junk to a list, delete a key or add an unknown one."""
    m = load(art)
    path, node = rng.choice([(p, v) for p, v in nodes(m) if isinstance(v, (list, dict))])
    # a dim fewer or more is another valid shape, a term fewer another valid expression: junk only there
    if path and (path[-1] in ("shape", "capacity") or _in_expression(path)
                 or (len(path) > 1 and path[-2] in ("shape", "grid"))):
        node.append(rng.choice([v for v in POOL if type(v) is not int or abs(v) >= 2**53]))
        sign_manifest(art, m)
        return f"{_text(path)}: junk appended"
    if isinstance(node, dict):
        if node and rng.random() < 0.6:
            key = rng.choice(list(node))
            del node[key]
            what = f"key {key!r} deleted"
        else:
            node["unexpected"] = rng.choice(POOL)
            what = "unknown key added"
    else:
        op = rng.choice(["delete", "duplicate", "empty", "junk"] if node else ["junk"])
        if op == "delete":
            del node[rng.randrange(len(node))]
        elif op == "duplicate":
            i = rng.randrange(len(node))
            node.insert(i, json.loads(json.dumps(node[i])))
        elif op == "empty":
            node.clear()
        else:
            node.append(rng.choice(POOL))
        what = f"list {op}"
    sign_manifest(art, m)
    return f"{_text(path)}: {what}"


def forged_shader(rng: random.Random, art: str) -> str:
    """A shader made invalid (not UTF-8, not WGSL, bindings or uniforms changed), its hash re-signed."""
    m = load(art)
    entry = rng.choice(m["shaders"])
    src = open(os.path.join(art, entry["file"]), "rb").read()
    how = rng.choice(["utf8", "garbage", "binding", "uniform", "truncate", "empty"])
    if how == "utf8":
        i = rng.randrange(len(src))
        src = src[:i] + b"\xff\xfe" + src[i:]
    elif how == "garbage":
        i = src.rfind(b"}")
        src = src[:i] + b" let = ;\n" + src[i:]
    elif how == "binding":
        src = src.replace(b"var<storage, read>", b"var<storage, read_write>", 1) if b"read>" in src else src + b"@"
    elif how == "uniform":
        src = src.replace(b": u32,", b": i32,", 1) if b": u32," in src else src.replace(b"{", b"{{", 1)
    elif how == "truncate":
        src = src[: rng.randrange(len(src))]
    else:
        src = b""
    rewrite_file(art, m, entry, src)
    sign_manifest(art, m)
    return f"{entry['file']}: {how}"


def forged_shard(rng: random.Random, art: str) -> str:
    """A shard longer or shorter than its weights, re-signed."""
    m = load(art)
    entry = rng.choice(m["shards"])
    data = open(os.path.join(art, entry["file"]), "rb").read()
    n = rng.choice([0, max(len(data) - 4, 0), max(len(data) - 1, 0), len(data) + 4, len(data) + 256])
    data = (data + b"\0" * 512)[:n]
    rewrite_file(art, m, entry, data)
    sign_manifest(art, m)
    return f"{entry['file']}: {len(data)} bytes"


def forged_text(rng: random.Random, art: str) -> str:
    """manifest.json that is not a manifest's JSON (cut, nested, not UTF-8, non-finite numbers), re-signed."""
    text = open(os.path.join(art, "manifest.json"), "rb").read()
    how = rng.choice(["cut", "nested", "utf8", "nan", "bom", "array"])
    if how == "cut":
        text = text[: rng.randrange(len(text))]
    elif how == "nested":
        text = b"[" * 100000 + b"]" * 100000
    elif how == "utf8":
        text = text.replace(b'"producer": "', b'"producer": "\xff', 1)
    elif how == "nan":
        text = text.replace(b'"bytes": ', b'"bytes": NaN, "x": ', 1)
    elif how == "bom":
        text = b"\xef\xbb\xbf" + text
    else:
        text = b"[" + text + b"]"
    sign_manifest(art, text=text)
    return f"manifest.json {how}"


def _json_type(v) -> str:
    return "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else type(v).__name__


def _text(path) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


MUTATORS = {
    "file-flip": file_flip, "file-truncate": file_truncate, "file-extend": file_extend,
    "file-remove": file_remove, "file-link-out": file_link_out,
    "forged-type": forged_type, "forged-int": forged_int, "forged-name": forged_name,
    "forged-structure": forged_structure, "forged-shader": forged_shader, "forged-shard": forged_shard,
    "forged-text": forged_text,
}
