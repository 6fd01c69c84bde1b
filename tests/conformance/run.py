"""ONNX node-test conformance sweep: every case that onnx 1.22.0 ships on disk, through webinfer.

    python -m tests.conformance.run [--update] [--jobs N] [--filter SUBSTR] [--timeout S] [--out FILE]

Each case (``onnx/backend/test/data/node/<case>/model.onnx`` + ``test_data_set_*/{input,output}_N.pb``)
runs through ``webinfer.backend.WebinferRep(model).run(inputs)`` in a pool of worker processes, one case
at a time per worker with a wall-clock limit, so one hang or crash costs one case, not the sweep.

A case passes when, for every data set, every output matches the stored one like onnxruntime's backend
test runner does it (same dtype, same shape, ``rtol 1e-3, atol 1e-5``, NaNs equal), AND the data ran on
the GPU. The placement rule: a node computed from graph input *values* (not only their shapes) that
webinfer evaluated on the host ('host' or 'folded' in ``rep.placement``) may only produce integer (or bool)
tensors of at most 64 elements, i.e. shape arithmetic. Anything else on the host is a placement failure
even when the numbers match (e.g. ``Range`` on float graph inputs, which the backend bakes in as
constants, folded at build time). Loading a case, the comparison and the placement rule live in
``cases.py`` (the browser conformance site judges its cases with them too); this module is the sweep.

``expected.tsv`` (checked in) holds one line per case: ``case, status, category, reason``. ``category``
says why a failing case fails: a permanent reason (``dtype-string``, ``dtype-complex``, ``map-or-sparse``,
``training``, ``random``), found by looking at the model, or
``todo`` when nothing in the model rules webinfer out. ``test_node_tests.py`` fails when a case listed as
``pass`` no longer passes (a ratchet: the pass list can only grow; ``--update`` rewrites the file).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path

from .cases import run_case
from .categories import NODE_DIR, case_info, family_of

EXPECTED = Path(__file__).with_name("expected.tsv")
CASE_TIMEOUT = 60.0
RECYCLE_AFTER = 200  # cases per worker before it is replaced (bounds memory held by dead sessions)
TOTAL = 1765  # cases in the onnx 1.22.0 wheel


@dataclass
class Result:
    case: str
    status: str  # "pass" | "fail"
    reason: str = ""
    category: str = ""
    seconds: float = 0.0
    op: str = ""


# -- the worker pool ---------------------------------------------------------------------------------
def _worker(conn, quiet: bool, target: str) -> None:
    if quiet:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:  # pay the imports and the device creation before the first case's clock starts
        import webinfer.backend  # noqa: F401
        from webinfer.runtime.native import request_device

        request_device()
    except Exception:  # noqa: BLE001 - the cases will report it
        pass
    conn.send(("ready",))
    while True:
        try:
            case = conn.recv()
        except EOFError:
            return
        if case is None:
            return
        t0 = time.perf_counter()
        status, reason = run_case(case, target)
        conn.send(("result", status, reason, time.perf_counter() - t0))


class _Slot:
    """One worker process; ``case`` is the case it is running (its clock starts when it is handed over)."""

    START_LIMIT = 180.0  # seconds a new worker may take to import and open the device

    def __init__(self, ctx, quiet: bool, target: str):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, quiet, target), daemon=True)
        self.proc.start()
        child.close()
        self.ready = False
        self.case: str | None = None
        self.started = time.perf_counter()
        self.done = 0

    def give(self, case: str) -> None:
        self.case, self.started = case, time.perf_counter()
        self.conn.send(case)

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.proc.join(5)
        self.kill()


def sweep(cases: list[str], jobs: int = 2, timeout: float = CASE_TIMEOUT, quiet: bool = True,
          progress=None, target: str = "software") -> dict[str, Result]:
    """Run ``cases`` in ``jobs`` worker processes, each case under a wall-clock limit.

    A case that hangs is killed at ``timeout`` and its worker replaced; a worker that dies takes only
    its current case with it. Workers are also replaced every ``RECYCLE_AFTER`` cases."""
    ctx = mp.get_context("spawn")
    todo = list(reversed(cases))
    results: dict[str, Result] = {}
    slots = [_Slot(ctx, quiet, target) for _ in range(max(1, min(jobs, len(cases))))]
    failed_starts = 0

    def finish(slot: _Slot, status: str, reason: str, seconds: float) -> None:
        results[slot.case] = Result(slot.case, status, reason, seconds=seconds)
        if progress:
            progress(results[slot.case], len(results), len(cases))
        slot.case = None

    try:
        while todo or any(s.case for s in slots):
            now = time.perf_counter()
            limits = [s.started + (timeout if s.case else _Slot.START_LIMIT) - now for s in slots]
            ready = wait([s.conn for s in slots] + [s.proc.sentinel for s in slots],
                         timeout=max(0.0, min(limits)))
            for i, s in enumerate(slots):
                replace = False
                if s.conn in ready:
                    try:
                        msg = s.conn.recv()
                    except (EOFError, OSError):
                        msg = None
                    if msg is None:
                        s.proc.join(1)
                        if s.case:
                            finish(s, "fail", f"crash: worker exited with code {s.proc.exitcode}",
                                   time.perf_counter() - s.started)
                        else:
                            failed_starts += 1
                        replace = True
                    elif msg[0] == "ready":
                        s.ready = True
                    else:
                        _, status, reason, seconds = msg
                        finish(s, status, reason, seconds)
                        s.done += 1
                        replace = s.done >= RECYCLE_AFTER
                elif s.proc.sentinel in ready:
                    if s.case:
                        finish(s, "fail", f"crash: worker exited with code {s.proc.exitcode}",
                               time.perf_counter() - s.started)
                    else:
                        failed_starts += 1
                    replace = True
                elif s.case and time.perf_counter() - s.started > timeout:
                    finish(s, "fail", f"timeout: over {timeout:g} s", timeout)
                    replace = True
                elif not s.ready and time.perf_counter() - s.started > _Slot.START_LIMIT:
                    failed_starts += 1
                    replace = True
                if failed_starts > 3:
                    raise RuntimeError("conformance workers fail to start (try --show-stderr)")
                if replace:
                    s.stop() if (s.proc.is_alive() and not s.case and s.ready) else s.kill()
                    slots[i] = s = _Slot(ctx, quiet, target)
                if s.ready and not s.case and todo:
                    s.give(todo.pop())
    finally:
        for s in slots:
            s.kill()
    return results


# -- files and summaries -----------------------------------------------------------------------------
def all_cases() -> list[str]:
    return sorted(p.name for p in NODE_DIR.iterdir() if (p / "model.onnx").is_file())


def read_expected(path: Path = EXPECTED) -> dict[str, Result]:
    out = {}
    if not path.is_file():
        return out
    for line in path.read_text().splitlines():
        if not line or line.startswith("#") or line.startswith("case\t"):
            continue
        parts = line.split("\t") + ["", "", ""]
        out[parts[0]] = Result(parts[0], parts[1], parts[3], parts[2])
    return out


def write_expected(results: dict[str, Result], path: Path = EXPECTED) -> None:
    lines = ["case\tstatus\tcategory\treason"]
    for case in sorted(results):
        r = results[case]
        lines.append(f"{case}\t{r.status}\t{r.category if r.status != 'pass' else ''}\t{r.reason}")
    path.write_text("\n".join(lines) + "\n")


def summarize(results: dict[str, Result], total: int = TOTAL) -> list[str]:
    passed = sum(r.status == "pass" for r in results.values())
    lines = [f"node tests: {passed} passed of {total}"]
    by_family: dict[str, Counter] = {}
    by_op: dict[str, Counter] = {}
    unsupported = Counter()
    for r in results.values():
        op = r.op or "?"
        by_op.setdefault(op, Counter())[r.status] += 1
        by_family.setdefault(family_of(op), Counter())[r.status] += 1
        m = re.match(r"unsupported op (\S+)", r.reason)
        if r.status == "fail" and r.category == "todo" and m:
            unsupported[m.group(1)] += 1
    lines.append("by family (pass/total): " + ", ".join(
        f"{f} {c['pass']}/{sum(c.values())}" for f, c in sorted(by_family.items())))
    lines.append("by op (pass/total):")
    ops = sorted(by_op.items())
    for i in range(0, len(ops), 6):
        lines.append("  " + "  ".join(f"{op} {c['pass']}/{sum(c.values())}" for op, c in ops[i:i + 6]))
    cats = Counter(r.category for r in results.values() if r.status == "fail")
    lines.append("failures by category: " + ", ".join(f"{k} {v}" for k, v in cats.most_common()))
    reasons = Counter(re.sub(r"[-\d.e]+", "N", r.reason) if r.reason.startswith("mismatch") else r.reason
                      for r in results.values() if r.status == "fail" and r.category == "todo")
    lines.append("top unsupported ops (failing 'todo' cases): " + ", ".join(
        f"{op} {n}" for op, n in unsupported.most_common(25)))
    lines.append("top reasons of 'todo' failures:")
    lines += [f"  {n:4d}  {why}" for why, n in reasons.most_common(15)]
    return lines


def annotate(results: dict[str, Result]) -> None:
    """Fill ``category`` and the main op of each result (in the parent, from the model files)."""
    for r in results.values():
        op, cat = case_info(r.case)
        r.op = op
        r.category = cat if r.status != "pass" else ""


def run_sweep(cases: list[str], jobs: int, timeout: float, quiet: bool = True, verbose: bool = False,
              target: str = "software"):
    def progress(r: Result, n: int, total: int):
        if verbose or (r.status == "fail" and r.reason.startswith(("timeout", "crash"))):
            print(f"[{n}/{total}] {r.case}: {r.status} {r.reason} ({r.seconds:.1f} s)", flush=True)
        elif n % 100 == 0:
            print(f"[{n}/{total}] ...", flush=True)

    t0 = time.perf_counter()
    results = sweep(cases, jobs=jobs, timeout=timeout, quiet=quiet, progress=progress, target=target)
    annotate(results)
    return results, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.conformance.run", description=__doc__.splitlines()[0])
    ap.add_argument("--update", action="store_true", help="rewrite expected.tsv from this run (full sweep only)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="worker processes")
    ap.add_argument("--filter", default="", help="only cases whose name contains this")
    ap.add_argument("--timeout", type=float, default=CASE_TIMEOUT, help="seconds per case")
    ap.add_argument("--out", help="also write this run's results (same format as expected.tsv) here")
    ap.add_argument("--target", default="software", choices=["software", "gpu"],
                    help="the kernel class the cases are built for")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case")
    ap.add_argument("--show-stderr", action="store_true", help="keep the workers' stdout/stderr")
    args = ap.parse_args(argv)
    os.environ.setdefault("XDG_RUNTIME_DIR", __import__("tempfile").mkdtemp(prefix="xdg-"))
    cases = [c for c in all_cases() if args.filter in c]
    results, seconds = run_sweep(cases, args.jobs, args.timeout, quiet=not args.show_stderr, verbose=args.verbose,
                                 target=args.target)
    total = TOTAL if not args.filter else len(cases)
    for line in summarize(results, total):
        print(line)
    print(f"sweep: {len(cases)} cases in {seconds:.0f} s with {args.jobs} workers")
    if args.out:
        write_expected(results, Path(args.out))
    expected = read_expected()
    lost = sorted(c for c, r in results.items() if expected.get(c) and expected[c].status == "pass"
                  and r.status != "pass")
    gained = sorted(c for c, r in results.items() if r.status == "pass"
                    and (c not in expected or expected[c].status != "pass"))
    if gained:
        print(f"newly passing ({len(gained)}): {' '.join(gained[:40])}{' ...' if len(gained) > 40 else ''}")
    if lost:
        print(f"REGRESSIONS ({len(lost)}):")
        for c in lost:
            print(f"  {c}: {results[c].reason}")
    if args.update:
        if args.filter:
            merged = dict(expected)
            merged.update(results)
            write_expected(merged)
        else:
            write_expected(results)
        print(f"wrote {EXPECTED}")
    return 1 if lost and not args.update else 0


if __name__ == "__main__":
    sys.exit(main())
