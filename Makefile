# Two commands for a fresh machine: `make run` and `make test` (see README.md).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# What each kind of target installs into .venv, one stamp per kind: `make run` needs the servers
# only; `make test` adds what the suite drives (Spark, the interop clients, the dashboard, plots).
EXTRAS_run := controller
EXTRAS_test := test,compat,spark,plot,dashboard,fast,controller
EXTRAS_dev := dev
# `make bench` also installs py-spy (bench_send / bench_producer --profile).
EXTRAS_bench := test,compat,spark,plot,dashboard,fast,bench,controller
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
DEV_STAMP := $(VENV)/.installed-dev
COMPAT_NODE := tests/compat/node
COMPAT_PY5 := tests/compat/py5
CHROMIUM := /usr/bin/chromium

.PHONY: run test test-all campaign bench lint typecheck setup clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Every install includes the package and its core dependencies, so it also satisfies `make run`.
$(VENV)/.installed-%: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.$(if $(EXTRAS_$*),[$(EXTRAS_$*)])'
	touch $@ $(RUN_STAMP)

$(COMPAT_NODE)/node_modules/.installed: $(COMPAT_NODE)/package.json $(COMPAT_NODE)/package-lock.json
	cd $(COMPAT_NODE) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The official RocketMQ 5 Python client imports as `rocketmq`, like the C++ binding in .venv: it
# gets a virtualenv of its own (tests/compat/py5, docs/grpc.md).
$(COMPAT_PY5)/.venv/.installed: $(COMPAT_PY5)/requirements.txt
	$(PY) -m venv $(COMPAT_PY5)/.venv
	$(COMPAT_PY5)/.venv/bin/pip install -q -r $(COMPAT_PY5)/requirements.txt
	touch $@

# The dashboard tests drive Debian's chromium (Playwright never downloads a browser here); it is
# installed only when missing. Without its Recommends (udev, upower, xdg-utils' perl modules, ...)
# apt adds ~25 packages and upgrades none; with them it also upgraded systemd and perl.
$(CHROMIUM):
	$(if $(filter 0,$(shell id -u)),,sudo) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(if $(filter 0,$(shell id -u)),,sudo) \
		apt-get install -y -qq --no-install-recommends chromium

setup: $(TEST_STAMP) $(COMPAT_NODE)/node_modules/.installed $(COMPAT_PY5)/.venv/.installed $(CHROMIUM)

run: $(RUN_STAMP)
	$(BIN)/rocketq up $(ARGS)

test: setup
	$(BIN)/python -m pytest -m "not slow" -q $(PYTEST_ARGS)

test-all: setup
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

# The slow fault campaign of issue 9 alone; every test prints one `CAMPAIGN name key=value ...` line.
campaign: setup
	$(BIN)/python -m pytest -m slow -s -q tests/fault -k "campaign or race or disk_full" $(PYTEST_ARGS)

bench: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks $(ARGS)

lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

typecheck: $(DEV_STAMP)
	$(BIN)/mypy

clean:
	rm -rf $(VENV) $(COMPAT_NODE)/node_modules $(COMPAT_PY5)/.venv
