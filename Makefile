# webinfer: `make demo` and `make test` do all set-up themselves (scripts/setup.sh, idempotent).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
WEBINFER := $(VENV)/bin/webinfer
TESTS ?= tests
PYTEST_ARGS ?=
PYTEST_TIMEOUT ?= 1800

.PHONY: setup test lint pytest demo clean

setup:
	@VENV=$(abspath $(VENV)) bash scripts/setup.sh

lint: setup
	$(VENV)/bin/ruff check .

# TESTS narrows the paths (default: all of tests/). All markers run (slow and browser included):
# -m "" clears any marker filter that addopts may carry.
# pytest's exit code 5 ("no tests collected") is a failure here, never a silent success.
PYTEST_CMD = set +e; $(PY) -m pytest $(TESTS) -m "" --timeout=$(PYTEST_TIMEOUT) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; exit $$rc

pytest: setup
	@$(PYTEST_CMD)

test: lint
	@$(PYTEST_CMD)

demo: setup
	@VENV=$(abspath $(VENV)) bash scripts/demo.sh

clean:
	rm -rf build/demo build/test-site
