"""runtime/cffi_types.py: the fast path names exactly the C types cffi's own parser would."""

import cffi
import pytest
from wgpu.backends import wgpu_native

from webinfer.runtime import cffi_types


def _type_strings(ffi) -> list[str]:
    """Every 20th typedef of webgpu.h (cffi's parser takes 13 ms a type) and a few primitives, in each form."""
    names = sorted(k.split(" ", 1)[1] for k in ffi._parser._declarations if k.startswith("typedef "))
    out = []
    for i, n in enumerate(names[::20] + ["char", "uint8_t", "uint32_t", "int32_t", "float", "size_t"]):
        out += [f"{n} *", f"{n}[]"] if i % 2 else [f"{n}*", f"{n} []"]
    return out


def test_fast_path_equals_cffi_parser():
    ffi = wgpu_native.ffi
    assert cffi_types.install(ffi)
    fast = ffi._parser.parse_type_and_quals
    strings = _type_strings(ffi)
    assert len(strings) > 40  # webgpu.h's typedefs were found
    for s in strings:
        assert fast(s) == fast.slow(s), s


def test_other_forms_take_cffi_path():
    ffi = wgpu_native.ffi
    cffi_types.install(ffi)
    fast = ffi._parser.parse_type_and_quals
    for s in ["intptr_t", "WGPUBufferDescriptor * *", "void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)",
              "uint8_t[4]"]:
        assert fast(s) == fast.slow(s), s
    with pytest.raises(cffi.CDefError):  # an unknown name is refused as cffi refuses it
        ffi.new("NoSuchType *")


def test_bare_names_and_callbacks_take_the_fast_path():
    """The forms a first run names besides pointers: bare primitives and wgpu-py's callback signatures (each
    equal to cffi's own parse), read without cffi's parser."""
    ffi = wgpu_native.ffi
    cffi_types.install(ffi)
    fast = ffi._parser.parse_type_and_quals
    forms = ["uintptr_t", "intptr_t", "WGPUBufferUsage",
             "void(WGPURequestAdapterStatus, WGPUAdapter, WGPUStringView, void *, void *)",
             "void(WGPUDevice const *, WGPUDeviceLostReason, WGPUStringView, void *, void *)",
             "void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)", "int(void)", "void *(size_t, const char *)"]
    parser = ffi._parser
    want = [fast.slow(s) for s in forms]
    parsed = []
    parser._parse = lambda csource, _real=parser._parse: parsed.append(csource) or _real(csource)
    try:
        got = [fast(s) for s in forms]
    finally:
        del parser._parse  # (back to the class's method)
    assert got == want and parsed == []  # equal, and pycparser never ran
    for s in ["void(int, ...)", "WGPUBufferDescriptor * const *"]:  # (other forms: cffi's path, same answers)
        assert fast(s) == fast.slow(s), s
