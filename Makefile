# Ferry developer entry points.
#   make run    create .venv if needed, install Ferry into it, run `ferry serve`
#   make test   install the test extras (once per pyproject.toml version), run the whole suite
#   make test-fast  the unit tier only (no sockets, no processes; tests/conftest.py)
# Override on the command line: make run FERRY_ARGS="--fsync always", make test PYTEST_ARGS="-x tests/gateway".
# Python: the first of python3.13, python3.12, python3.11, python3 on PATH that
# runs and is >= 3.11; PYTHON=/path/to/python (or PYTHON=python3.12 make run) chooses.

PYTHON_CANDIDATES := python3.13 python3.12 python3.11 python3
# Each candidate is *run*, not only looked up: a pyenv shim for a version that is
# not selected exists on PATH but fails, and python3 may be older than 3.11.
PYTHON_OK := import sys; sys.exit(sys.version_info < (3, 11))
ifeq ($(origin PYTHON),undefined)
PYTHON := $(shell for p in $(PYTHON_CANDIDATES); do \
	if command -v $$p >/dev/null 2>&1 && $$p -c '$(PYTHON_OK)' >/dev/null 2>&1; then echo $$p; break; fi; done)
endif
VENV ?= .venv
BIN := $(VENV)/bin
FERRY_ARGS ?=
# make exports variables given on its command line (and those it got from the
# environment) to every recipe, so `make run FERRY_ARGS=...` would hand `ferry
# serve` a FERRY_ARGS variable, which its config refuses as an unknown FERRY_*
# key (gateway/config.py keeps that an error: it catches typos). It is make's
# variable, not the server's: keep it out of the recipes' environment. A new
# make variable whose name starts with FERRY_ goes here too.
unexport FERRY_ARGS
PYTEST_ARGS ?= -q
# Parallel workers (pytest-xdist). Most real-client tests wait on sockets and child
# processes, so twice the cores keeps a 2-core machine busy; TEST_WORKERS=0 runs in
# this process. loadfile keeps a file's tests on one worker, in order, so a module-scoped
# server starts once per file. (loadgroup's xdist_group marks were not honoured by
# pytest-xdist 3.8 under pytest 9: tests of one group ran on two workers.)
# --no-loadscope-reorder keeps tests/conftest.py's longest-files-first order (xdist
# would otherwise hand out files by number of tests, leaving the long ones for last).
TEST_WORKERS ?= 4
XDIST = -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
# The unit tier only computes: one worker per core. Each worker collects the whole
# suite (about 18 s of CPU), so two more workers only cost two more collections.
FAST_WORKERS ?= 2
# pytest keeps the assertion-rewritten test modules in __pycache__ unless bytecode
# writing is off; an environment that turns it off (PYTHONDONTWRITEBYTECODE) made
# every worker of every run rewrite all ~460 test modules again (about 8 s of CPU each).
unexport PYTHONDONTWRITEBYTECODE
# pip's output goes here, not to the terminal; shown (its path, its exit code
# and its last lines) only when an install fails.
INSTALL_LOG := $(VENV)/install.log
export PIP_DISABLE_PIP_VERSION_CHECK := 1

# Stamps are keyed on the content of pyproject.toml, setup.py and the C extension
# (not their mtimes), so a checkout that only touches them does not reinstall,
# and any dependency or C change does (pip install -e rebuilds core/_speedups).
PYPROJECT_KEY := $(shell cat pyproject.toml setup.py core/_speedups_le.h core/_speedups.c adapters/iggy/_speedups.c adapters/nats/_speedups.c adapters/spark/_speedups.c adapters/spark/_sinkenc.c adapters/pravega/_speedups.c adapters/kafka/_speedups.c | cksum | cut -d' ' -f1)
RUN_STAMP := $(VENV)/.stamp-run-$(PYPROJECT_KEY)
TEST_STAMP := $(VENV)/.stamp-test-$(PYPROJECT_KEY)

# $(call quiet_pip,WHAT,ARGS): one progress line, pip's output to the log; on
# failure the log's path, pip's exit code and the log's last lines, then stop.
define quiet_pip
	@echo "installing $(1) into $(VENV) (first run only)..."
	@$(BIN)/python -m pip install $(2) >$(INSTALL_LOG) 2>&1; rc=$$?; \
	if [ $$rc -ne 0 ]; then \
		echo "pip install failed (exit code $$rc); full output in $(INSTALL_LOG), its end:" >&2; \
		tail -n 15 $(INSTALL_LOG) >&2; exit $$rc; fi
