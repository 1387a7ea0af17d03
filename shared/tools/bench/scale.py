"""`ksched bench-scale` (make bench-scale): scale-out of the scheduling step, measured.

For each worker count (1, 2, 4; 2 binders), a fresh stack (nats-server,
redis-server, every service as a process) and 500 nodes (4 cpu, 16Gi, 110 pods,
3 zones); then, one after the other on that cluster, published on the public
subjects as a user does:
  - default:       5000 pods of 100m / 500Mi;
  - anti-affinity: pods in groups, each group with required hostname
                   anti-affinity to itself (a group of 500 fills every node once);
  - spread:        pods in groups, each group spread over zones, maxSkew 1,
                   DoNotSchedule.
A run ends when every pod is bound or reported unschedulable and the cache's
commits equal the bindings. Per run: pods/s (bound pods over the time from the
first publish to the end), assume conflicts (the workers' counter; by plugin
from the cache's), conflict rate (conflicts / assumes tried at the cache), and
invariant 3 audited on the whole cluster (shared/tools/invariants.audit): overcommitted
nodes, violated constraints (host ports, anti-affinity, spread), double bindings.
Then the cost of a worker's snapshot refresh (shared/tools/bench/refresh.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import nats
import redis.asyncio as aioredis

from shared import keys
from shared.runtime.connections import connect_redis
from shared.tools.bench.perf import SAMPLE_INTERVAL, ThroughputCollector
from shared.tools.bench.refresh import print_refresh, refresh_costs
from shared.tools.client import PodTracker, publish_all
from shared.tools.devstack import LocalStack, temporary_stack
from shared.tools.invariants import audit
from shared.tools.observe import PipelineCounters, pipeline_counters, settle
from shared.tools.synthetic import ZONE, ZONES, add_anti_affinity, add_spread, make_node, make_pod


@dataclass
class RunResult:
    workers: int
    run: str
    pods: int
    seconds: float
    bound: int
    unschedulable: int
    conflicts: int
    assumes_tried: int  # at the cache: committed + refused
    conflicts_by_plugin: dict[str, int]
    scheduler_errors: int  # attempts that ended in an error (conflicts beyond the retries)
    overcommitted_nodes: int
    violated_constraints: int
    double_bindings: int
    violations: list[str] = field(default_factory=list)
    # scheduler_perf's SchedulingThroughput over the run (empty for runs under 2 s).
    throughput: dict[str, float] = field(default_factory=dict)

    @property
    def pods_per_s(self) -> float:
        return self.bound / self.seconds if self.seconds else 0.0

    @property
    def conflict_rate(self) -> float:
        return self.conflicts / self.assumes_tried if self.assumes_tried else 0.0


def workloads(args: argparse.Namespace) -> list[tuple[str, list[dict[str, Any]]]]:
    default = [make_pod(f"default-{i}") for i in range(args.pods)]
    anti = []
    for i in range(args.anti_pods):
        group = f"anti-{i // args.anti_group}"
        pod = make_pod(f"anti-{i}", labels={"anti": group})
        anti.append(add_anti_affinity(pod, "anti", group))
    spread = []
    for i in range(args.spread_pods):
        group = f"spread-{i // args.spread_group}"
        pod = make_pod(f"spread-{i}", labels={"spread": group})
        spread.append(add_spread(pod, 1, ZONE, "spread", group))
    return [("default", default), ("anti-affinity", anti), ("spread", spread)]


def key(pod: dict[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


class Session:
    """One stack's cluster, its runs, and what every run published so far."""

    def __init__(self, stack: LocalStack, tracker: PodTracker, redis: aioredis.Redis) -> None:
        self.stack = stack
        self.tracker = tracker
        self.redis = redis
        self.nodes: list[dict[str, Any]] = []
        self.pods: dict[str, dict[str, Any]] = {}

    def ports(self, service: str) -> list[int]:
        return [s.http_port for s in self.stack.services if s.name == service]

    async def counters(self) -> PipelineCounters:
        return await pipeline_counters(self.ports("worker"), self.ports("cache"))

    async def _sample(self, collector: ThroughputCollector, pod_keys: list[str]) -> None:
        """Every second, how many of the run's pods are bound (scheduler_perf's way)."""
        while True:
            await asyncio.sleep(SAMPLE_INTERVAL)
            pods = self.tracker.pods
            bound = sum(1 for k in pod_keys if k in pods and pods[k].node)
            collector.sample(time.perf_counter(), bound)

    async def run(
        self, js: Any, name: str, pods: list[dict[str, Any]], timeout: float
    ) -> RunResult:
        counters0 = await self.counters()
        pod_keys = [key(p) for p in pods]
        self.pods.update(zip(pod_keys, pods, strict=True))
        start = time.perf_counter()
        collector = ThroughputCollector()
        sampling = asyncio.create_task(self._sample(collector, pod_keys))
        try:
            await publish_all(js, pods)
            await settle(self.tracker, self.redis, pod_keys, timeout)
        finally:
            sampling.cancel()
        seconds = time.perf_counter() - start
        counted = (await self.counters()).minus(counters0)
        views = [self.tracker.pods[k] for k in pod_keys]
        bound_all = {k: v.node for k, v in self.tracker.pods.items() if v.node and k in self.pods}
        report = audit(self.nodes, self.pods, bound_all)
        return RunResult(
            workers=sum(1 for s in self.stack.services if s.name == "worker"),
            run=name,
            pods=len(pods),
            seconds=seconds,
            bound=sum(1 for v in views if v.node),
            unschedulable=sum(1 for v in views if not v.node),
            conflicts=counted.conflicts,
            assumes_tried=counted.assumes_tried,
            conflicts_by_plugin={p or "?": int(n) for p, n in counted.refused_by_plugin.items()},
            scheduler_errors=counted.errors,
            overcommitted_nodes=len(report.overcommitted),
            violated_constraints=report.violated_constraints,
            double_bindings=sum(1 for v in self.tracker.pods.values() if v.bind_count > 1),
            violations=report.lines()[:10],
            throughput=collector.summary(),
        )


