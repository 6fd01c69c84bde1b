"""The page's weight loader (site/weights.mjs, shard_stream.mjs) streams each shard into GPU buffers in blocks
far smaller than the shard (a 17.6 MB weight across two shards, forced 4,100-byte blocks): every buffer and
texture (the software classes' program) read back equals the bytes the manifest's chunk table places (read here from the shard files); a second load comes
from Cache Storage; a shard altered on the server is refused and never cached; the bundled page built on the
loader runs the model and equals onnxruntime; the incremental SHA-256 equals hashlib's."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

pytestmark = pytest.mark.browser
SITE_JS = Path(__file__).resolve().parents[2] / "webinfer" / "site"
N = 2100  # w1 is N x N f32: 17.6 MB, more than one 16 MiB shard
BLOCK = 4100

# Loads an artifact's weights with site/weights.mjs into a fresh device, reads every buffer back and returns
# [tensor id, sha256 of its first `nbytes` bytes] per weight, with the loader's counts.
LOAD = """async ([art, block, nbytes, textured]) => {
  const { loadWeights } = await import("./js/weights.mjs");
  const adapter = await navigator.gpu.requestAdapter();
  const device = await adapter.requestDevice({ requiredLimits: {
    maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
    maxBufferSize: adapter.limits.maxBufferSize } });
  const manifest = await (await fetch(art + "manifest.json")).json();
  let events = 0;
  const program = textured ? manifest.programs.find((p) => (p.textures || []).length) : manifest.programs[0];
  const got = await loadWeights(device, new URL(art, location.href).href, manifest, () => { events += 1; },
    program, block);
  const out = [];
  const texel = { rgba32uint: 16, rg32float: 8, r32float: 4 };
  const row = (t) => Math.ceil(t.width * texel[t.format] / 256) * 256;  // copies need 256-byte rows
  for (const [tid, buffer] of got.pairs) {
    const isTexture = buffer instanceof GPUTexture;
    const size = isTexture ? row(buffer) * buffer.height : buffer.size;
    const read = device.createBuffer({ size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const enc = device.createCommandEncoder();
    if (isTexture) {
      enc.copyTextureToBuffer({ texture: buffer }, { buffer: read, bytesPerRow: row(buffer) }, [buffer.width, buffer.height]);
    } else {
      enc.copyBufferToBuffer(buffer, 0, read, 0, size);
    }
    device.queue.submit([enc.finish()]);
    await read.mapAsync(GPUMapMode.READ);
    let bytes = new Uint8Array(read.getMappedRange()).slice();
    if (isTexture) {  // the rows without their copy padding
      const used = buffer.width * texel[buffer.format];
      const rows = new Uint8Array(used * buffer.height);
      for (let y = 0; y < buffer.height; y++) rows.set(bytes.subarray(y * row(buffer), y * row(buffer) + used), y * used);
      bytes = rows;
    }
    bytes = bytes.slice(0, nbytes[tid]);
    read.unmap();
    const digest = Array.from(new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)),
      (b) => b.toString(16).padStart(2, "0")).join("");
    out.push([tid, digest, isTexture]);
  }
  device.destroy();
  return { weights: out, fromCache: got.fromCache, shards: got.shards, events };
}"""


def _model() -> onnx.ModelProto:
    rng = np.random.default_rng(3)
    w1 = (rng.standard_normal((N, N)) / np.sqrt(N)).astype(np.float32)
    w2 = rng.standard_normal((N, 8)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Tanh", ["h"], ["t"]),
             helper.make_node("MatMul", ["t", "w2"], ["y"])]
    g = helper.make_graph(nodes, "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", N])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8])],
                          [onnx.numpy_helper.from_array(w1, "w1"), onnx.numpy_helper.from_array(w2, "w2")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _expected(art: Path) -> dict[int, bytes]:
    """Each weight's bytes as the manifest's chunk table places them, read from the shard files."""
    m = json.loads((art / "manifest.json").read_text())
    shards = [(art / s["file"]).read_bytes() for s in m["shards"]]
    out = {}
    for tid in {t for p in m["programs"] for t in p["weights"]}:
        chunks = m["tensors"][tid]["chunks"]
        buf = bytearray(max(dst + size for _, _, size, dst in chunks))
        for shard, offset, size, dst in chunks:
            buf[dst:dst + size] = shards[shard][offset:offset + size]
        out[tid] = bytes(buf)
    return out


@pytest.fixture(scope="module")
def stream_site(tmp_path_factory, webinfer_wheel):
    from webinfer.build import build
    from webinfer.bundle import bundle
    from webinfer.serve import serve_in_thread

    tmp = tmp_path_factory.mktemp("stream")
    model = _model()
    build(model, str(tmp / "wide.wi"))
    bundle(str(tmp / "wide.wi"), str(tmp / "site"), wheel=webinfer_wheel)
    art = tmp / "site" / "art"
    shutil.copytree(tmp / "wide.wi", art)
    shutil.copytree(SITE_JS, tmp / "site" / "js")
    (tmp / "site" / "index.html").write_text("<!doctype html><title>weights</title>")
    build(model, str(tmp / "site" / "art4"), quantize="int4")  # int4: the software classes bind textures
    bad = tmp / "site" / "bad"  # the same artifact with one byte of its last shard changed
    shutil.copytree(art, bad)
    m = json.loads((art / "manifest.json").read_text())
    last = bad / m["shards"][-1]["file"]
    data = bytearray(last.read_bytes())
    data[len(data) // 2] ^= 1
    last.write_bytes(bytes(data))
    server, url = serve_in_thread(str(tmp / "site"))
    yield {"url": url, "art": art, "art4": tmp / "site" / "art4", "model": model}
    server.shutdown()
    server.server_close()


def test_shards_stream_into_buffers_byte_for_byte_then_from_the_cache(page, stream_site):
    art, url = stream_site["art"], stream_site["url"]
    want = _expected(art)
    m = json.loads((art / "manifest.json").read_text())
    assert len(m["shards"]) >= 2 and max(s["bytes"] for s in m["shards"]) > 1000 * BLOCK
    page.goto(url + "index.html")
    nbytes = {tid: len(b) for tid, b in want.items()}
    first = page.evaluate(LOAD, ["art/", BLOCK, nbytes, False])
    digests = {tid: hashlib.sha256(b).hexdigest() for tid, b in want.items()}
    assert {tid: d for tid, d, _ in first["weights"]} == {t: digests[t] for t in m["programs"][0]["weights"]}
    assert first["fromCache"] == 0 and first["shards"] == len(m["shards"])
    assert first["events"] > len(m["shards"])  # progress as the bytes arrive, not once per shard
    again = page.evaluate(LOAD, ["art/", BLOCK + 4, nbytes, False])  # a reload: every shard from Cache Storage
    assert again["fromCache"] == len(m["shards"])
    assert again["weights"] == first["weights"]
    # int4: the software classes' program binds its weights as textures, written in groups of rows
    want4 = _expected(stream_site["art4"])
    textured = page.evaluate(LOAD, ["art4/", BLOCK, {t: len(b) for t, b in want4.items()}, True])
    assert any(is_texture for _, _, is_texture in textured["weights"])
    assert {t: d for t, d, _ in textured["weights"]} == {t: hashlib.sha256(want4[t]).hexdigest()
                                                         for t, _, _ in textured["weights"]}


def test_an_altered_shard_is_refused_and_never_cached(page, stream_site):
    page.goto(stream_site["url"] + "index.html")
    with pytest.raises(Exception, match="sha256 does not match the manifest"):
        page.evaluate(LOAD, ["bad/", BLOCK, {}, False])
    m = json.loads((stream_site["art"] / "manifest.json").read_text())
    cached = page.evaluate("""async (files) => {
      const cache = await caches.open("webinfer-weights-v1");
      return (await cache.keys()).map((r) => r.url).filter((u) => u.includes("/bad/"));
    }""", [s["file"] for s in m["shards"]])
    good = [s["file"] for s in m["shards"][:-1]]  # the shards before the altered one checked out
    assert sorted(u.split("/bad/")[1].split("?")[0] for u in cached) == sorted(good)


def test_the_bundled_page_runs_on_the_streamed_weights(page, stream_site):
    page.goto(stream_site["url"] + "model/?path=gpu")
    page.wait_for_selector("#result[data-done]", state="attached", timeout=300_000)
    result = page.locator("#result")
    assert result.get_attribute("data-error") is None, result.get_attribute("data-error")
    got = json.loads(result.get_attribute("data-outputs"))["y"]
    want = ort.InferenceSession(stream_site["model"].SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": np.ones((1, N), np.float32)})[0]
    np.testing.assert_allclose(got["head"], want.ravel()[:len(got["head"])], rtol=1e-4, atol=1e-4)


def test_incremental_sha256_equals_hashlib(page, stream_site):
    page.goto(stream_site["url"] + "index.html")
    cases = [0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 4099, 100_003]
    got = page.evaluate("""async (cases) => {
      const { Sha256 } = await import("./js/sha256.mjs");
      return cases.map((n) => {
        const bytes = Uint8Array.from({ length: n }, (_, i) => (i * 131 + 7) % 251);
        const h = new Sha256();
        for (let at = 0, step = 1; at < n; at += step, step = (step * 7) % 97 + 1) h.update(bytes.subarray(at, at + step));
        return h.hex();
      });
    }""", cases)
    assert got == [hashlib.sha256(bytes((i * 131 + 7) % 251 for i in range(n))).hexdigest() for n in cases]
