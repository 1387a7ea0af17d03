# ksched — the two commands a newcomer needs: `make run` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# docker compose v2 if present, else the v1 CLI
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)

.PHONY: venv run test test-unit lint chaos chaos-hosts burst up down compose-smoke bench bench-full bench-cycle bench-queue bench-scale bench-baseline bench-replicas bench-latency clean

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
	$(BIN)/python -m pytest --durations=30

test-unit: venv
	$(BIN)/python -m pytest tests/unit

lint: venv
	$(BIN)/ruff check shared services tests
	$(BIN)/mypy shared services

## The invariants under faults: 10 000 pods, 500 nodes, kill -9 every 2-6 s, Redis and NATS
## restarted; prints the invariant report (a few minutes). `make test` runs a short one.
chaos: venv
	$(BIN)/python -m shared.tools.chaos

## ksched on three hosts made of network namespaces (root, `ip netns`, iptables): under load,
## a host killed, a host cut off for 30 s, the NATS leader and the Redis primary killed -9;
## prints a report per fault (about 10 minutes). `make test` runs a short one.
chaos-hosts: venv
	$(BIN)/python -m shared.tools.chaoshosts

## A burst of 100 000 pod events absorbed and scheduled (backpressure; a few minutes).
burst: venv
	$(BIN)/python -m shared.tools.burst

## Production path: Docker Compose.
up:
	$(COMPOSE) up -d --build

down:
	$(COMPOSE) down -v

## Build the images, bring the stack up with 2 replicas of every service, schedule a workload, tear down.
compose-smoke: venv
	COMPOSE="$(COMPOSE)" $(BIN)/python -m tests.smoke.compose_smoke

## scheduler_perf's six workloads end to end at 500 nodes, worker scaling, baseline (a few minutes).
bench: venv
	$(BIN)/ksched bench

## The same at 5000 nodes with the full pod counts; results and charts in
## shared/tools/bench/results/full (the reference run kept in git, charts aside).
bench-full: venv
	$(BIN)/ksched bench --full

## Median and p99 of one scheduling cycle at 500 and 5000 nodes (pure framework).
bench-cycle: venv
	$(BIN)/ksched bench-cycle

## Pop latency (1 pod, 64 pods) and throughput of the queue service over real NATS and Redis.
bench-queue: venv
	$(BIN)/ksched bench-queue

## SchedulingBasic in one process (no NATS, no Redis): what distribution costs.
bench-baseline: venv
	$(BIN)/ksched bench-baseline

## What R3 streams cost: SchedulingBasic on one NATS server, a 3-server cluster with R1, R3, and
## R3 with fsync on every write (docs/reliability.md); a few minutes.
bench-replicas: venv
	$(BIN)/ksched bench-replicas

## SchedulingBasic at 500 nodes: the burst's rate, then pods paced at half of it; publish -> bound
## p50/p90/p99 and each stage of the way (docs/bench.md); a few minutes.
bench-latency: venv
	$(BIN)/ksched bench-latency

## Pods/s, assume conflicts and invariant 3 with 1, 2 and 4 workers on 500 nodes; snapshot refresh cost.
bench-scale: venv
	$(BIN)/ksched bench-scale

clean:
	rm -rf $(VENV) .ksched-run .pytest_cache
