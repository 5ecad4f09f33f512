# Colonnade — `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
UV ?= $(shell command -v uv 2>/dev/null)
ifeq ($(strip $(UV)),)
UV := $(PYTHON) -m uv
endif
RUN := $(UV) run --frozen
CASSANDRA_DIR ?= $(HOME)/.cache/colonnade/cassandra
KAFKA_DIR ?= $(HOME)/.cache/colonnade/kafka
KAFKA_PORT ?= 9092
# `make test` runs its own node and broker in directories it empties first: a test run never
# depends on (or waits for) what a development node or earlier runs left behind.
TEST_CASSANDRA_DIR ?= $(HOME)/.cache/colonnade/test-cassandra
TEST_KAFKA_DIR ?= $(HOME)/.cache/colonnade/test-kafka
PYTEST_ARGS ?=

.PHONY: help setup demo test test-unit test-cluster lint bench bench-cassandra cassandra-start cassandra-stop kafka-start kafka-stop clean

help: ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}'

setup: ## Install uv from PyPI (if missing) and the locked dependencies into .venv, compiled to bytecode (commands start fast)
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv
	@$(UV) sync --frozen --quiet --compile-bytecode

demo: setup ## Generate 1M GDELT-shaped rows, ingest them into ./colonnade.db, run the study's queries
	@$(RUN) colonnade demo

test: setup ## Run every test (3-node cluster test included): starts a fresh local Cassandra node and Kafka broker (`colonnade cassandra|kafka start`), stops them after
	@$(RUN) colonnade kafka stop --dir $(TEST_KAFKA_DIR) >/dev/null; $(RUN) colonnade cassandra stop --dir $(TEST_CASSANDRA_DIR) >/dev/null
	@rm -rf $(TEST_CASSANDRA_DIR) $(TEST_KAFKA_DIR)
	@$(RUN) colonnade cassandra start --dir $(TEST_CASSANDRA_DIR)
	@$(RUN) colonnade kafka start --dir $(TEST_KAFKA_DIR) --port $(KAFKA_PORT) || { $(RUN) colonnade cassandra stop --dir $(TEST_CASSANDRA_DIR); exit 1; }
	@status=0; COLONNADE_TEST_CASSANDRA=127.0.0.1:9042 COLONNADE_TEST_CASSANDRA_LOCAL=1 COLONNADE_TEST_KAFKA=127.0.0.1:$(KAFKA_PORT) \
	  $(RUN) pytest $(PYTEST_ARGS) || status=$$?; \
	  $(RUN) colonnade kafka stop --dir $(TEST_KAFKA_DIR); \
	  $(RUN) colonnade cassandra stop --dir $(TEST_CASSANDRA_DIR); exit $$status

test-unit: setup ## Run the tests that need no Cassandra and no Kafka
	@$(RUN) pytest -m "not cassandra and not cluster and not kafka" $(PYTEST_ARGS)

test-cluster: setup ## Run the 3-node cluster tests (starts and stops its own nodes)
	@$(RUN) pytest -m cluster $(PYTEST_ARGS)

lint: setup ## ruff and mypy
	@$(RUN) ruff check src tests
	@$(RUN) mypy src

bench: setup ## GDELT benchmark on the embedded store against DuckDB over Parquet (ROWS=4037539)
	@$(RUN) colonnade bench gdelt --rows $${ROWS:-4037539} --store sqlite:///bench-results/bench.db --out bench-results

bench-cassandra: setup ## GDELT layout study on a local Cassandra node (ROWS=4037539)
	@$(RUN) colonnade cassandra start --dir $(CASSANDRA_DIR)
	@$(RUN) colonnade bench gdelt --rows $${ROWS:-4037539} --store cassandra://127.0.0.1/bench --out bench-results

cassandra-start: setup ## Start a local Cassandra node
	@$(RUN) colonnade cassandra start --dir $(CASSANDRA_DIR)

cassandra-stop: setup ## Stop the local Cassandra node
	@$(RUN) colonnade cassandra stop --dir $(CASSANDRA_DIR)

kafka-start: setup ## Start a local Kafka broker on 127.0.0.1:9092 (KAFKA_PORT=N for another port)
	@$(RUN) colonnade kafka start --dir $(KAFKA_DIR) --port $(KAFKA_PORT)

kafka-stop: setup ## Stop the local Kafka broker
	@$(RUN) colonnade kafka stop --dir $(KAFKA_DIR)

clean: ## Remove build outputs and the local store
	rm -rf .venv .pytest_cache .ruff_cache .mypy_cache colonnade.db colonnade.db-wal colonnade.db-shm