endef

.PHONY: run test test-fast test-pure install install-test clean-venv help print-python rdkafka-suite pravega-suite fuzz fault-schedule
.DEFAULT_GOAL := help

help:
	@echo "make run    - start the gateway (all listeners, ./data) in .venv"
	@echo "make test   - run the test suite in .venv"
	@echo "make test-fast - the unit tier only (no sockets, no processes), in a few minutes"
	@echo "make test-pure - the same suite with FERRY_PURE_PYTHON=1 (no compiled loops)"
	@echo "make rdkafka-suite - librdkafka's own tests against ferry serve (about 10 minutes after a 5-minute first build; RDKAFKA_ARGS=\"--tests 0001-0030\")"
	@echo "make pravega-suite - the pravega 0.3.8 Python client's own tests against ferry serve, as configured and with a 50 ms slower fsync (about 2 minutes; PRAVEGA_SUITE_ARGS=\"-k Reader\")"
	@echo "make fault-schedule - a 1-minute fault schedule over a 3-node cluster and two gateways, then the history check (about 2 minutes)"
	@echo "make fuzz - coverage-guided fuzzing (atheris), FUZZ_SECONDS=60 per target, FUZZ_TARGETS=\"iggy_command nats_server\" to choose"
	@echo "PYTHON=python3.12 make run - create .venv with that interpreter (default: $(or $(PYTHON),none found))"

print-python:
	@echo "$(PYTHON)"

$(BIN)/python:
	@if [ -z "$(PYTHON)" ]; then \
		echo "no Python >= 3.11 found (tried $(PYTHON_CANDIDATES)); install one, or run PYTHON=/path/to/python3.11 make $(or $(MAKECMDGOALS),run)" >&2; \
		exit 2; fi
	@$(PYTHON) -c '$(PYTHON_OK)' 2>/dev/null || { \
		echo "PYTHON=$(PYTHON): not a Python >= 3.11 ($$($(PYTHON) --version 2>&1 | head -n 1))" >&2; exit 2; }
	@$(PYTHON) -m venv $(VENV)

$(RUN_STAMP): | $(BIN)/python
	$(call quiet_pip,Ferry,-e .)
	@rm -f $(VENV)/.stamp-run-*
	@touch $@

# The test extras include every runtime dependency, so they satisfy `run` too.
$(TEST_STAMP): | $(BIN)/python
	$(call quiet_pip,Ferry and its test tools,-e '.[test]')
	@rm -f $(VENV)/.stamp-test-* $(VENV)/.stamp-run-*
	@touch $@ $(RUN_STAMP)

install: $(RUN_STAMP)
install-test: $(TEST_STAMP)

run: $(RUN_STAMP)
	@$(BIN)/ferry serve $(FERRY_ARGS)

# Real JavaScript clients, each installed into its own folder when node and npm are on
# the machine (their tests skip otherwise): nats.js for tests/nats/test_nats_node.py,
# kafkajs for tests/kafka/test_kafka_clients.py. One rule for both: a folder's stamp
# is remade when its package.json changes.
NODE_STAMP := tests/nats/node/node_modules/.stamp
KAFKA_NODE_STAMP := tests/kafka/node/node_modules/.stamp

%/node_modules/.stamp: %/package.json
	@if command -v npm >/dev/null 2>&1; then \
		echo "installing the JavaScript clients of $* into $*/node_modules..."; \
		cd $* && npm install --no-audit --no-fund --loglevel=error >/dev/null && touch node_modules/.stamp; \
	else echo "npm not found: the tests using $* will be skipped"; fi

# The second run: the real-client tests marked `store` again, with every gateway they
# start keeping its state in a 3-node nats-server JetStream cluster (docs/scale-out.md).
# Each worker starts its own cluster (3 nats-server processes), so fewer workers: on the
# 2-core machine 75 tests took 2m10s with 2 workers and 5m04s with 4 (docs/testing.md).
STORE_WORKERS ?= 2
STORE_PASS = FERRY_TEST_STORE=jetstream $(BIN)/pytest -n $(STORE_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS) \
	-m "store and not embedded_only"

