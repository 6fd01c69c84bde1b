"""Sin/Cos/Tan in Chromium (Tint on SwiftShader, whose built-in sin/cos are 1.9e-4 off): within a few ulp of
numpy's float64, as natively (tests/llm/test_swiftshader_numerics.py); the rotary tables of a decoder in the page
depend on it (the 1 B int4 page's first greedy id was a near tie that SwiftShader's sin/cos flipped)."""

from __future__ import annotations

import numpy as np
import pytest
from smoke_site import build_smoke_site, run_smoke_page
from trig_cases import check_trig, trig_inputs, trig_model

from webinfer.build import build

pytestmark = pytest.mark.browser


def test_sin_cos_tan_in_chromium(page, tmp_path, webinfer_wheel):
    art = str(tmp_path / "trig.wi")
    build(trig_model(), art)
    x = trig_inputs()
    feeds = [{"x": x}, {"x": np.array([np.nan, np.inf, -np.inf], np.float32)}]
    runs = run_smoke_page(page, build_smoke_site(art, str(tmp_path / "site"), feeds, wheel=webinfer_wheel))["runs"]
    check_trig(x, runs[0])
    assert all(np.isnan(runs[1][k]).all() for k in ("sin", "cos", "tan"))