async def _wait_for_nodes(redis: aioredis.Redis, count: int, timeout: float = 60) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while await redis.hlen(keys.CACHE_NODEINFO) < count:
        if loop.time() > deadline:
            raise TimeoutError(f"the cache did not get {count} nodes")
        await asyncio.sleep(0.05)


async def _measure(stack: LocalStack, args: argparse.Namespace) -> list[RunResult]:
    nc = await nats.connect(stack.nats_url)
    redis = connect_redis(stack.redis_url)
    try:
        tracker = PodTracker()
        await tracker.start(nc)
        session = Session(stack, tracker, redis)
        js = nc.jetstream()
        session.nodes = [
            make_node(f"node-{i:04d}", zone=ZONES[i % len(ZONES)]) for i in range(args.nodes)
        ]
        await publish_all(js, session.nodes)
        await _wait_for_nodes(redis, args.nodes)
        results = []
        for name, pods in workloads(args):
            if pods:
                results.append(await session.run(js, name, pods, args.timeout))
                _print_run(results[-1])
        return results
    finally:
        await redis.aclose()
        await nc.close()


def _throughput(summary: dict[str, float]) -> str:
    if not summary:
        return "SchedulingThroughput -"
    return (
        f"SchedulingThroughput avg {summary['Average']:.0f} p50 {summary['Perc50']:.0f} "
        f"p90 {summary['Perc90']:.0f} p99 {summary['Perc99']:.0f}"
    )


def _print_run(r: RunResult) -> None:
    by_plugin = ", ".join(f"{p} {n}" for p, n in r.conflicts_by_plugin.items()) or "none"
    print(
        f"  {r.workers} worker(s)  {r.run:<13} {r.pods:5d} pods  {r.seconds:6.2f} s  "
        f"{r.pods_per_s:6.0f} pods/s  {_throughput(r.throughput)}  conflicts {r.conflicts:4d} "
        f"(rate {r.conflict_rate:6.2%}; {by_plugin})  scheduler errors {r.scheduler_errors}  "
        f"bound {r.bound}  "
        f"unschedulable {r.unschedulable}  overcommitted nodes {r.overcommitted_nodes}  "
        f"violated constraints {r.violated_constraints}  double bindings {r.double_bindings}",
        flush=True,
    )
    for line in r.violations:
        print(f"      ! {line}", flush=True)


def run_bench_scale(args: argparse.Namespace) -> int:
    results: list[RunResult] = []
    if not args.skip_runs:
        print(
            f"bench-scale: {args.nodes} nodes, {args.binders} binders, workers "
            f"{' '.join(map(str, args.workers))}; runs: {args.pods} default pods, "
            f"{args.anti_pods} anti-affinity pods (groups of {args.anti_group}), "
            f"{args.spread_pods} spread pods (groups of {args.spread_group})",
            flush=True,
        )
        for workers in args.workers:
            with temporary_stack(
                "ksched-bench-scale-", workers=workers, binders=args.binders
            ) as stack:
                results += asyncio.run(_measure(stack, args))
    refresh = [] if args.skip_refresh else refresh_costs(args.refresh_nodes, args.refresh_pods)
    if refresh:
        print_refresh(refresh)
    if args.json:
        print(
            json.dumps(
                {
                    "runs": [
                        {**asdict(r), "pods_per_s": r.pods_per_s, "conflict_rate": r.conflict_rate}
                        for r in results
                    ],
                    "refresh": refresh,
                },
                indent=2,
            )
        )
    failed = any(
        r.overcommitted_nodes or r.violated_constraints or r.double_bindings for r in results
    )
    return 1 if failed else 0
