"""docs/scale.md's cost model: pods/s against machines, from measured CPU per pod.

Pure arithmetic over figures measured with `ksched bench`, `bench-cycle --adaptive`
and `python -m shared.tools.bench.limits` (docs/scale.md gives each command and
run). `python -m shared.tools.bench.costmodel` prints the projection table and a
text chart of it; `--chart FILE.png` draws the same curves (matplotlib, not kept in git);
`--from DIR` fits the model to a `ksched bench` run's results instead of the constants
below. `ksched bench` fits it to its own SchedulingBasic runs whenever they had two
worker counts or more (`--scaling`), and reports the projection (`fit`, `project`).

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
import json
import math
import statistics
from collections.abc import Mapping, Sequence
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
    # What each shard past the first adds to the role's CPU per pod, summed over its
    # shards (a watcher shard reads every event and drops the others'; every shard pays
    # its per-batch costs on smaller batches): docs/scale.md §4
    watcher_per_shard: float = 0.0
    queue_per_shard: float = 0.0
    cache_per_shard: float = 0.0

    def worker(self, workers: int) -> float:
        return self.worker_fixed + self.worker_per_worker * workers

    def redis(self, workers: int) -> float:
        return self.redis_fixed + self.redis_per_worker * max(workers - 1, 0)

    def sharded(self) -> tuple[tuple[float, float], ...]:
        """Each sharded role's cost at one shard and what each further shard adds."""
        return (
            (self.watcher, self.watcher_per_shard),
            (self.queue, self.queue_per_shard),
            (self.cache, self.cache_per_shard),
        )

    def at_shards(self, shards: int) -> float:
        """Watcher, queue and cache together, ms per pod, summed over `shards` each."""
        return sum(cost + growth * (shards - 1) for cost, growth in self.sharded())


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
    (each worker added makes every pod dearer for all of them), or no number of
    shards (each shard added makes every pod dearer for the sharded roles)."""
    spare = 1000 - rate * costs.worker_per_worker  # ms a worker has left per second
    shards = shards_for(costs, rate)
    if spare <= 0 or shards is None:
        return None
    workers = max(1, math.ceil(rate * costs.worker_fixed / spare))
    binders = max(1, math.ceil(rate * costs.binder / 1000))
    redis_instances = max(1, math.ceil(rate * costs.redis(workers) / 1000))
    per_pod = (
        costs.at_shards(shards)
        + costs.binder
        + costs.nats
        + costs.worker(workers)
        + costs.redis(workers)
    )
    return Plan(rate, workers, binders, shards, redis_instances, rate * per_pod / 1000)


def shards_for(costs: Costs, rate: float) -> int | None:
    """The fewest shards whose every sharded role stays within one core per shard:
    rate x (cost + growth x (S - 1)) <= 1000 x S; None when no S does."""
    needed = 1
    for cost, growth in costs.sharded():
        spare = 1000 - rate * growth
        if spare <= 0:
            return None
        needed = max(needed, math.ceil(rate * (cost - growth) / spare))
    return needed


def best(costs: Costs, cores: float, step: float = 100) -> Plan | None:
    """The highest rate (in `step`s) whose plan fits in `cores`."""
    found, rate = None, step
    while (p := plan(costs, rate)) is not None and p.cores <= cores:
        found, rate = p, rate + step
    return found


def ceiling(costs: Costs) -> float:
    """The rate no number of processes reaches: 1000 / the largest per-process slope
    (each worker added costs every pod `worker_per_worker`; each shard, its growth)."""
    slopes = [costs.worker_per_worker, *(growth for _, growth in costs.sharded())]
    steepest = max(slopes)
    return 1000 / steepest if steepest > 0 else math.inf


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
    return at_nodes(costs, CYCLE_GROWTH_TO_100K)


# --- fitted to a run ------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One SchedulingBasic run: its worker and shard counts and its CPU ms per bound pod
    by role (`ksched bench`'s roles; a sharded role's figure is the sum over its
    shards)."""

    workers: int
    per_pod: Mapping[str, float]
    shards: int = 1


SHARDED_ROLES = ("watcher", "queue", "cache")


def fit(samples: Sequence[Sample]) -> Costs:
    """The model's constants from runs of one stack with different worker counts: the
    worker's and Redis's lines by least squares against W; with runs at two shard
    counts or more, each sharded role's line against the shard count (its cost at one
    shard and each further shard's growth), else its mean at the runs' count; every
    other role's mean. A slope the runs' noise makes negative counts as 0 (no worker or
    shard makes another cheaper)."""
    if len({s.workers for s in samples}) < 2:
        raise ValueError("fitting the worker line needs runs with two worker counts or more")
    worker_slope, worker_fixed = _line([(s.workers, s.per_pod["worker"]) for s in samples])
    redis_slope, redis_fixed = _line(
        [(s.workers - 1, s.per_pod.get("redis-server", 0.0)) for s in samples]
    )

    def mean(role: str) -> float:
        return statistics.fmean(s.per_pod.get(role, 0.0) for s in samples)

    sharded = {role: _by_shards(samples, role) for role in SHARDED_ROLES}
    return Costs(
        watcher=sharded["watcher"][0],
        queue=sharded["queue"][0],
        cache=sharded["cache"][0],
        binder=mean("binder"),
        nats=mean("nats-server"),
        worker_fixed=max(worker_fixed, 0.0),
        worker_per_worker=max(worker_slope, 0.0),
        redis_fixed=max(redis_fixed, 0.0),
        redis_per_worker=max(redis_slope, 0.0),
        watcher_per_shard=sharded["watcher"][1],
        queue_per_shard=sharded["queue"][1],
        cache_per_shard=sharded["cache"][1],
    )