# The whole suite prints its ten slowest tests: the figures issue 24 (a faster test tier)
# is measured by, from every CI run. The store pass is its own step.
test: $(TEST_STAMP) $(NODE_STAMP) $(KAFKA_NODE_STAMP)
	@$(BIN)/pytest $(XDIST) --durations=10 $(PYTEST_ARGS)
	@$(STORE_PASS)

# The unit tier: codecs, state machines and the core on a temporary directory.
test-fast: $(TEST_STAMP)
	@$(BIN)/pytest -n $(FAST_WORKERS) --dist loadfile --no-loadscope-reorder -m unit $(PYTEST_ARGS)

# The same suite on the Python twins of every compiled loop (docs/internals.md
# "Compiled loops"): what runs where no C compiler was found.
test-pure: $(TEST_STAMP) $(NODE_STAMP) $(KAFKA_NODE_STAMP)
	@FERRY_PURE_PYTHON=1 $(BIN)/pytest $(XDIST) $(PYTEST_ARGS)

# librdkafka's own test suite against `ferry serve` (docs/kafka.md "librdkafka's test
# suite"): the first run fetches and builds it into ~/.cache/ferry/rdkafka-suite (needs
# npm and a C toolchain, about 5 minutes), then each test runs alone against a gateway
# started for the run: about 10 minutes more, too long for `make test`.
# RDKAFKA_ARGS="--tests 0001,0030-0040" picks tests (--help lists the options).
RDKAFKA_ARGS ?=
rdkafka-suite: $(RUN_STAMP)
	@$(BIN)/python tests/kafka/librdkafka/run_suite.py $(RDKAFKA_ARGS)

# The Pravega Python client's own tests (pravega 0.3.8 = tag v0.3.8) against `ferry serve`
# (docs/pravega.md "The client's own tests"): the first run fetches the release's sdist from
# PyPI and makes a python3.11 venv in ~/.cache/ferry/pravega-suite; then the 14 tests run
# twice, each time against a new gateway, the second with every fdatasync 50 ms slower and
# every read checked against the acknowledged appends: about 2 minutes, not in `make test`.
# PRAVEGA_SUITE_ARGS="-k Reader --fsync-delays 0" picks tests and runs (--help lists the options).
PRAVEGA_SUITE_ARGS ?=
pravega-suite: $(RUN_STAMP)
	@$(BIN)/python tests/pravega/client_suite/run_suite.py $(PRAVEGA_SUITE_ARGS)

# The scale-out fault schedule, short (docs/scale-out.md "Fault schedule"): one minute of
# SIGKILL/SIGSTOP/restarts over a 3-node nats-server cluster and two gateways, then the
# history check (tests/gateway/test_fault_schedule.py). About 2 minutes of both cores: not
# in `make test`. The ten-minute runs: bench/fault_schedule.py --seed N.
fault-schedule: $(TEST_STAMP)
	@FERRY_FAULT_SCHEDULE=1 $(BIN)/pytest -p no:cacheprovider $(PYTEST_ARGS) tests/gateway/test_fault_schedule.py

# Coverage-guided fuzzing of the decoders (issue 30, docs/testing.md "Fuzzing"): each
# target of tests/fuzz/targets.py for FUZZ_SECONDS under atheris/libFuzzer, one after
# the other (each is one process on one core). Seeds are copied to a temporary folder,
# so the repository does not grow; crash inputs go to FUZZ_CRASHES. Exit 1 if any
# target crashed. The issue's definition of done: make fuzz FUZZ_SECONDS=600.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= $(shell $(BIN)/python -c "import sys; sys.path.insert(0, 'tests/fuzz'); import targets; print(' '.join(targets.TARGETS))" 2>/dev/null)
FUZZ_CRASHES ?= $(VENV)/fuzz-crashes
fuzz: $(TEST_STAMP)
	@mkdir -p $(FUZZ_CRASHES); failed=""; \
	for t in $(FUZZ_TARGETS); do \
		echo "== fuzz $$t for $(FUZZ_SECONDS) s"; \
		$(BIN)/python tests/fuzz/run.py $$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -print_final_stats=1 \
			-artifact_prefix=$(FUZZ_CRASHES)/$$t- || failed="$$failed $$t"; \
	done; \
	if [ -n "$$failed" ]; then echo "crashed:$$failed (inputs in $(FUZZ_CRASHES))" >&2; exit 1; fi

clean-venv:
	rm -rf $(VENV)
