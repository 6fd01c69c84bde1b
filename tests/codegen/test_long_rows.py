"""Reductions over rows longer than 65535 elements, against onnx.reference (numpy's pairwise sums).

llvmpipe (lavapipe) breaks out of an invocation's loops once they ran 65535 iterations together, silently: a
ReduceMean over 300 x 300 spatial values with more than two rows (one invocation per row) summed the first
65535 and returned a mean 27 % low, and GlobalAveragePool walked a 512 x 512 window in one invocation, in one
float32 chain (an EfficientNet U-Net's squeeze-excite blocks at 1024 px; onnxruntime's own chain is off by 5e-4
on near-constant data). Such rows now spread over a workgroup: right, and a tree sum besides. TopK ranks each
element in its own invocation when selecting k of n in one would pass the limit, and NonMaxSuppression sorts
and suppresses with a workgroup per class.
"""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper
from oprefs import check_model, check_node, make_model

from webinfer.backend import WebinferRep

rng = np.random.default_rng(7)


def spatial(shape, offset=0.0):
    return (rng.standard_normal(shape) + offset).astype(np.float32)


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceMax", "ReduceSumSquare", "ReduceLogSumExp"])
def test_reduce_over_long_rows(op):
    x = spatial((1, 6, 300, 300), 0.5)
    check_node(op, {"x": x}, initializers={"axes": np.array([2, 3], np.int64)}, keepdims=1, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("target", ["software", "gpu"])
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool_long_windows(op, target):
    check_node(op, {"x": spatial((2, 3, 300, 300), 1.0)}, target=target)
    check_node(op, {"x": spatial((1, 4, 1, 100_000), -0.3)}, target=target)  # one long spatial dim


def test_global_average_pool_sums_accurately():
    """Near-constant positive activations (a white page after SiLU): a float32 running sum drifts by 1e-3 of
    the mean at 512 x 512; the result must be within 1e-5 of the float64 mean."""
    x = (7.3 + rng.random((1, 4, 512, 512)) * 0.01).astype(np.float32)
    _, got, _, _ = check_node("GlobalAveragePool", {"x": x})
    exact = x.astype(np.float64).mean(axis=(2, 3), keepdims=True)
    assert float(np.abs(got[0] - exact).max() / np.abs(exact).max()) < 1e-5


def test_instance_norm_over_long_rows():
    x = spatial((1, 3, 300, 300), 2.0)
    scale, bias = rng.random(3).astype(np.float32) + 0.5, rng.standard_normal(3).astype(np.float32)
    check_node("InstanceNormalization", {"x": x}, initializers={"s": scale, "b": bias}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("largest", [0, 1])
def test_topk_of_thousands(largest):
    """TopK 300 of 8400 anchors (RT-DETR's, YOLOv10's heads): selection in one invocation took 300 x 8400 loop
    iterations and lavapipe stopped it after 65535 (92 % of the values wrong); ties resolve to the lower index."""
    k = np.array([300], np.int64)
    x = rng.integers(0, 60, size=(2, 8400)).astype(np.float32)  # many ties
    check_node("TopK", {"x": x}, n_outputs=2, initializers={"k": k}, axis=1, largest=largest)
    check_node("TopK", {"x": rng.integers(-99, 99, size=(8400, 2)).astype(np.int64)}, n_outputs=2,
               initializers={"k": k}, axis=0, largest=largest)


@pytest.mark.parametrize("shape,axis,k", [((3, 10), -1, 3), ((3, 10), 0, 2), ((2, 5, 4), 1, 5), ((6,), 0, 1),
                                          ((4, 1), 0, 4)])
@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("kernel", ["rank", "chunks"])
def test_topk_ranking_kernel_on_small_rows(monkeypatch, shape, axis, k, largest, kernel):
    """The ranking kernel on the shapes of test_reduce.py's TopK cases (forced: the budget set to 0), NaNs too;
    and the chunked ranking (chunks of k or 2 elements, so that rows span several)."""
    from webinfer.codegen.kernels import topk as T

    monkeypatch.setattr(T, "LOOP_MAX", 0)
    monkeypatch.setattr(T, "WG_LOOP_MAX", 0)
    if kernel == "chunks":
        monkeypatch.setattr(T, "RANK_MAX_N", 0)
        monkeypatch.setattr(T, "CHUNK_MIN", 2)
    x = rng.integers(0, 5, size=shape).astype(np.float32)
    x.flat[::4] = np.nan  # NaN ranks above +inf, as in onnxruntime
    x.flat[1::5] = np.inf
    feeds = {"x": x}
    model = make_model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)], feeds,
                       ["v", "i"], {"k": np.array([k], np.int64)})
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = WebinferRep(model).run(feeds)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def _nms_feeds(n, classes, seed):
    r = np.random.default_rng(seed)
    ctr = r.random((1, n, 2)) * 600
    wh = r.random((1, n, 2)) * 80 + 5
    boxes = np.concatenate([ctr - wh / 2, ctr + wh / 2], -1).astype(np.float32)
    return {"boxes": boxes, "scores": (r.random((1, classes, n)) ** 4).astype(np.float32)}


