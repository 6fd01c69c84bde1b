"""``webinfer segment -o``: a folder, or a format that cannot hold the cut-out's alpha (JPEG), is one line before
the model runs (it was Pillow's ValueError/OSError after it, an internal error)."""

from __future__ import annotations

import pytest

from tests.graph.test_mask_epilogue import picture, segmentation_model
from tests.test_vision_tasks import write
from webinfer.build import build
from webinfer.cli import main


@pytest.mark.parametrize("name,why", [("folder", "is a folder"), ("cut.jpg", "alpha channel"),
                                      ("cut", "alpha channel")])
def test_segment_output_names_are_checked_first(tmp_path, capsys, name, why):
    from PIL import Image

    art = str(tmp_path / "matte.wi")
    build(write(tmp_path, "m.onnx", segmentation_model(1, True)), art, target="software",
          preprocess={"resize": {"letterbox": [48, 64], "pad": 0}}, task="background-removal")
    Image.fromarray(picture(40, 90, 0), "RGBA").save(tmp_path / "in.png")
    (tmp_path / "folder").mkdir()
    rc = main(["segment", art, str(tmp_path / "in.png"), "-o", str(tmp_path / name)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("webinfer: error: ") and "\n" not in err and why in err, err
