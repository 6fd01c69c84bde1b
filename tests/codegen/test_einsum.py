"""Einsum against onnx.reference: matmul-shaped contractions (with and without transposes) and the
generic kernel (one operand, diagonals, sums, three operands, ellipsis broadcasting)."""

import numpy as np
import pytest
from oprefs import check_node

rng = np.random.default_rng(4)


def f32(shape):
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,kj->ik", [(3, 4), (5, 4)]),
    ("ji,jk->ki", [(4, 3), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 5, 4), (2, 3, 6, 4)]),
    ("bhqk,bhkd->bqhd", [(2, 3, 5, 6), (2, 3, 6, 4)]),
    ("abc,cd->dba", [(2, 3, 4), (4, 5)]),
    ("i,i->", [(7,), (7,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (1, 4, 5)]),
    ("ij->ji", [(3, 4)]),
    ("ii->i", [(4, 4)]),
    ("bii->bi", [(2, 3, 3)]),
    ("ij->", [(3, 4)]),
    ("ij,jk", [(3, 4), (4, 2)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ij,ij->i", [(3, 4), (3, 4)]),
    ("bij,jk->bik", [(2, 3, 4), (4, 5)]),
]


@pytest.mark.parametrize("eq,shapes", CASES)
def test_einsum(eq, shapes):
    feeds = {f"x{i}": f32(s) for i, s in enumerate(shapes)}
    _, _, _, gpu = check_node("Einsum", feeds, equation=eq)
    assert gpu
