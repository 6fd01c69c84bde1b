"""A tied table at Qwen2.5's vocabulary (151,936 rows) with the binding limit lowered to 4 MiB, so its Gather and
tied head read it as parts (codegen/split.py), run in Chromium through the JS API: logits equal numpy's."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from webinfer.options import LIMITS

VOCAB, WIDTH = 151_936, 64


@pytest.fixture
def big_site(tmp_path, webinfer_wheel, monkeypatch):
    from webinfer.build import build
    from webinfer.bundle import bundle
    from webinfer.serve import serve_in_thread

    for tier in LIMITS.values():
        monkeypatch.setitem(tier, "max_binding_bytes", 4 * 1024 * 1024)
    table = np.random.default_rng(3).normal(size=(VOCAB, WIDTH)).astype(np.float32)
    nodes = [helper.make_node("Gather", ["table", "ids"], ["h"]),
             helper.make_node("Transpose", ["table"], ["tt"], perm=[1, 0]),
             helper.make_node("MatMul", ["h", "tt"], ["logits"])]
    g = helper.make_graph(nodes, "tied", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, "s"])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "s", VOCAB])],
                          [onnx.numpy_helper.from_array(table, "table")])
    build(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "t.wi"))
    bundle(str(tmp_path / "t.wi"), str(tmp_path / "site"), wheel=webinfer_wheel)
    server, url = serve_in_thread(str(tmp_path / "site"))
    yield url, table
    server.shutdown()
    server.server_close()


def test_tied_table_in_parts_in_the_page(page, big_site):
    url, table = big_site
    ids = [151_935, 0, 76_000, 17]
    page.goto(url)
    got = page.evaluate("""async (ids) => {
        const webinfer = await import("./assets/webinfer.mjs");
        const s = await webinfer.load("model/artifact/");
        const { logits } = await s.run({ ids: { data: ids, dims: [1, ids.length] } });
        return [Array.from(logits.dims), Array.from(logits.data)]; }""", ids)
    assert got[0] == [1, len(ids), VOCAB]
    want = table[ids].astype(np.float64) @ table.T.astype(np.float64)
    np.testing.assert_allclose(np.array(got[1]).reshape(len(ids), VOCAB), want, rtol=1e-4, atol=1e-3)
