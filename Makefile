# Developer and CI entry points.  `make test` is what CI runs (via .ci/run).

.DEFAULT_GOAL := test
.DELETE_ON_ERROR:
SHELL := bash
.SHELLFLAGS := -euo pipefail -c

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
# Test processes (pytest-xdist). Each starts its own servers on free ports, so
# they never share state; `--dist load` (not loadfile) because schemathesis's
# cases share one node id per test, which loadfile would run only once.
TEST_WORKERS ?= 2
UV := PYTHONPATH=$(VENV)/.tools $(VENV)/.tools/bin/uv

# The JS client's tests (clients/js/test/) start this venv's `tidings serve`.
# Node 20 has a WebSocket only behind a flag; 22 on, by default.
NODE_WS := $(shell node -e 'process.stdout.write(typeof WebSocket === "function" ? "" : "--experimental-websocket")' 2>/dev/null)

.PHONY: venv system-deps demo check docs test bench fmt cluster cluster-down lint-and-docs js-tests

# Re-install only when a pyproject.toml changes (the installs are editable):
# the package with its dev tools and the Python client (clients/python), a
# distribution of its own that the client tests and the bench import. uv
# (see `demo`) resolves and installs them in seconds; pip took minutes on a
# fresh machine, a good share of CI's time. Compiled at install, as pip
# does: where PYTHONDONTWRITEBYTECODE is set (CI sets it), each process would
# otherwise compile every module it imports, ~1.5 s of CPU a process. The
# venv keeps pip for the tests that use it.
venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml clients/python/pyproject.toml $(VENV)/.tools/bin/uv
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip >/dev/null
	$(UV) pip install -q --compile-bytecode --python $(BIN)/python -e '.[dev]' -e clients/python
	touch $@

# uv itself, outside the venv's packages, so that no install of the venv's
# own replaces the tool doing the install.
$(VENV)/.tools/bin/uv:
	$(PYTHON) -m pip install -q --target $(VENV)/.tools uv

system-deps:
	bash scripts/install-system-deps.sh

# The demo installs the package alone: no dev tools, no Redis or PostgreSQL
# drivers (it runs on the embedded default). uv, kept outside the venv's
# packages (.venv/.tools), installs it in seconds where pip takes half a
# minute; the venv gets pip only when `make venv` needs it.
demo: $(VENV)/.demo
	$(BIN)/tidings demo

$(VENV)/.demo: pyproject.toml $(VENV)/.tools/bin/uv
	test -x $(BIN)/python || $(PYTHON) -m venv --without-pip $(VENV)
	$(UV) pip install -q --python $(BIN)/python -e .
	touch $@

check: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The documentation site, into build/site/. --strict: a broken link, a missing
# page or a reference to a renamed name fails the build (and so `make test`).
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# Deps, then venv, then two things side by side (make -j 2, each one's
# output kept together): lint, types and the docs build (CPU-bound, ~40 s),
# and the JavaScript tests (mostly waiting on the servers they start): the
# web app's pure modules under Node, the JS client's types and its tests
# against a real server, getstream's own JS client (tests/getstream-js, from
# npm) against a real server on SQLite and on PostgreSQL + Redis. Then pytest
# (the 25 slowest tests named at the end). The package's bytecode is written
# first: the tests start hundreds of tidings processes, and with
# PYTHONDONTWRITEBYTECODE set none of them would keep it.
test:
	$(MAKE) system-deps
	$(MAKE) venv
	$(BIN)/python -m compileall -q -j 0 src clients/python/src
	$(MAKE) -j 2 --output-sync=target lint-and-docs js-tests
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist load --durations=25 $(PYTEST_ARGS)

lint-and-docs:
	$(MAKE) check
	$(MAKE) docs

js-tests: venv
	node --test tests/webapp/js/
	npm ci --prefix clients/js --no-audit --no-fund --loglevel=error
	npx --prefix clients/js tsc --noEmit -p clients/js
	TIDINGS_BIN=$(CURDIR)/$(BIN)/tidings node $(NODE_WS) --test clients/js/test/
	npm ci --prefix tests/getstream-js --no-audit --no-fund --loglevel=error
	TIDINGS_BIN=$(CURDIR)/$(BIN)/tidings node --test tests/getstream-js/
	GETSTREAM_DEPLOYMENT=postgres+redis TIDINGS_BIN=$(CURDIR)/$(BIN)/tidings node --test tests/getstream-js/

# The benches drive wrk and redis-benchmark besides the test suite's servers:
# installed here, so a bench never skips its rows on a fresh machine.
bench: venv
	bash scripts/install-system-deps.sh --bench
	$(BIN)/python -m bench

# A local deployment on 127.0.0.1 (PostgreSQL + replica, a Redis Cluster of
# 3 masters + 3 replicas, 2 `tidings serve`, 2 Celery workers), state in
# .cluster/; `source .cluster/cluster.env` points tidings at it.
cluster: venv
	$(MAKE) system-deps
	$(BIN)/python -m scripts.cluster up

cluster-down: venv
	$(BIN)/python -m scripts.cluster down

fmt: venv
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .
