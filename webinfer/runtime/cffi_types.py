"""A faster way for wgpu-py's cffi to name C types (native only: imported by native.py, never in Pyodide).

wgpu-py builds every descriptor with ``ffi.new("WGPUXxxDescriptor *")``. cffi resolves each new type string
by parsing it with pycparser after a preamble that redeclares every typedef it knows (about 16,000 for
webgpu.h): 13 ms a type here, 45 types in a session's first run, 0.66 s of CPU in a cold start that should
take 3 s. Nearly all of them are a pointer to, or an array of, a declared name; those are built here from
cffi's own declarations (the same model objects its parser would return). Anything else takes cffi's path.
"""

from __future__ import annotations

import re

_SIMPLE = re.compile(r"^\s*([A-Za-z_]\w*)\s*(\*|\[\s*\])\s*$")


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

    def parse_type_and_quals(cdecl: str):
        m = _SIMPLE.match(cdecl)
        if m is None:
            return slow(cdecl)
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