def _by_shards(samples: Sequence[Sample], role: str) -> tuple[float, float]:
    """A sharded role's cost at one shard and each further shard's growth."""
    points = [(s.shards, s.per_pod.get(role, 0.0)) for s in samples]
    if len({shards for shards, _ in points}) < 2:
        return statistics.fmean(cost for _, cost in points), 0.0
    growth = max(_line(points)[0], 0.0)
    at_one = statistics.fmean(cost - growth * (shards - 1) for shards, cost in points)
    return max(at_one, 0.0), growth


def _line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Slope and intercept of the least-squares line through `points`."""
    xs, ys = zip(*points, strict=True)
    slope, intercept = statistics.linear_regression(xs, ys)
    return slope, intercept


def at_nodes(costs: Costs, growth: float) -> Costs:
    """`costs` at another node count: the worker's cycle `growth` ms dearer per pod
    (bench-cycle's CPU median there less at the run's node count)."""
    return replace(costs, worker_fixed=costs.worker_fixed + growth)


def project(costs: Costs, label: str) -> list[str]:
    """The fitted constants, the ceiling and the plans for 1, 2, 5 and 10 machines."""
    lines = [
        f"{label}: worker {costs.worker_fixed:.3f} + {costs.worker_per_worker:.4f} x W, "
        f"watcher {costs.watcher:.3f} + {costs.watcher_per_shard:.3f} x (S - 1), "
        f"queue {costs.queue:.3f} + {costs.queue_per_shard:.3f} x (S - 1), "
        f"cache {costs.cache:.3f} + {costs.cache_per_shard:.3f} x (S - 1), "
        f"binder {costs.binder:.3f}, nats-server {costs.nats:.3f}, redis-server "
        f"{costs.redis_fixed:.3f} + {costs.redis_per_worker:.4f} x (W - 1) ms per pod; "
        f"no number of processes passes {ceiling(costs):.0f} pods/s"
    ]
    for machines in (1, 2, 5, 10):
        p = best(costs, machines * CORES_PER_MACHINE)
        lines.append(f"  {machines:2d} x {CORES_PER_MACHINE} cores: {p.line() if p else 'nothing'}")
    return lines


def one_cache(costs: Costs) -> str:
    """What the model assumes and the code does not do yet (docs/scale.md §4)."""
    return (
        f"  (the model shards the cache as designed; built, it is one process: at most "
        f"{1000 / costs.cache:.0f} pods/s whatever the machines)"
        if costs.cache > 0
        else ""
    )


def samples_from(results: Path) -> tuple[list[Sample], int]:
    """The SchedulingBasic runs of a `ksched bench` results folder, and their nodes."""
    samples, nodes = [], 0
    for path in sorted(results.glob("SchedulingBasic-*.json")):
        run = json.loads(path.read_text())
        samples.append(Sample(run["workers"], run["cpu_s_per_1000_pods"], run.get("shards", 1)))
        nodes = run["nodes"]
    return samples, nodes


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


def fitted(
    samples: Sequence[Sample], nodes: int, cycle_cpu_ms: Mapping[int, float]
) -> list[tuple[str, Costs]]:
    """A run's model at its node count, and at each larger node count whose cycle was
    measured beside it (`cycle_cpu_ms`: node count -> the cycle's CPU median)."""
    costs = fit(samples)
    counts = ", ".join(str(w) for w in sorted({s.workers for s in samples}))
    found = [(f"{nodes} nodes, fitted to {counts} workers", costs)]
    for more, cpu in sorted(cycle_cpu_ms.items()):
        if more > nodes and nodes in cycle_cpu_ms:
            growth = cpu - cycle_cpu_ms[nodes]
            found.append((f"{more} nodes (cycle +{growth:.3f} ms)", at_nodes(costs, growth)))
    return found


def report(
    scenarios_: Sequence[tuple[str, Costs]],
) -> tuple[list[str], list[tuple[str, list[float]]]]:
    """Each scenario's projection lines, then its text chart; and the curves to draw."""
    lines, curves = [], []
    for label, costs in scenarios_:
        lines += project(costs, label)
        lines += [note] if (note := one_cache(costs)) else []
        curves.append((label, curve(costs, MACHINES, CORES_PER_MACHINE)))
    for label, rates in curves:
        lines.append(text_chart(label, MACHINES, rates))
    return lines, curves


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.tools.bench.costmodel")
    parser.add_argument("--chart", type=Path, help="also draw the curves into this PNG file")
    parser.add_argument(
        "--from",
        dest="results",
        type=Path,
        help="fit to a `ksched bench` results folder (SchedulingBasic with 2+ worker counts)",
    )
    args = parser.parse_args(argv)
    chosen = scenarios() if args.results is None else _from_results(args.results)
    lines, curves = report(chosen)
    print("\n".join(lines))
    if args.chart:
        print(f"chart: {draw(args.chart, MACHINES, curves)}")
    return 0


def _from_results(results: Path) -> list[tuple[str, Costs]]:
    samples, nodes = samples_from(results)
    summary = results / "summary.json"
    model = json.loads(summary.read_text()).get("costmodel", {}) if summary.exists() else {}
    cycle = {int(n): float(ms) for n, ms in model.get("cycle_cpu_ms", {}).items()}
    if not cycle:
        from shared.tools.bench.cycle import cycle_growth

        print("the run measured no cycle beside it: measuring it now", flush=True)
        cycle = cycle_growth(nodes)
    return fitted(samples, nodes, cycle)


if __name__ == "__main__":
    raise SystemExit(main())
