"""One ONNX node test per implemented op, through the browser device in headless Chromium.

    pytest -m browser_conformance tests/browser/test_conformance_browser.py

A session fixture picks and natively checks one case per op (conformance_site.py), builds every artifact,
serves ONE site and loads Pyodide ONCE; the page runs every case on BrowserDevice and sends the raw outputs
back; each ``test_op_in_browser[Op]`` compares its op's outputs with the node test's ``.pb`` outputs
(dtype and shape equal, rtol 1e-3, atol 1e-5, NaN equal). Browser-only failures that are not fixed are
listed in browser_known_failures.tsv and run as strict xfails. An op with no native-passing case has
nothing to run in the browser: its test xfails with "no native-passing case" and the reasons.
"""

from __future__ import annotations

import json
import time
from urllib.parse import urlparse

import pytest
from conformance_site import build_site, compare, decode, read_known_failures, registered_ops

from webinfer.serve import serve_in_thread

pytestmark = pytest.mark.browser_conformance

OPS = registered_ops()
KNOWN = read_known_failures()


@pytest.fixture(scope="module")
def browser_run(browser, tmp_path_factory, webinfer_wheel):
    site = str(tmp_path_factory.mktemp("conformance-site"))
    cases, no_native, build_s = build_site(site, webinfer_wheel, OPS)
    server, url = serve_in_thread(site)
    page = browser.new_page()
    console, requests = [], []
    page.on("console", lambda m: console.append(f"[{m.type}] {m.text}"))
    page.on("pageerror", lambda e: console.append(f"[pageerror] {e}"))
    page.on("request", lambda r: requests.append(r.url))
    try:
        t0 = time.perf_counter()
        page.goto(url + "index.html")
        page.wait_for_selector("#results[data-done]", state="attached", timeout=240_000)
        page_s = time.perf_counter() - t0
        el = page.locator("#results")
        error = el.get_attribute("data-error")
        assert error is None, f"page failed: {error}\nconsole:\n" + "\n".join(console[-40:])
        result = json.loads(el.get_attribute("data-results"))
    finally:
        page.close()
        server.shutdown()
        server.server_close()
    hosts = {urlparse(u).hostname for u in requests if not u.startswith(("data:", "blob:"))}
    assert hosts == {"127.0.0.1"}, f"the page reached beyond 127.0.0.1: {sorted(set(requests))}"
    outcomes = {}
    for case in cases:
        got = result["cases"].get(case.name, {"error": "the page did not run it"})
        outcomes[case.op] = (case.name, got.get("error") or compare(
            case.expected, case.regroup([decode(o) for o in got["outputs"]])))
    return {"outcomes": outcomes, "no_native": no_native, "build_s": build_s, "page_s": page_s,
            "adapter": result["adapter"], "load_pyodide_ms": result["load_pyodide_ms"]}


def _param(op: str):
    if op in KNOWN:
        case, reason = KNOWN[op]
        return pytest.param(op, marks=pytest.mark.xfail(reason=f"{case}: {reason}", strict=True))
    return op


@pytest.mark.parametrize("op", [_param(op) for op in OPS])
def test_op_in_browser(browser_run, op):
    if op in browser_run["no_native"]:
        pytest.xfail(f"{op}: no native-passing case; tried " + "; ".join(browser_run["no_native"][op]))
    case, why = browser_run["outcomes"][op]
    if op in KNOWN:
        assert KNOWN[op][0] == case, f"{op}: the known failure names {KNOWN[op][0]}, the selected case is {case}"
    assert why is None, f"{op} ({case}) in Chromium: {why}"


def test_browser_summary(browser_run, capsys):
    """`browser node tests: P passed of N`, the ops without a native-passing case, and the timings."""
    outcomes, no_native = browser_run["outcomes"], browser_run["no_native"]
    passed = sorted(op for op, (_, why) in outcomes.items() if why is None)
    failed = {op: f"{case}: {why}" for op, (case, why) in outcomes.items() if why is not None}
    lines = [f"browser node tests: {len(passed)} passed of {len(outcomes)} "
             f"(adapter {browser_run['adapter']}; native selection+build {browser_run['build_s']:.1f} s, "
             f"page {browser_run['page_s']:.1f} s incl. Pyodide {browser_run['load_pyodide_ms'] / 1000:.1f} s)"]
    lines.append("  cases: " + " ".join(sorted(case for case, _ in outcomes.values())))
    lines += [f"  no native-passing case: {op}" for op in sorted(no_native)]
    lines += [f"  FAILED in browser: {op} {why}" for op, why in sorted(failed.items())]
    text = "\n".join(lines)
    with capsys.disabled():  # shown without -s
        print("\n" + text)
    unexpected = sorted(op for op in failed if op not in KNOWN)
    assert not unexpected, f"browser-only failures not in browser_known_failures.tsv: {unexpected}"
    assert set(outcomes) | set(no_native) == set(OPS)
