# pgmem — see README.md. Every target installs what it needs (via `make setup`) first.
SHELL := /bin/bash
VENV  ?= .venv
PY    := $(VENV)/bin/python
PGMEM := $(VENV)/bin/pgmem
PYTEST_ARGS ?=
# pytest-xdist workers for make test / test-fast: each has its own template database on the one
# test cluster; modules stay whole on a worker (--dist loadfile: their module fixtures are built once)
TEST_WORKERS ?= 2
BENCH_N ?= 100000
# LoCoMo for `make eval` (bench/locomo.py): a path to LoCoMo's JSON; default the dev half beside the
# repository when it exists. LOCOMO_ARGS passes options (e.g. --rankings search,hybrid --reuse).
LOCOMO ?= $(firstword $(wildcard ../shared/eval/locomo-dev.json ../../shared/eval/locomo-dev.json))
LOCOMO_ARGS ?=

.PHONY: setup db db-down demo test test-fast bench eval load clean distclean

setup: ## install Debian packages, build pgvector, create .venv (idempotent)
	@bash scripts/setup.sh

db: setup ## create/start the embedded cluster under .pgmem and apply migrations
	@$(PGMEM) db up

db-down: ## stop the embedded cluster
	@$(PGMEM) db down

demo: setup ## the README's first command: ingest a conversation, query it, show scores
	@$(PY) examples/demo.py

test: setup ## the whole test suite against a real cluster (.pgmem/test), in parallel
	@$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test-fast: setup ## the suite without its slow, multi-cluster and process tests (a few minutes)
	@$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not slow and not cluster and not process" $(PYTEST_ARGS)

bench: setup ## benchmark (BENCH_N memories) -> bench/results/
	@$(PY) bench/bench.py --n $(BENCH_N)
	@$(PY) bench/shard_bench.py  # scale-out (issue 19): search through the PL/Proxy proxy, the hop's cost

eval: setup ## retrieval quality: bench/data, then LoCoMo (LOCOMO=path) -> bench/results/{eval,locomo}-*.json
	@$(PY) bench/eval.py
	@if [ -n "$(LOCOMO)" ]; then $(PY) bench/locomo.py --data "$(LOCOMO)" $(LOCOMO_ARGS); \
	 else echo "LoCoMo: skipped (no data): make eval LOCOMO=path/to/locomo10.json (https://github.com/snap-research/LoCoMo, data/locomo10.json)"; fi

load: setup ## 8 clients, 60 s, remember/search mix + merge job
	@$(PY) bench/load.py --bench-data

clean: ## stop clusters, remove test cluster and caches (keeps .venv and .pgmem data)
	-@$(PGMEM) db down 2>/dev/null || true
	rm -rf .pgmem/test .pytest_cache

distclean: clean ## also remove the embedded cluster's data and the venv
	rm -rf .pgmem $(VENV)
