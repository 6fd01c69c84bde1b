"""Kernel families. Each module registers the ONNX ops it lowers (see ``registry.lowering``)."""

import importlib
import pkgutil

ALL = [importlib.import_module(f"{__name__}.{m.name}") for m in pkgutil.iter_modules(__path__)
       if not m.name.startswith("_") and m.name != "helpers"]
