"""Two builds of the demo site measured in turns (old, new, new, old, ...), so that the machine's other load
falls on both alike: on a shared machine a wall-clock figure is not comparable with another taken minutes
apart, but the ratio of two visits taken back to back is. Prints, per demo, each site's median cold and warm
page-load-to-ready and CPU seconds, and the median and spread of the per-round new/old ratios.

    python -m demos.measure NEW_SITE --against OLD_SITE [--rounds 3] [--only similarity]
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

from demos.measure import PAGES, timeline_text, visit

ROOT = Path(__file__).resolve().parent.parent


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def paired(new_site: str, old_site: str, rounds: int = 3, only: list[str] | None = None, tokens: int = 8,
           timeline: bool = False) -> dict:
    """{demo: {"new": [visit rows], "old": [...]}}, each row {cold, warm} timings, visits taken in turns;
    ``timeline``: print each visit's phases too (demos.measure.timeline_text)."""
    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(ROOT / "tests" / "browser"))
    from conftest import CHROMIUM, CHROMIUM_ARGS

    from webinfer.serve import serve_in_thread

    servers = {name: serve_in_thread(site) for name, site in (("new", new_site), ("old", old_site))}
    names = [n for n in PAGES if not only or n in only]
    got: dict = {n: {"new": [], "old": []} for n in names}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for r in range(rounds):
                for name in names:
                    for which in (("old", "new") if r % 2 == 0 else ("new", "old")):
                        path, selector = PAGES[name]
                        context = browser.new_context()
                        page = context.new_page()
                        url = servers[which][1] + path.format(n=tokens)
                        cold, warm = visit(page, url, selector), visit(page, url, selector)
                        context.close()
                        got[name][which].append({"cold": cold["timings"], "warm": warm["timings"]})
                        print(f"round {r + 1} {name} {which}: cold {cold['timings']['ready_ms']} ms "
                              f"({cold['timings']['cpu_s']} CPU s), warm {warm['timings']['ready_ms']} ms "
                              f"({warm['timings']['cpu_s']} CPU s), load {os.getloadavg()[0]:.1f}", flush=True)
                        for when, v in (("cold", cold), ("warm", warm)) if timeline else ():
                            print(f"  {when}: {timeline_text(v['timings']) or '(no timeline)'}", flush=True)
            browser.close()
    finally:
        for server, _ in servers.values():
            server.shutdown()
    return got


def report(got: dict) -> None:
    print(f"\n{'demo':<11} {'visit':<5} {'figure':<9} {'old median':>11} {'new median':>11}  new/old per round: median "
          "(min-max)")
    for name, sites in got.items():
        for when in ("cold", "warm"):
            for key, label, scale in (("ready_ms", "ready s", 1000), ("cpu_s", "CPU s", 1)):
                old = [row[when][key] / scale for row in sites["old"]]
                new = [row[when][key] / scale for row in sites["new"]]
                ratios = [n / o for n, o in zip(new, old) if o]
                print(f"{name:<11} {when:<5} {label:<9} {statistics.median(old):>11.2f} {statistics.median(new):>11.2f}"
                      f"  {_spread(ratios) if ratios else '-'}")
