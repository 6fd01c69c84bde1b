"""The checked entry points of the format: a manifest's JSON to the typed :class:`Manifest` (every field, then
the rules across fields), and a shader's source against the step that dispatches it. Standard library only."""

from __future__ import annotations

from .checks import check_consistency, check_shader_bindings
from .fields import read_manifest
from .schema import Manifest, Step


def parse_manifest(obj, where: str) -> Manifest:
    """The typed manifest, or one WebinferError naming what is wrong (see format/schema.py's docstring)."""
    manifest = read_manifest(obj, where)
    check_consistency(manifest, where)
    return manifest


def check_step_shader(step: Step, source: str, where: str, textures: dict | None = None) -> None:
    """The shader's bindings are the step's (reads read-only, then writes read-write, then the uniform block;
    a read of one of the program's ``textures`` a texture of that format's texel type) and its ``Params``
    fields are the step's uniforms, by name and type, in order."""
    check_shader_bindings(step, source, where, textures or {})
