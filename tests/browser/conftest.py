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


@pytest.fixture(scope="session")
def demo_site(tmp_path_factory, webinfer_wheel):
    """The demo site, built once per test session (test_demos.py, test_cpu_path.py) (artifacts cached in build/artifacts), and its server."""
    from demos.site import build_site
    from webinfer.serve import serve_in_thread

    site = build_site(tmp_path_factory.mktemp("demo-site") / "site",  # (transcribe: test_transcribe_page.py
                      ["classify", "similarity", "chat", "detect", "removebg"], wheel=webinfer_wheel)  # builds its own)
    server, url = serve_in_thread(str(site))
    yield site, url
    server.shutdown()
    server.server_close()


TINY_MAX_SEQ = 1100


@pytest.fixture(scope="session")
def tiny_site(tmp_path_factory, webinfer_wheel):
    """A served site with two small pages: `model` (x[batch, 5] -> tanh(x @ w)) and `chat` (a tiny random Llama
    with SmolLM2's vocabulary and chat template, tests/tiny_llama.py). Yields paths and the URL."""
    import numpy as np
    import onnx
    import tiny_llama
    from onnx import TensorProto, helper, numpy_helper

    import webinfer
    from webinfer.bundle import bundle
    from webinfer.serve import serve_in_thread

    tmp = tmp_path_factory.mktemp("tiny-site")
    w = np.random.default_rng(5).standard_normal((5, 4)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Tanh", ["m"], ["y"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])], [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(tmp / "m.onnx"))
    chat_model = tiny_llama.tiny_llama(tiny_llama.TINY_CHAT)
    webinfer.build(str(tmp / "m.onnx"), str(tmp / "m.wi"))
    webinfer.build(str(chat_model / "model.onnx"), str(tmp / "chat.wi"), max_seq=TINY_MAX_SEQ)
    site = tmp / "site"
    bundle(str(tmp / "m.wi"), str(site), wheel=webinfer_wheel)
    bundle(str(tmp / "chat.wi"), str(site), demo="chat", wheel=webinfer_wheel)
    server, url = serve_in_thread(str(site))
    yield {"site": site, "url": url, "model": tmp / "m.wi", "chat": tmp / "chat.wi", "chat_model": chat_model, "w": w,
           "max_seq": TINY_MAX_SEQ}
    server.shutdown()
    server.server_close()
