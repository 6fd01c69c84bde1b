"""A page on a device whose limits are too low for the model: one line saying which limit, before any weight
shard is fetched; with enough, the same page runs the model and equals onnxruntime."""

import json
from urllib.parse import urlparse

import numpy as np
import onnxruntime as ort
import pytest

from tests.runtime.test_memory_figures import mlp_model

NEED = 256 * 1024 * 4  # the model's largest weight: the binding size its programs require


@pytest.fixture(scope="module")
def mlp_site(tmp_path_factory, webinfer_wheel):
    from webinfer.build import build
    from webinfer.bundle import bundle
    from webinfer.serve import serve_in_thread

    tmp = tmp_path_factory.mktemp("limits")
    model = mlp_model()
    build(model, str(tmp / "mlp.wi"))
    bundle(str(tmp / "mlp.wi"), str(tmp / "site"), wheel=webinfer_wheel)
    server, url = serve_in_thread(str(tmp / "site"))
    yield url, model
    server.shutdown()
    server.server_close()


def _open(page, url):
    requests = []
    page.on("request", lambda r: requests.append(urlparse(r.url).path))
    page.goto(url)
    page.wait_for_selector("#result[data-done]", state="attached", timeout=120_000)
    return page.locator("#result"), requests


def test_too_small_a_binding_is_refused_before_any_shard(page, mlp_site):
    url, _ = mlp_site
    result, requests = _open(page, url + f"model/?path=gpu&limit=maxStorageBufferBindingSize:{NEED - 256}")
    err = result.get_attribute("data-error") or ""
    assert "no program of this artifact runs on this adapter" in err, err
    assert f"max-storage-buffer-binding-size {NEED} (device: {NEED - 256})" in err, err
    assert "\n" not in err
    assert any(p.endswith("/manifest.json") for p in requests)
    assert not [p for p in requests if "/weights/" in p], requests


def test_enough_binding_runs_and_equals_onnxruntime(page, mlp_site):
    url, model = mlp_site
    result, _ = _open(page, url + f"model/?path=gpu&limit=maxStorageBufferBindingSize:{NEED}")
    assert result.get_attribute("data-error") is None, result.get_attribute("data-error")
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": np.ones((1, 256), np.float32)})[0]
    got = json.loads(result.get_attribute("data-outputs"))["y"]
    assert got["shape"] == [1, 64]
    np.testing.assert_allclose(got["head"], want.ravel()[:len(got["head"])], rtol=1e-4, atol=1e-3)
