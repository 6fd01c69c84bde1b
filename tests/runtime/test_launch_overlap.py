"""SessionCore.launch with a previous, uncollected run's output as an input on the GPU (the decode loop's
overlap, llm/generate.py): the memory planner may give that output and a host-written input of the plan one
buffer, so the host write of the next run's inputs must not land before the output is copied out."""

import numpy as np
from onnx import TensorProto, helper

from webinfer.artifact import Artifact
from webinfer.build import build
from webinfer.runtime.native import NativeDevice
from webinfer.runtime.session import SessionCore, run_sync
from webinfer.runtime.tensor import HostTensor


def _model():
    # t = a + b, then out = t * a: b is last read before out is written (a is read until then), so the planner
    # gives out b's buffer
    nodes = [helper.make_node("Add", ["a", "b"], ["t"]), helper.make_node("Mul", ["t", "a"], ["out"])]
    graph = helper.make_graph(nodes, "overlap", [helper.make_tensor_value_info(n, TensorProto.INT32, [1]) for n in "ab"],
                              [helper.make_tensor_value_info("out", TensorProto.INT32, [1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _feeds(a: int, b: int) -> dict:
    return {n: HostTensor("int32", (1,), np.array([v], np.int32).tobytes()) for n, v in (("a", a), ("b", b))}


def test_previous_output_feeds_the_next_run_before_host_inputs_are_written(tmp_path):
    build(_model(), str(tmp_path), target="software")
    art = Artifact.load(str(tmp_path))
    core = SessionCore(art.manifest, art.shader_sources(), art.read_shard, NativeDevice())
    first = core.launch(["out"], _feeds(5, 1), overlap=True)  # out = 30
    second = core.launch(["out"], _feeds(0, 100), gpu_inputs={"a": (first.outputs["out"], 4)}, overlap=True)
    (out1,) = run_sync(core.collect(first))
    (out2,) = run_sync(core.collect(second))
    assert np.frombuffer(out1.data, np.int32)[0] == (5 + 1) * 5
    assert np.frombuffer(out2.data, np.int32)[0] == (30 + 100) * 30
