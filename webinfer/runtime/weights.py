"""A program's weights onto the device: read from the artifact's shards (each shard read once) into one buffer
per weight, or one texture where the program binds it as a texture; or taken from buffers the page uploaded
(the worker streams shards straight to the GPU, so weights never pass through Python there)."""

from __future__ import annotations

from .. import dims as D
from ..dtypes import gpu_nbytes
from ..errors import WebinferError
from ..format.schema import Tensor


def upload_weights(device, tensors: tuple[Tensor, ...], weight_ids, textures: dict, read_shard) -> dict[int, object]:
    """Table id -> GPU buffer (or texture) of each weight in ``weight_ids``; ``read_shard(i)`` gives shard i's
    bytes."""
    buffers, shards = {}, {}
    for tid in weight_ids:
        t = tensors[tid]
        nbytes = gpu_nbytes(t.dtype, D.evaluate(_numel(t.shape), {}))
        whole = bytearray(nbytes) if tid in textures else None  # a texture is written at once
        buf = None if whole is not None else device.create_buffer(nbytes, "storage")
        for c in t.chunks:
            shard, offset, n, dst = c.shard, c.offset, c.nbytes, c.dst
            if n == 0:
                continue
            if shard not in shards:
                shards[shard] = read_shard(shard)
            if whole is not None:
                whole[dst : dst + n] = shards[shard][offset : offset + n]
            else:
                device.write_buffer(buf, dst, shards[shard][offset : offset + n])
        buffers[tid] = buf if whole is None else device.create_texture(bytes(whole), textures[tid])
    return buffers


def check_weights(weight_ids, weights: dict) -> dict[int, object]:
    """The program's weights among buffers uploaded beforehand (the page's worker); all must be there."""
    want = set(weight_ids)
    missing = sorted(want - set(weights))
    if missing:
        raise WebinferError(f"pre-uploaded weights lack {len(missing)} weight tensor(s), e.g. {missing[:4]}")
    return {tid: weights[tid] for tid in want}


def _numel(shape: list):
    """A weight's element count (its shape is static; a dim expression evaluates it all the same)."""
    n = 1
    for d in shape:
        if not isinstance(d, int):
            return ["*", 1] + list(shape)
        n *= d
    return n
