"""What each demo page needs of its artifact, checked when bundling: a page given an artifact it cannot drive
would otherwise be published and fail only in the visitor's browser (``webinfer bundle --demo NAME``)."""

from __future__ import annotations

from .errors import WebinferError

_TOKENIZER = "assets/tokenizer.json"


def _generation(m) -> bool:  # (as llm/generate.py's Generator asks)
    return any(io.name == "sampling_params" for io in m.inputs) and bool(m.states)


# demo -> (does the artifact fit, what it must be built with). (No check for the similarity page: sites also
# use it to carry a text encoder for the JS API's pipelines, tests/browser/test_readme_js.py.)
_NEEDS = {
    "classify": (lambda m, enc: m.preprocess is not None and m.classify is not None,
                 "an image classifier built with --preprocess and --postprocess"),
    "detect": (lambda m, enc: m.preprocess is not None and m.detect is not None,
               "a detector built with --preprocess and --task object-detection"),
    "removebg": (lambda m, enc: m.preprocess is not None and m.segment is not None and m.segment.mode == "matte",
                 "a matting model built with --preprocess and --task background-removal"),
    "chat": (lambda m, enc: _generation(m) and _TOKENIZER in m.assets,
             "a decoder with a KV cache built for generation, from a folder holding its tokenizer.json"),
    "transcribe": (lambda m, enc: m.seq2seq is not None and enc is not None and enc.audio is not None,
                   "a speech encoder-decoder built from an export folder, with its audio front end"),
}


def check_demo(demo: str, manifest, encoder=None) -> None:
    """Refuse (one line) an artifact the ``demo`` page cannot run; ``manifest``/``encoder``: typed manifests
    (format/schema.py), the encoder's for an encoder-decoder."""
    fits, what = _NEEDS.get(demo, (lambda m, enc: True, ""))
    if not fits(manifest, encoder):
        raise WebinferError(f"--demo {demo} needs {what}; this artifact is not one (bundle it without --demo for "
                            "the generic page)")


# demo -> the build flags its page needs (``build --web SITE --demo NAME``: known before the build starts)
_FLAGS = {"classify": ("preprocess", "postprocess"), "detect": ("preprocess", "task=object-detection"),
          "removebg": ("preprocess", "task=background-removal")}


def check_demo_flags(demo: str | None, args) -> None:
    """``build --web --demo``: refuse before building what ``check_demo`` would refuse after."""
    for need in _FLAGS.get(demo or "", ()):
        name, _, value = need.partition("=")
        have = getattr(args, name, None)
        if have is None or (value and have != value):
            flag = f"--{name} {value}" if value else f"--{name}"
            raise WebinferError(f"--demo {demo} needs {_NEEDS[demo][1]}: add {flag}")
