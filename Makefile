# Two commands for a fresh machine: `make run` and `make test` (see README.md).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
COMPAT_NODE := tests/compat/node
CHROMIUM := /usr/bin/chromium

.PHONY: run test test-all campaign bench lint typecheck setup clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[test,dev,compat,spark,plot,dashboard]'
	touch $(STAMP)

$(COMPAT_NODE)/node_modules/.installed: $(COMPAT_NODE)/package.json $(COMPAT_NODE)/package-lock.json
	cd $(COMPAT_NODE) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The dashboard tests drive Debian's chromium (Playwright never downloads a browser here).
$(CHROMIUM):
	$(if $(filter 0,$(shell id -u)),,sudo) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(if $(filter 0,$(shell id -u)),,sudo) apt-get install -y -qq chromium

setup: $(STAMP) $(COMPAT_NODE)/node_modules/.installed $(CHROMIUM)

run: $(STAMP)
	$(BIN)/rocketq up $(ARGS)

test: setup
	$(BIN)/python -m pytest -m "not slow" -q $(PYTEST_ARGS)

test-all: setup
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

# The slow fault campaign of issue 9 alone; every test prints one `CAMPAIGN name key=value ...` line.
campaign: setup
	$(BIN)/python -m pytest -m slow -s -q tests/fault -k "campaign or race or disk_full" $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python -m benchmarks $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

typecheck: $(STAMP)
	$(BIN)/mypy

clean:
	rm -rf $(VENV) $(COMPAT_NODE)/node_modules