@pytest.mark.parametrize("n,classes,limit,threshold", [(8400, 3, 100, 0.25), (2000, 2, 300, None)])
def test_nms_over_thousands_of_boxes(n, classes, limit, threshold):
    """A YOLO head's NMS in the graph: one invocation per class selecting greedily over 8400 anchors ran out of
    lavapipe's loop iterations after a few boxes (28 rows of onnxruntime's 400); every row must equal
    onnxruntime's, in its order."""
    feeds = _nms_feeds(n, classes, n)
    inits = {"m": np.array([limit], np.int64), "iou": np.array([0.45], np.float32)}
    if threshold is not None:
        inits["thr"] = np.array([threshold], np.float32)
    model = make_model([helper.make_node("NonMaxSuppression", ["boxes", "scores", *inits], ["sel"])], feeds,
                       ["sel"], inits)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = WebinferRep(model).run(feeds)[0]
    assert want.shape[0] == classes * limit
    np.testing.assert_array_equal(got, want)


def test_nms_with_a_symbolic_box_count():
    """A detector exported for any image size: the anchor count is symbolic; one build serves every count, the
    buffers sized by max_output_boxes_per_class (50 a class here), each run equal to onnxruntime's."""
    from onnx import TensorProto, numpy_helper

    inits = [numpy_helper.from_array(np.array([50], np.int64), "m"),
             numpy_helper.from_array(np.array([0.45], np.float32), "iou"),
             numpy_helper.from_array(np.array([0.2], np.float32), "thr")]
    graph = helper.make_graph(
        [helper.make_node("NonMaxSuppression", ["boxes", "scores", "m", "iou", "thr"], ["sel"])], "g",
        [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, "n", 4]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 3, "n"])],
        [helper.make_tensor_value_info("sel", TensorProto.INT64, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    rep = WebinferRep(model)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (8400, 20, 2100):
        feeds = _nms_feeds(n, 3, n)
        want = ref.run(None, feeds)[0]
        np.testing.assert_array_equal(rep.run(feeds)[0], want, err_msg=f"{n} boxes")
    assert len(rep._sessions) == 1, "built more than once"


def test_topk_over_a_symbolic_count():
    """YOLOv10's head at any image size: TopK 100 of a symbolic anchor count ranks (k x n is unknown at build)."""
    from oprefs import check_shapes

    model = make_model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1)], {"x": np.zeros((1, 1), np.float32)},
                       ["v", "i"], {"k": np.array([100], np.int64)})
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "n"
    check_shapes(model, lambda n: {"x": rng.integers(0, 50, size=(1, n)).astype(np.float32)}, [8400, 100, 3000])


def test_softmax_topk_over_imagenet_21k_classes():
    """Softmax then TopK 5 (fused into one kernel, graph/passes/fuse_softmax_topk.py) over 21843 classes: one
    invocation per row took 3 x 21843 + 5 x 21843 loop iterations, past lavapipe's limit (every value wrong)."""
    x = (rng.standard_normal((2, 21843)) * 3).astype(np.float32)
    model = make_model([helper.make_node("Softmax", ["x"], ["p"], axis=-1),
                        helper.make_node("TopK", ["p", "k"], ["v", "i"], axis=-1)],
                       {"x": x}, ["p", "v", "i"], {"k": np.array([5], np.int64)})
    check_model(model, {"x": x})


@pytest.mark.parametrize("k,largest,target", [(5, 1, "software"), (300, 0, "software"), (1, 1, "software"),
                                               (5, 0, "gpu")])
def test_topk_over_rows_past_the_loop_limit(k, largest, target):
    """TopK over 70 001 (a vocabulary's worth): ranking each element against the whole row passed lavapipe's
    limit (the top 5 wrong whenever one sat past element 65535); now chunks' best k, then those ranked. Many
    ties (ties resolve to the lower index) and the extremes placed at the row's end."""
    x = rng.integers(0, 500, size=(2, 70_001)).astype(np.float32)
    x[:, -3:] = [[1000, -5, 1000], [-5, 1000, -5]]
    x[0, 100] = np.nan  # NaN ranks above +inf
    kk = {"k": np.array([k], np.int64)}
    check_node("TopK", {"x": x}, n_outputs=2, initializers=kk, axis=1, largest=largest, target=target)
    xi = rng.integers(-99, 99, size=(70_001, 2)).astype(np.int64)
    check_node("TopK", {"x": xi}, n_outputs=2, initializers=kk, axis=0, largest=largest, target=target)
