"""A faster way for wgpu-py's cffi to name C types (native only: imported by native.py, never in Pyodide).

wgpu-py builds every descriptor with ``ffi.new("WGPUXxxDescriptor *")``. cffi resolves each new type string
by parsing it with pycparser after a preamble that redeclares every typedef it knows (about 16,000 for
webgpu.h): 13 ms a type here, 45 types in a session's first run, 0.66 s of CPU in a cold start that should
take 3 s. Nearly all of them are a pointer to, or an array of, a declared name, a bare name (``intptr_t``) or
a callback's function type whose arguments are such names or pointers to them (``void(WGPUMapAsyncStatus,
WGPUStringView, void *, void *)``: 7 of these in a first run, 0.1 s); those are built here from cffi's own
declarations (the same model objects its parser would return). Anything else takes cffi's path.
"""

from __future__ import annotations

import re

_SIMPLE = re.compile(r"^\s*([A-Za-z_]\w*)\s*(\*|\[\s*\])\s*$")
_FUNCTION = re.compile(r"^\s*([A-Za-z_][\w\s*]*?)\s*\(([\w\s,*]*)\)\s*$")
_NAME = re.compile(r"^[A-Za-z_]\w*$")


def install(ffi) -> bool:
    """Give ``ffi``'s parser the fast path; False (and nothing changed) where cffi's internals differ."""
    try:
        from cffi import model

        parser = ffi._parser
        declarations = parser._declarations
        slow = parser.parse_type_and_quals
        primitives = model.PrimitiveType.ALL_PRIMITIVE_TYPES
        make_pointer = parser._get_type_pointer
    except (AttributeError, ImportError):
        return False
    if getattr(slow, "webinfer_fast", False):
        return True

    def named(name: str):
        """(type, quals) of a declared name, a primitive or void; None for anything else."""
        if ("typedef " + name) in declarations:
            return declarations["typedef " + name]
        if name in primitives:
            return model.PrimitiveType(name), 0
        return (model.void_type, 0) if name == "void" else None

    def declarator(text: str):
        """``NAME``, ``NAME *``, ``NAME const *``, ``const NAME *`` (any number of ``*``), else None."""
        words = text.replace("*", " * ").split()
        stars = len(words) - words.index("*") if "*" in words else 0
        head = words[:len(words) - stars]
        if any(w != "*" for w in words[len(words) - stars:]):
            return None
        const = "const" in head
        head = [w for w in head if w != "const"]
        if len(head) != 1 or not _NAME.match(head[0]):
            return None
        found = named(head[0])
        if found is None:
            return None
        item, quals = found[0], found[1] | (model.Q_CONST if const else 0)
        for _ in range(stars):
            item, quals = make_pointer(item, quals), 0
        return item, quals

    def function(result_text: str, args_text: str):
        result = declarator(result_text)
        texts = [a for a in (t.strip() for t in args_text.split(",")) if a]
        args = [declarator(t) for t in texts]
        if result is None or None in args:
            return None
        args = [parser._as_func_arg(*a) for a in args]
        if args == [model.void_type]:
            args = []
        return model.RawFunctionType(tuple(args), result[0], False, None), 0

    def parse_type_and_quals(cdecl: str):
        m = _SIMPLE.match(cdecl)
        if m is None:
            if _NAME.match(cdecl.strip()) and cdecl.strip() != "void":
                found = named(cdecl.strip())
            else:
                f = _FUNCTION.match(cdecl)
                found = function(*f.groups()) if f is not None else None
            return found if found is not None else slow(cdecl)
        name, suffix = m.groups()
        if ("typedef " + name) in declarations:
            item, quals = declarations["typedef " + name]
        elif name in primitives:
            item, quals = model.PrimitiveType(name), 0
        else:
            return slow(cdecl)
        if suffix == "*":
            return make_pointer(item, quals), 0
        return model.ArrayType(item, None), quals

    parse_type_and_quals.webinfer_fast = True
    parse_type_and_quals.slow = slow
    parser.parse_type_and_quals = parse_type_and_quals
    return True
