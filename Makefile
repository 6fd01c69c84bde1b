# webinfer: `make demo` and `make test` do all set-up themselves (scripts/setup.sh, idempotent).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
WEBINFER := $(VENV)/bin/webinfer
PYTEST_ARGS ?=
PYTEST_TIMEOUT ?= 1800

.PHONY: setup test lint pytest demo clean

setup:
	@VENV=$(abspath $(VENV)) bash scripts/setup.sh

lint: setup
	$(VENV)/bin/ruff check .

# All markers run (slow and browser included): -m "" clears any marker filter from addopts.
# pytest's exit code 5 ("no tests collected") is a failure here, never a silent success.
pytest: setup
	@set +e; $(PY) -m pytest tests -m "" --timeout=$(PYTEST_TIMEOUT) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; exit $$rc

test: lint
	@$(MAKE) --no-print-directory pytest

demo: setup
	@VENV=$(abspath $(VENV)) bash scripts/demo.sh

clean:
	rm -rf build/demo build/test-site
