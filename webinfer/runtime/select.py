"""Which of an artifact's programs a device runs: chosen at session start from the adapter's type, features and
limits. Standard library only (it runs in Pyodide too); webinfer/site/gpu_device.mjs ``chooseProgram`` applies the
same rule in the page, to upload only the chosen program's weights.

The rule, over the programs in the artifact's order of preference:
1. a program is *runnable* when the device has every feature it requires and at least its limits;
2. the first runnable program tuned for this adapter's type (``adapter_types``) wins;
3. else the first runnable one (a ``gpu`` program still runs correctly on a software adapter);
4. none runnable: a clear error naming what is missing.
A forced class (``kernel_class=``, ``webinfer run --class``, a page's ``?class=``) skips 2-3 but not 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import WebinferError
from ..format.schema import Manifest, Program

# Software rasterizers by the names adapters report (a browser may not flag its fallback adapter).
SOFTWARE_ADAPTERS = ("swiftshader", "llvmpipe", "lavapipe", "softpipe", "warp", "microsoft basic render")
# wgpu-native's adapter types -> ours.
_NATIVE_TYPES = {"cpu": "cpu", "integratedgpu": "integrated", "discretegpu": "discrete", "virtualgpu": "virtual"}


@dataclass
class AdapterFacts:
    """What selection looks at: the adapter's type, the device's features (WebGPU names) and limits."""

    type: str  # cpu | integrated | discrete | virtual | unknown
    name: str = "?"
    features: frozenset = field(default_factory=frozenset)
    limits: dict = field(default_factory=dict)


def adapter_type(reported: str | None, fallback: bool, text: str) -> str:
    """Our adapter type from what a platform reports: a native adapter type, a browser's fallback flag, and
    the adapter's names (vendor, architecture, device, description)."""
    if fallback or any(name in text.lower() for name in SOFTWARE_ADAPTERS):
        return "cpu"
    return _NATIVE_TYPES.get((reported or "").lower().replace("_", "").replace(" ", ""), "unknown")


@dataclass
class Choice:
    index: int
    kernel_class: str
    why: str


def _missing(program: Program, facts: AdapterFacts) -> list[str]:
    req = program.requires
    missing = [f"feature {f}" for f in req.features if f not in facts.features]
    for name, need in req.limits.items():
        have = facts.limits.get(name)
        if have is not None and have < need:
            missing.append(f"{name} {need} (device: {have})")
    return missing


def choose_program(manifest: Manifest, facts: AdapterFacts, forced: str | None = None) -> Choice:
    """The program to run (see the module's docstring) of the typed manifest (format/schema.py)."""
    programs = manifest.programs
    names = [p.kernel_class for p in programs]
    if forced:
        if forced not in names:
            raise WebinferError(f"kernel class {forced!r} is not in this artifact (it has: {', '.join(names)})")
        i = names.index(forced)
        missing = _missing(programs[i], facts)
        if missing:
            raise WebinferError(f"kernel class {forced!r} cannot run on {facts.name}: needs {', '.join(missing)}")
        return Choice(i, forced, f"forced (kernel class {forced!r}) on a {facts.type} adapter")
    runnable = [i for i, p in enumerate(programs) if not _missing(p, facts)]
    if not runnable:
        needs = "; ".join(f"{p.kernel_class} needs {', '.join(_missing(p, facts))}" for p in programs)
        raise WebinferError(f"no program of this artifact runs on {facts.name}: {needs}")
    for i in runnable:
        if facts.type in programs[i].adapter_types:
            return Choice(i, names[i], f"{facts.name} is a {facts.type} adapter; the {names[i]} class is built "
                                       f"for {'/'.join(programs[i].adapter_types)} adapters")
    i = runnable[0]
    skipped = [n for j, n in enumerate(names) if j not in runnable]
    why = f"no program is tuned for a {facts.type} adapter; {names[i]} runs on any"
    if skipped:
        why += f" ({', '.join(skipped)} cannot run here)"
    return Choice(i, names[i], why)
