"""``webinfer detect`` and ``webinfer segment`` (and ``build --task``): the detection and segmentation tasks from
the command line (tasks/detection.py, tasks/segmentation.py). Argument parsing and printing only."""

from __future__ import annotations

import json
import os

from .errors import WebinferError

POSTPROCESS_HELP = ("a classification epilogue (softmax, top-k scores, labels from a file), or with --task that "
                    "task's: detection {head: yolov8|yolov5|yolox, score_threshold, iou_threshold, max_detections, "
                    "strides, sigmoid, labels}, segmentation {mode: argmax|matte, sigmoid, labels}")
BUILD_TASKS = ("image-classification", "object-detection", "image-segmentation", "background-removal")


def add_build_flags(b) -> None:
    """``build --task``: which epilogue ``--postprocess`` describes (graph/vision_epilogues.py)."""
    b.add_argument("--task", choices=BUILD_TASKS,
                   help="the task whose epilogue runs on the GPU: image-classification (the default with "
                        "--postprocess: top-k), object-detection (a YOLO-family head: decode, threshold, NMS, "
                        "boxes in the image's pixels), image-segmentation (class map), background-removal (matte "
                        "as alpha); --postprocess SPEC.json gives its options")


def register(sub) -> None:
    d = sub.add_parser("detect", help="detect objects in an image file with an artifact built with --preprocess "
                                      "and --task object-detection")
    d.add_argument("artifact")
    d.add_argument("image", help="an image file (PNG, JPEG, ...: read with Pillow)")
    d.add_argument("--json", action="store_true",
                   help='print a JSON list of {"label", "score", "box": [x0, y0, x1, y1]} (image pixels)')
    d.set_defaults(fn=cmd_detect)
    s = sub.add_parser("segment", help="segment an image file (class map, or background removal: a cut-out PNG) "
                                       "with an artifact built with --task image-segmentation|background-removal")
    s.add_argument("artifact")
    s.add_argument("image", help="an image file (PNG, JPEG, ...: read with Pillow)")
    s.add_argument("-o", "--output", required=True, metavar="OUT.png",
                   help="the cut-out RGBA image (matte as alpha), or the class map as 8-bit grey levels")
    s.set_defaults(fn=cmd_segment)


def cmd_detect(args) -> int:
    from .tasks import pipeline

    found = pipeline("object-detection", args.artifact)(args.image)
    if args.json:
        print(json.dumps([{"label": d["label"], "score": round(d["score"], 6),
                           "box": [round(v, 3) for v in d["box"]]} for d in found]))
        return 0
    for d in found:
        x0, y0, x1, y1 = d["box"]
        print(f"{d['score']:.4f}  {d['label']}  [{x0:.1f}, {y0:.1f}, {x1:.1f}, {y1:.1f}]")
    print(f"{len(found)} object(s)")
    return 0


_ALPHA = (".png", ".webp", ".tif", ".tiff")  # formats Pillow writes RGBA to


def cmd_segment(args) -> int:
    from PIL import Image

    from .artifact import Artifact
    from .tasks import pipeline

    out_dir = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(out_dir):
        raise WebinferError(f"-o {args.output}: the folder {out_dir} does not exist")
    if os.path.isdir(args.output):
        raise WebinferError(f"-o {args.output}: is a folder; give a file name such as "
                            f"{os.path.join(args.output, 'cutout.png')}")
    segment = Artifact.load(args.artifact).spec.segment
    mode = segment.mode if segment else None
    ext = os.path.splitext(args.output)[1].lower()
    if mode == "matte" and ext not in _ALPHA:  # (checked before the run: Pillow would fail after it)
        raise WebinferError(f"-o {args.output}: the cut-out has an alpha channel; write {', '.join(_ALPHA)}")
    if ext not in Image.registered_extensions():
        raise WebinferError(f"-o {args.output}: no image format for {ext or 'a name without an extension'} "
                            "(e.g. .png)")
    task = "background-removal" if mode == "matte" else "image-segmentation"
    out = pipeline(task, args.artifact)(args.image)
    size = (out["width"], out["height"])
    if "cutout" in out:
        Image.frombytes("RGBA", size, out["cutout"]).save(args.output)
        print(f"wrote {args.output}: {size[0]}x{size[1]} cut-out")
        return 0
    import numpy as np

    seg = np.asarray(out["segments"])
    Image.fromarray(np.clip(seg, 0, 255).astype(np.uint8), "L").save(args.output)
    labels = out["labels"]
    present = [labels[c] if labels and c < len(labels) else str(c) for c in np.unique(seg).tolist()]
    print(f"wrote {args.output}: {size[0]}x{size[1]} class map; classes present: {', '.join(present)}")
    return 0
