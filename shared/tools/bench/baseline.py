"""`ksched bench-baseline`: the same queue, framework and plugins in one process.

No NATS, no Redis, no other processes: pods go into the pure SchedulingQueue, are
popped, scheduled against the snapshot and assumed on it, one after another, the
way a single kube-scheduler runs scheduleOne. What distribution costs is the gap
between this and the services' throughput on the same workload (issue 6).
Throughput is scheduler_perf's SchedulingThroughput (shared/tools/bench/perf.py).
"""

from __future__ import annotations

import argparse
import random
import time

from services.queue.queue import SchedulingQueue
from shared.config import Profile
from shared.framework.cycle_state import CycleState
from shared.framework.diagnosis import FitError
from shared.framework.runtime import Framework
from shared.framework.schedule_one import Scheduler
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.types import PodInfo
from shared.plugins import REGISTRY
from shared.tools.bench.cycle import cluster
from shared.tools.bench.perf import SAMPLE_INTERVAL, ThroughputCollector
from shared.tools.synthetic import make_pod


def run_scheduling_basic(nodes: int, init_pods: int, pods: int) -> dict[str, float]:
    """scheduler_perf's SchedulingBasic: default pods (100m, 500Mi) onto nodes of
    4 cpu / 32Gi in 3 zones, after `init_pods` already placed."""
    snapshot = ClusterSnapshot(cluster(nodes, init_pods))
    snapshot.fill_image_states()
    scheduler = Scheduler(Framework.from_profile(Profile(), REGISTRY), rng=random.Random(1))
    queue = SchedulingQueue(time.monotonic)
    for i in range(pods):
        raw = make_pod(f"basic-{i}")
        queue.add(f"default/basic-{i}", f"uid-{i}", raw, i + 1)
    collector = ThroughputCollector()
    bound = unschedulable = 0
    start = next_sample = time.perf_counter()
    while True:
        popped = queue.pop(64)
        if not popped:
            break
        for qpi in popped:
            pod = PodInfo.of(qpi.raw, qpi.seq)
            try:
                result = scheduler.schedule_pod(CycleState(), pod, snapshot)
            except FitError as err:
                unschedulable += 1
                plugins = sorted(err.diagnosis.unschedulable_plugins)
                queue.failed(
                    qpi.key, qpi.cycle, unschedulable=True, message=err.message(), plugins=plugins
                )
                continue
            snapshot.add_pod(pod, result.suggested_host)
            queue.assumed(qpi.key, qpi.cycle)
            bound += 1
            now = time.perf_counter()
            if now >= next_sample:
                collector.sample(now, bound)
                next_sample = now + SAMPLE_INTERVAL
    seconds = time.perf_counter() - start
    summary = collector.summary()
    return {
        "pods": pods,
        "bound": bound,
        "unschedulable": unschedulable,
        "seconds": seconds,
        "pods_per_s": bound / seconds if seconds else 0.0,
        **{f"throughput_{k}": v for k, v in summary.items()},
    }


def run_bench_baseline(args: argparse.Namespace) -> int:
    r = run_scheduling_basic(args.nodes, args.init_pods, args.pods)
    throughput = (
        f"SchedulingThroughput avg {r['throughput_Average']:.0f} p50 "
        f"{r['throughput_Perc50']:.0f} p99 {r['throughput_Perc99']:.0f}"
        if "throughput_Average" in r
        else "SchedulingThroughput - (run shorter than 2 s)"
    )
    print(
        f"bench-baseline SchedulingBasic in one process: {args.nodes} nodes, "
        f"{args.init_pods} init pods, {int(r['pods'])} pods: {int(r['bound'])} bound, "
        f"{int(r['unschedulable'])} unschedulable in {r['seconds']:.2f} s, "
        f"{r['pods_per_s']:.0f} pods/s; {throughput}",
        flush=True,
    )
    return 0
