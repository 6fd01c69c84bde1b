"""A YOLOv8n-shaped detector in torch, exported as Ultralytics exports with ``dynamic=True``: symbolic batch,
height and width, the anchors and strides computed from the feature maps' shapes (Shape -> Gather -> Range),
the DFL box decoding and the class sigmoid inside the graph; output ``[batch, 4 + classes, anchors]``.

No package on PyPI or npm ships a YOLOv8 ONNX whose height and width are symbolic (the packaged ones are
exported at a fixed 640x640), so the tests export this one (seeded weights, Conv and BatchNorm fused as
Ultralytics fuses them before export). The layer widths and depths are YOLOv8n's (width 0.25, depth 0.33).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from torch import nn


class ConvAct(nn.Module):
    """Conv2d (BatchNorm fused into its bias) + SiLU, 'same' padding."""

    def __init__(self, c1: int, c2: int, k: int = 1, s: int = 1):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=True)

    def forward(self, x):
        return nn.functional.silu(self.conv(x))


class Bottleneck(nn.Module):
    def __init__(self, c: int, shortcut: bool):
        super().__init__()
        self.cv1, self.cv2, self.add = ConvAct(c, c, 3), ConvAct(c, c, 3), shortcut

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C2f(nn.Module):
    def __init__(self, c1: int, c2: int, n: int, shortcut: bool):
        super().__init__()
        self.c = c2 // 2
        self.cv1 = ConvAct(c1, 2 * self.c)
        self.cv2 = ConvAct((2 + n) * self.c, c2)
        self.m = nn.ModuleList(Bottleneck(self.c, shortcut) for _ in range(n))

    def forward(self, x):
        y = list(self.cv1(x).chunk(2, 1))
        y.extend(m(y[-1]) for m in self.m)
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, c1: int, c2: int):
        super().__init__()
        self.cv1, self.cv2 = ConvAct(c1, c1 // 2), ConvAct(c1 * 2, c2)
        self.m = nn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        y = [self.cv1(x)]
        y.extend(self.m(y[-1]) for _ in range(3))
        return self.cv2(torch.cat(y, 1))


class Detect(nn.Module):
    """YOLOv8's anchor-free head: per level a box branch (4 x reg_max bins) and a class branch; DFL decoding."""

    def __init__(self, nc: int, ch: tuple, strides=(8, 16, 32), reg_max: int = 16):
        super().__init__()
        self.nc, self.reg_max, self.strides = nc, reg_max, strides
        c2, c3 = max(16, ch[0] // 4, reg_max * 4), max(ch[0], min(nc, 100))
        self.cv2 = nn.ModuleList(nn.Sequential(ConvAct(x, c2, 3), ConvAct(c2, c2, 3), nn.Conv2d(c2, 4 * reg_max, 1))
                                 for x in ch)
        self.cv3 = nn.ModuleList(nn.Sequential(ConvAct(x, c3, 3), ConvAct(c3, c3, 3), nn.Conv2d(c3, nc, 1))
                                 for x in ch)
        self.dfl = nn.Conv2d(reg_max, 1, 1, bias=False).requires_grad_(False)
        self.dfl.weight.data[:] = torch.arange(reg_max, dtype=torch.float).view(1, reg_max, 1, 1)

    def forward(self, xs):
        b = xs[0].shape[0]
        feats = [torch.cat((self.cv2[i](x), self.cv3[i](x)), 1) for i, x in enumerate(xs)]
        anchors, strides = [], []
        for x, s in zip(feats, self.strides):  # Ultralytics' make_anchors: from the shapes, at run time
            h, w = x.shape[2:]
            sx = torch.arange(end=w, dtype=x.dtype) + 0.5
            sy = torch.arange(end=h, dtype=x.dtype) + 0.5
            gy, gx = torch.meshgrid(sy, sx, indexing="ij")
            anchors.append(torch.stack((gx, gy), -1).view(-1, 2))
            strides.append(torch.full((h * w, 1), s, dtype=x.dtype))
        anchors = torch.cat(anchors).transpose(0, 1).unsqueeze(0)
        strides = torch.cat(strides).transpose(0, 1)
        out = torch.cat([f.view(b, 4 * self.reg_max + self.nc, -1) for f in feats], 2)
        box, cls = out.split((4 * self.reg_max, self.nc), 1)
        a = box.shape[2]
        dist = self.dfl(box.view(b, 4, self.reg_max, a).transpose(2, 1).softmax(1)).view(b, 4, a)
        lt, rb = dist.chunk(2, 1)
        x1y1, x2y2 = anchors - lt, anchors + rb
        xywh = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1)
        return torch.cat((xywh * strides, cls.sigmoid()), 1)


class YOLOv8(nn.Module):
    def __init__(self, nc: int = 80, w=(16, 32, 64, 128, 256), n=(1, 2, 2, 1)):
        super().__init__()
        self.b0, self.b1 = ConvAct(3, w[0], 3, 2), ConvAct(w[0], w[1], 3, 2)
        self.b2, self.b3 = C2f(w[1], w[1], n[0], True), ConvAct(w[1], w[2], 3, 2)
        self.b4, self.b5 = C2f(w[2], w[2], n[1], True), ConvAct(w[2], w[3], 3, 2)
        self.b6, self.b7 = C2f(w[3], w[3], n[2], True), ConvAct(w[3], w[4], 3, 2)
        self.b8, self.b9 = C2f(w[4], w[4], n[3], True), SPPF(w[4], w[4])
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.h12, self.h15 = C2f(w[4] + w[3], w[3], 1, False), C2f(w[3] + w[2], w[2], 1, False)
        self.h16, self.h18 = ConvAct(w[2], w[2], 3, 2), C2f(w[2] + w[3], w[3], 1, False)
        self.h19, self.h21 = ConvAct(w[3], w[3], 3, 2), C2f(w[3] + w[4], w[4], 1, False)
        self.detect = Detect(nc, (w[2], w[3], w[4]))

    def forward(self, x):
        p3 = self.b4(self.b3(self.b2(self.b1(self.b0(x)))))
        p4 = self.b6(self.b5(p3))
        p5 = self.b9(self.b8(self.b7(p4)))
        h12 = self.h12(torch.cat((self.up(p5), p4), 1))
        h15 = self.h15(torch.cat((self.up(h12), p3), 1))
        h18 = self.h18(torch.cat((self.h16(h15), h12), 1))
        h21 = self.h21(torch.cat((self.h19(h18), p5), 1))
        return self.detect([h15, h18, h21])


def export_yolov8(path: Path, opset: int = 17, seed: int = 0) -> Path:
    """Export (once) to ``path`` with symbolic batch, height and width, as ``yolo export dynamic=True`` does."""
    if path.exists():
        return path
    torch.manual_seed(seed)
    model = YOLOv8().eval()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (the TorchScript exporter, as Ultralytics uses it)
        torch.onnx.export(model, (torch.zeros(1, 3, 64, 96),), str(tmp), opset_version=opset, dynamo=False,
                          input_names=["images"], output_names=["output0"],
                          dynamic_axes={"images": {0: "batch", 2: "height", 3: "width"},
                                        "output0": {0: "batch", 2: "anchors"}})
    tmp.replace(path)
    return path
