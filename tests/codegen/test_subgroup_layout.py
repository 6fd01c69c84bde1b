"""software-subgroups' matmul shares loads only in a subgroup laid out as it expects (2 x 4 tiles: each quad on
one row of tiles, lanes l and l ^ 4 on one column); any other layout must take the plain loop. WGSL does not
promise a layout, and lavapipe always gives the expected one to the 4-wide workgroups the lowering dispatches,
so here the built shader runs with other workgroup aspects (its width `wx` is a uniform): 8 wide (lane pairs
on two columns) and 2 wide (quads on two rows). Reference: numpy."""

import re

import numpy as np
import pytest
from onnx import TensorProto, helper

import webinfer
from webinfer.options import BuildOptions
from webinfer.runtime.native import NativeDevice
from webinfer.runtime.session import run_sync


def _matmul_shader(tmp_path, tiles: str, k: int, n: int) -> str:
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "mm",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [70, k]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, [k, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [70, n])])
    out = tmp_path / tiles
    m = webinfer.build(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), str(out),
                       target=BuildOptions(target="software-subgroups", tiles=tiles))
    (step,) = m["programs"][0]["steps"]
    wgsl = (out / m["shaders"][step["shader"]]["file"]).read_text()
    assert "quadBroadcast" in wgsl and "subgroupShuffleXor" in wgsl
    return wgsl


@pytest.mark.parametrize("tiles,k,n", [("throughput", 32, 68), ("balanced", 32, 68), ("balanced", 30, 67)])
@pytest.mark.parametrize("wx", [4, 8, 2])
def test_other_subgroup_layouts_take_the_plain_loop(tmp_path, tiles, k, n, wx):
    wgsl = _matmul_shader(tmp_path, tiles, k, n)
    vec = "array<vec4<f32>>" in wgsl  # (K and N multiples of 4: the vec4 path, else the scalar one)
    (tm, tn), wg = ((16, 16) if tiles == "throughput" else (8, 8)), int(re.search(r"workgroup_size\((\d+)\)", wgsl)[1])
    rng = np.random.default_rng(wx)
    a, b = rng.standard_normal((70, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    sizes = {"M": 70, "N": n, "K": k, "MN": 70 * n, "sam": k, "sak": 1, "sbk": n, "sbn": 1, "wx": wx}
    fields = re.search(r"struct Params \{([^}]*)\}", wgsl)[1].replace(",", " ").split()
    params = np.array([sizes[f.rstrip(":")] for f in fields[::2]], np.uint32)
    dev = NativeDevice()
    bufs = []
    for data in (a, b):
        buf = dev.create_buffer(data.nbytes, "storage")
        dev.write_buffer(buf, 0, data.tobytes())
        bufs.append((buf, 0, data.nbytes))
    out = dev.create_buffer(70 * n * 4, "storage")
    uni = dev.create_buffer(max(16, -(-params.nbytes // 16) * 16), "uniform")
    dev.write_buffer(uni, 0, params.tobytes())
    pipe = dev.create_pipeline(wgsl, [False, False, True], True)
    group = dev.create_bind_group(pipe, bufs + [(out, 0, 70 * n * 4), (uni, 0, params.nbytes)])
    grid = (-(-n // (tn * wx)), -(-70 // (tm * (wg // wx))), 1)
    read = dev.create_buffer(70 * n * 4, "readback")
    dev.submit([(pipe, group, grid)], [(out, 0, read, 0, 70 * n * 4)])
    got = np.frombuffer(run_sync(dev.read(read, 70 * n * 4)), np.float32).reshape(70, n)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    assert vec == (k % 4 == 0 and n % 4 == 0)
