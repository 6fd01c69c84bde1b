"""The site's Pyodide memory snapshot (webinfer/pyodide_snapshot.py, site/pyodide_boot.mjs): made with Node at
bundle time, restored in Chromium into a working interpreter whose state visits do not share (reseeded
`random`) and whose environment equals a plain boot's; a snapshot that is missing, altered, or from another
Pyodide build gives a plain boot and one console line, never a wrong interpreter."""

from __future__ import annotations

import gzip
import hashlib
import json

import pytest

pytestmark = pytest.mark.browser

# boots Pyodide through pyodide_boot.mjs with site.json's snapshot entry replaced by `entry` ("site": as built)
_BOOT = """async ([entry]) => {
  const site = await (await fetch("/site.json")).json();
  const { bootPyodide } = await import("/assets/pyodide_boot.mjs");
  const base = new URL(site.pyodide, location.href).href;
  const { pyodide, snapshot } = await bootPyodide(base, entry === "site" ? site.pyodide_snapshot : entry,
                                                  new URL("/", location.href));
  const facts = pyodide.runPython(`import hashlib, json, os, random, sys
json.dumps({"sha": hashlib.sha256(b"webinfer snapshot").hexdigest(), "random": random.random(),
            "version": list(sys.version_info[:2]), "env": dict(os.environ), "executable": sys.executable,
            "path": sys.path})`);
  return { snapshot, ...JSON.parse(facts) };
}"""


def _boot(page, url, entry):
    lines = []
    page.on("console", lambda m: lines.append(m.text) if "webinfer:" in m.text else None)
    page.goto(url)
    got = page.evaluate(_BOOT, [entry])
    return got, lines


def _check_python(got):
    assert got["sha"] == hashlib.sha256(b"webinfer snapshot").hexdigest()
    assert got["version"][0] == 3 and got["version"] >= [3, 12]


def test_the_snapshot_is_restored_and_reseeded(tiny_site, browser):
    entry = json.loads((tiny_site["site"] / "site.json").read_text()).get("pyodide_snapshot")
    assert entry, "the site has no Pyodide snapshot (is `node` on PATH?)"
    data = (tiny_site["site"] / entry["path"]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == entry["sha256"] and len(data) == entry["bytes"]
    runs = []
    for _ in range(2):
        page = browser.new_page()
        got, lines = _boot(page, tiny_site["url"], "site")
        page.close()
        assert got["snapshot"] is True and lines == [], lines
        _check_python(got)
        runs.append(got)
    assert runs[0]["random"] != runs[1]["random"]  # (restored as made, both would draw the same number)
    page = browser.new_page()
    plain, lines = _boot(page, tiny_site["url"], None)
    page.close()
    assert plain["snapshot"] is False and any("no Pyodide snapshot" in line for line in lines), lines
    _check_python(plain)
    for what in ("env", "executable", "path"):
        assert runs[0][what] == plain[what], what


def test_a_bad_snapshot_gives_a_plain_boot_and_one_line(tiny_site, browser):
    site = tiny_site["site"]
    entry = json.loads((site / "site.json").read_text())["pyodide_snapshot"]
    raw = bytearray(gzip.decompress((site / entry["path"]).read_bytes()))
    raw[16:48] = bytes(32)  # the build id Pyodide checks (header: magic, offsets, then the id)
    foreign = gzip.compress(bytes(raw), mtime=0)
    (site / "pyodide" / "foreign.bin.gz").write_bytes(foreign)
    cases = [({**entry, "sha256": "0" * 64}, "does not match site.json"),
             ({**entry, "path": "pyodide/missing.bin.gz"}, "HTTP 404"),
             ({"path": "pyodide/foreign.bin.gz", "sha256": hashlib.sha256(foreign).hexdigest()}, "build id")]
    for bad, why in cases:
        page = browser.new_page()
        got, lines = _boot(page, tiny_site["url"], bad)
        page.close()
        assert got["snapshot"] is False, (bad, got)
        assert len(lines) == 1 and "Pyodide snapshot not used" in lines[0] and why in lines[0], lines
        _check_python(got)


def test_no_node_means_no_snapshot_and_a_note(tmp_path, monkeypatch, capsys, webinfer_wheel):
    from webinfer import pyodide_snapshot
    from webinfer.web import pyodide_dir

    pyodide = pyodide_dir()  # (before the cache moves)
    (tmp_path / "pyodide").mkdir()
    (tmp_path / "pyodide" / pyodide_snapshot.SNAPSHOT_FILE).write_bytes(b"stale")
    monkeypatch.setattr(pyodide_snapshot.shutil, "which", lambda name: None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    site = {"pyodide_snapshot": {"path": "stale"}}
    pyodide_snapshot.add_to_site(site, pyodide, webinfer_wheel, str(tmp_path))
    assert "pyodide_snapshot" not in site
    assert not (tmp_path / "pyodide" / pyodide_snapshot.SNAPSHOT_FILE).exists()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no Pyodide snapshot" in err and "node" in err, err
