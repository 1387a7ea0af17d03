"""docs/scale.md's cost model: pods/s against machines, from measured CPU per pod.

Pure arithmetic over figures measured with `ksched bench`, `bench-cycle --adaptive`
and `python -m shared.tools.bench.limits` (docs/scale.md gives each command and
run). `python -m shared.tools.bench.costmodel` prints the projection table and a
text chart of it; `--chart FILE.png` draws the same curves (matplotlib, not kept in git).

The model (every cost in ms of CPU per pod):
- a worker costs `worker_fixed(nodes) + worker_per_worker * W`: every worker applies
  every bound pod's node change to its own snapshot, so each worker added costs
  every pod a little more;
- Redis costs `redis_fixed + redis_per_worker * (W - 1)` (the refresh's reads), and
  one redis-server is one core;
- the watcher, queue and cache are one process per shard each, one core at most;
- each worker and binder process is one core at most (Python, one event loop);
- the machines' cores are all usable (no headroom, perfect packing): an upper bound.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from shared.tools.bench.report import save_chart


@dataclass(frozen=True)
class Costs:
    watcher: float
    queue: float
    cache: float
    binder: float
    nats: float  # every nats-server's CPU per pod (one replica per stream)
    worker_fixed: float  # at the model's node count, W -> 0
    worker_per_worker: float
    redis_fixed: float
    redis_per_worker: float

    def worker(self, workers: int) -> float:
        return self.worker_fixed + self.worker_per_worker * workers

    def redis(self, workers: int) -> float:
        return self.redis_fixed + self.redis_per_worker * max(workers - 1, 0)

    def singleton(self) -> float:
        return max(self.watcher, self.queue, self.cache)


@dataclass(frozen=True)
class Plan:
    rate: float  # pods/s
    workers: int
    binders: int
    shards: int
    redis_instances: int
    cores: float  # CPU the plan keeps busy

    def line(self) -> str:
        return (
            f"{self.rate:8.0f} pods/s  workers {self.workers:4d}  binders {self.binders:3d}  "
            f"shards {self.shards:3d}  redis {self.redis_instances:2d}  cores {self.cores:6.1f}"
        )


def plan(costs: Costs, rate: float) -> Plan | None:
    """The processes `rate` pods/s needs, or None if no number of workers carries it
    (each worker added makes every pod dearer for all of them)."""
    spare = 1000 - rate * costs.worker_per_worker  # ms a worker has left per second
    if spare <= 0:
        return None
    workers = max(1, math.ceil(rate * costs.worker_fixed / spare))
    binders = max(1, math.ceil(rate * costs.binder / 1000))
    shards = max(1, math.ceil(rate * costs.singleton() / 1000))
    redis_instances = max(1, math.ceil(rate * costs.redis(workers) / 1000))
    per_pod = (
        costs.watcher
        + costs.queue
        + costs.cache
        + costs.binder
        + costs.nats
        + costs.worker(workers)
        + costs.redis(workers)
    )
    return Plan(rate, workers, binders, shards, redis_instances, rate * per_pod / 1000)


def best(costs: Costs, cores: float, step: float = 100) -> Plan | None:
    """The highest rate (in `step`s) whose plan fits in `cores`."""
    found, rate = None, step
    while (p := plan(costs, rate)) is not None and p.cores <= cores:
        found, rate = p, rate + step
    return found


def ceiling(costs: Costs) -> float:
    """The rate no number of workers reaches: 1000 / worker_per_worker."""
    return 1000 / costs.worker_per_worker if costs.worker_per_worker else math.inf


# Measured on 2026-11-24 (docs/scale.md): SchedulingBasic at 5000 nodes, ms of CPU per
# pod from /proc; the worker and Redis lines fitted over seven runs with 1-8 workers;
# the cycle's growth from 5000 to 100 000 nodes from bench-cycle --adaptive
# (0.178 -> 0.696 ms).
MEASURED_5000 = Costs(
    watcher=0.163,
    queue=0.122,
    cache=0.119,
    binder=0.140,
    nats=0.096,
    worker_fixed=0.336,
    worker_per_worker=0.045,
    redis_fixed=0.042,
    redis_per_worker=0.0024,
)
CYCLE_GROWTH_TO_100K = 0.696 - 0.178


def at_100k(costs: Costs) -> Costs:
    return replace(costs, worker_fixed=costs.worker_fixed + CYCLE_GROWTH_TO_100K)


CORES_PER_MACHINE = 8
MACHINES = (1, 2, 3, 5, 7, 10, 15, 20)


def scenarios() -> list[tuple[str, Costs]]:
    """The projections docs/scale.md quotes: as measured, and what its targets need."""
    return [
        ("5000 nodes, as measured", MEASURED_5000),
        ("100 000 nodes, as measured", at_100k(MEASURED_5000)),
        (
            "100 000 nodes, refresh 0.005 ms/worker, singletons 0.05 ms",
            at_100k(
                replace(
                    MEASURED_5000, worker_per_worker=0.005, watcher=0.05, queue=0.05, cache=0.05
                )
            ),
        ),
    ]


def curve(costs: Costs, machines: Sequence[int], cores_per_machine: int) -> list[float]:
    """Pods/s the best plan reaches on each number of machines (0: none fits)."""
    rates = []
    for count in machines:
        p = best(costs, count * cores_per_machine)
        rates.append(p.rate if p else 0.0)
    return rates


def text_chart(label: str, machines: Sequence[int], rates: Sequence[float], width: int = 50) -> str:
    """One bar per machine count, scaled to the largest rate (for terminals and docs)."""
    top = max(rates, default=0.0) or 1.0
    lines = [label]
    for count, rate in zip(machines, rates, strict=True):
        bar = "#" * round(width * rate / top)
        lines.append(f"  {count:3d} machines |{bar:<{width}}| {rate:7.0f} pods/s")
    return "\n".join(lines)


def draw(path: Path, machines: Sequence[int], curves: Sequence[tuple[str, list[float]]]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for label, rates in curves:
        ax.plot(list(machines), rates, marker="o", label=label)
    ax.axhline(20_000, color="red", linestyle="--", label="issue 21's target (10 machines)")
    ax.set(
        xlabel=f"machines ({CORES_PER_MACHINE} cores each)",
        ylabel="SchedulingBasic pods/s (upper bound)",
        title="ksched cost model: projected pods/s against machines",
    )
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return save_chart(fig, path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.tools.bench.costmodel")
    parser.add_argument("--chart", type=Path, help="also draw the curves into this PNG file")
    args = parser.parse_args(argv)
    curves = []
    for label, costs in scenarios():
        print(f"{label}: no number of workers passes {ceiling(costs):.0f} pods/s")
        for machines in (1, 2, 5, 10):
            p = best(costs, machines * CORES_PER_MACHINE)
            print(f"  {machines:2d} x {CORES_PER_MACHINE} cores: {p.line() if p else 'nothing'}")
        curves.append((label, curve(costs, MACHINES, CORES_PER_MACHINE)))
    for label, rates in curves:
        print(text_chart(label, MACHINES, rates))
    if args.chart:
        print(f"chart: {draw(args.chart, MACHINES, curves)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
