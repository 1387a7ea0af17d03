# ksched — the two commands a newcomer needs: `make run` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# docker compose v2 if present, else the v1 CLI
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)

.PHONY: venv run test test-unit lint up down compose-smoke bench-cycle bench-queue bench-scale bench-baseline clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

## Start nats-server, redis-server and every service locally, schedule a demo cluster.
run: venv
	$(BIN)/ksched demo

## The whole test suite against real NATS and Redis servers started by the harness.
test: venv
	$(BIN)/python -m pytest

test-unit: venv
	$(BIN)/python -m pytest tests/unit

lint: venv
	$(BIN)/ruff check shared services tests
	$(BIN)/mypy shared services

## Production path: Docker Compose.
up:
	$(COMPOSE) up -d --build

down:
	$(COMPOSE) down -v

## Build the images, bring the stack up with 2 workers and 2 binders, schedule a workload, tear down.
compose-smoke: venv
	COMPOSE="$(COMPOSE)" $(BIN)/python -m tests.smoke.compose_smoke

## Median and p99 of one scheduling cycle at 500 and 5000 nodes (pure framework).
bench-cycle: venv
	$(BIN)/ksched bench-cycle

## Pop latency (1 pod, 64 pods) and throughput of the queue service over real NATS and Redis.
bench-queue: venv
	$(BIN)/ksched bench-queue

## Pods/s, assume conflicts and invariant 3 with 1, 2 and 4 workers on 500 nodes; snapshot refresh cost.
## SchedulingBasic in one process (no NATS, no Redis): what distribution costs.
bench-baseline: venv
	$(BIN)/ksched bench-baseline

bench-scale: venv
	$(BIN)/ksched bench-scale

clean:
	rm -rf $(VENV) .ksched-run .pytest_cache
