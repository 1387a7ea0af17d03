"""`ksched bench-replicas` (make bench-replicas): what replicating ksched's streams costs.

SchedulingBasic on four NATS shapes, one after the other in the same run, each on a
fresh stack driven through the public subjects (runner.py):

- one nats-server, streams R1 (the default);
- a 3-server cluster on loopback (tools/natscluster.py), streams R1;
- the cluster, streams R3 (KSCHED_STREAM_REPLICAS=3);
- the cluster, streams R3, every server fsyncing each write before its ack
  (jetstream.sync_interval: always: the HA shape of compose.ha.yaml).

Each gives pods/s (measured pods over the run, first publish to last binding: a run
this short has too few one-second samples for scheduler_perf's average) and publish ->
bound latency p50/p99 of the measured pods (all published at once), then of paced
pods at one rate for all shapes (the latency of a load every shape carries). The run
starts and ends with the machine's calibration (a plain Python loop of 10M additions,
docs/bench.md): quote ratios between shapes, not lone figures.
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass, replace

from shared.runtime.service import tune_gc
from shared.tools.bench.calibration import calibrate
from shared.tools.bench.runner import BenchResult, run_workload
from shared.tools.bench.workloads import WORKLOADS
from shared.tools.devstack import temporary_stack

BASIC = WORKLOADS["SchedulingBasic"]


@dataclass(frozen=True)
class Shape:
    name: str
    nats_servers: int
    stream_replicas: int
    sync_always: bool = False


SHAPES = (
    Shape("1 server, R1", 1, 1),
    Shape("3 servers, R1", 3, 1),
    Shape("3 servers, R3", 3, 3),
    Shape("3 servers, R3, fsync always", 3, 3, sync_always=True),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--init-pods", type=int, default=500)
    parser.add_argument("--pods", type=int, default=2000, help="measured pods")
    parser.add_argument("--paced-pods", type=int, default=1000)
    parser.add_argument("--paced-rate", type=float, default=200, help="pods/s, every shape")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--binders", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600, help="seconds per phase")


def _run(shape: Shape, args: argparse.Namespace) -> BenchResult:
    size = replace(BASIC.short, nodes=args.nodes, init_pods=args.init_pods, measured_pods=args.pods)
    with temporary_stack(
        "ksched-replicas-",
        workers=args.workers,
        binders=args.binders,
        nats_servers=shape.nats_servers,
        stream_replicas=shape.stream_replicas,
        sync_always=shape.sync_always,
    ) as stack:
        return asyncio.run(
            run_workload(
                stack,
                BASIC,
                "short",
                size,
                timeout=args.timeout,
                paced_pods=args.paced_pods,
                paced_rate=args.paced_rate,
                progress=lambda line: print(line, flush=True),
            )
        )


def row(shape: Shape, r: BenchResult) -> str:
    lat, paced = r.latency_ms, r.paced
    return (
        f"| {shape.name} | {r.run_rate:.0f} | {lat.get('p50', 0):.0f} | {lat.get('p99', 0):.0f} "
        f"| {paced.get('p50', 0):.1f} | {paced.get('p99', 0):.1f} "
        f"| {r.cpu_per_1000_pods.get('nats-server', 0):.2f} | {r.bound}/{r.measured_pods} |"
    )


def run_bench_replicas(args: argparse.Namespace) -> int:
    tune_gc()
    before = calibrate()
    print(f"calibration: python loop of 10M additions {before:.3f} s", flush=True)
    rows = []
    for shape in SHAPES:
        print(f"  {shape.name}: SchedulingBasic, {args.nodes} nodes, {args.pods} pods", flush=True)
        result = _run(shape, args)
        rows.append(row(shape, result))
        print(f"    -> {rows[-1]}", flush=True)
    after = calibrate()
    print(f"calibration after: {after:.3f} s")
    print()
    print(
        f"SchedulingBasic, {args.nodes} nodes, {args.init_pods} init pods, {args.pods} "
        f"measured pods, {args.workers} workers, {args.binders} binder; paced "
        f"{args.paced_pods} pods at {args.paced_rate:g} pods/s"
    )
    print(
        "| NATS | pods/s | p50 ms (all at once) | p99 ms | paced p50 ms | paced p99 ms "
        "| nats-server cpu s / 1000 pods | bound |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for line in rows:
        print(line)
    return 0
