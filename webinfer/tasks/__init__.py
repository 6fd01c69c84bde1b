"""One call per task, as transformers.js's ``pipeline()``: ``pipeline("text-generation", "art/")``.

Each task lives in its own module here (``tasks/<task>.py``) and is named in ``TASKS`` by
``"module:factory"``, imported on first use so that the browser runtime loads only what it runs.
A factory takes the artifact's path and keyword options and returns a callable object whose ``__call__``
does the whole task (decode the input as the user has it, run, post-process) and whose ``*_async`` twin
does it in Pyodide.
"""

from __future__ import annotations

from ..errors import WebinferError

TASKS = {
    "image-classification": "webinfer.tasks.classification:ImageClassification",
    "object-detection": "webinfer.tasks.detection:ObjectDetection",
    "image-segmentation": "webinfer.tasks.segmentation:ImageSegmentation",
    "background-removal": "webinfer.tasks.segmentation:ImageSegmentation",
    "text-generation": "webinfer.tasks.generation:TextGeneration",
    "automatic-speech-recognition": "webinfer.tasks.asr:SpeechRecognition",
    "translation": "webinfer.tasks.translation:Translation",
    "feature-extraction": "webinfer.tasks.feature_extraction:FeatureExtraction",
}


def pipeline(task: str, artifact: str, **options):
    """The object that runs ``task`` with the artifact at ``artifact`` (a folder built by ``webinfer build``)."""
    if task not in TASKS:
        raise WebinferError(f"unknown task {task!r}; the tasks are: {', '.join(sorted(TASKS))}")
    import importlib

    module, factory = TASKS[task].split(":")
    return getattr(importlib.import_module(module), factory)(artifact, **options)
