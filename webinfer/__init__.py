"""webinfer: ONNX models compiled ahead of time to WGSL, run natively (wgpu-py) or in a browser (Pyodide).

Importing the package is light (the browser runtime imports it too); heavy parts load on first use.
"""

__version__ = "0.1.0"

_LAZY = {
    "InferenceSession": ("webinfer.runtime.inference", "InferenceSession"),
    "build": ("webinfer.build", "build"),
    "WebinferError": ("webinfer.errors", "WebinferError"),
    "OpenAI": ("webinfer.llm.openai_api", "OpenAI"),
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'webinfer' has no attribute {name!r}")
