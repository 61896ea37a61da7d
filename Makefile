# Ferry developer entry points.
#   make run    create .venv if needed, install Ferry into it, run `ferry serve`
#   make test   install the test extras (once per pyproject.toml version), run the whole suite
# Override on the command line: make run FERRY_ARGS="--fsync always", make test PYTEST_ARGS="-x tests/gateway".

PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
FERRY_ARGS ?=
PYTEST_ARGS ?= -q

# Stamps are keyed on the content of pyproject.toml, setup.py and the C extension
# (not their mtimes), so a checkout that only touches them does not reinstall,
# and any dependency or C change does (pip install -e rebuilds core/_speedups).
PYPROJECT_KEY := $(shell cat pyproject.toml setup.py core/_speedups_le.h core/_speedups.c adapters/iggy/_speedups.c adapters/nats/_speedups.c adapters/spark/_speedups.c adapters/pravega/_speedups.c | cksum | cut -d' ' -f1)
RUN_STAMP := $(VENV)/.stamp-run-$(PYPROJECT_KEY)
TEST_STAMP := $(VENV)/.stamp-test-$(PYPROJECT_KEY)

.PHONY: run test install install-test clean-venv help
.DEFAULT_GOAL := help

help:
	@echo "make run    - start the gateway (all listeners, ./data) in .venv"
	@echo "make test   - run the test suite in .venv"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(RUN_STAMP): | $(BIN)/python
	$(BIN)/pip install -e .
	@rm -f $(VENV)/.stamp-run-*
	@touch $@

# The test extras include every runtime dependency, so they satisfy `run` too.
$(TEST_STAMP): | $(BIN)/python
	$(BIN)/pip install -e '.[test]'
	@rm -f $(VENV)/.stamp-test-* $(VENV)/.stamp-run-*
	@touch $@ $(RUN_STAMP)

install: $(RUN_STAMP)
install-test: $(TEST_STAMP)

run: $(RUN_STAMP)
	$(BIN)/ferry serve $(FERRY_ARGS)

# Real JavaScript clients (nats.js) for tests/nats/test_nats_node.py, installed
# into their own folder when node and npm are on the machine (skipped otherwise).
NODE_TESTS := tests/nats/node
NODE_STAMP := $(NODE_TESTS)/node_modules/.stamp

$(NODE_STAMP): $(NODE_TESTS)/package.json
	@if command -v npm >/dev/null 2>&1; then \
		cd $(NODE_TESTS) && npm install --no-audit --no-fund --loglevel=error && touch node_modules/.stamp; \
	else echo "npm not found: the nats.js test will be skipped"; fi

test: $(TEST_STAMP) $(NODE_STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

clean-venv:
	rm -rf $(VENV)
