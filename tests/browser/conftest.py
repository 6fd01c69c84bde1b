"""Browser tests: headless Chromium from apt (/usr/bin/chromium; never `playwright install`), flags from
PLATFORM.md (WebGPU on SwiftShader, no background networking)."""

import os

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: run `make setup` (apt-get install chromium)")
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def webinfer_wheel(tmp_path_factory):
    """One browser wheel per test session (webinfer.web.browser_wheel)."""
    from webinfer.web import browser_wheel

    return browser_wheel(str(tmp_path_factory.mktemp("wheel")))
