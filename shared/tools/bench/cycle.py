"""`ksched bench-cycle` (make bench-cycle): the time of one scheduling cycle.

scheduler_perf's node shape (4 cpu, 32Gi, 110 pods, 3 zones) with init pods
spread over the nodes, then one schedulePod (PreFilter .. selectHost, every
node scored) per measured pod, for the default pod (100m, 500Mi), a pod with
required hostname anti-affinity, a zone topology-spread pod and a node-affinity
pod; and one-per-node, replicas that each fill a node (opportunistic batching's
case). Opportunistic batching is on, as in the worker; `--no-batching` turns it off.
Pure framework: no NATS, no Redis. `--metrics` has the framework report its
extension points' and (sampled) plugins' durations to a Prometheus registry, as the
services do, to see what that costs a cycle.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry

from shared.config import Profile
from shared.framework.opportunistic_batch import HINT_USED, OpportunisticBatch
from shared.framework.runtime import Framework
from shared.framework.schedule_one import Scheduler
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins import REGISTRY
from shared.runtime.framework_metrics import record_frameworks
from shared.tools.synthetic import (
    HOSTNAME,
    ZONE,
    ZONES,
    add_anti_affinity,
    add_spread,
    make_node,
    make_pod,
)


def cluster(num_nodes: int, init_pods: int) -> list[NodeInfo]:
    infos = []
    for i in range(num_nodes):
        info = NodeInfo(f"node-{i:05d}")
        info.set_node(make_node(info.name, cpu="4", memory="32Gi", zone=ZONES[i % 3]))
        infos.append(info)
    for i in range(init_pods):
        pod = make_pod(f"init-{i}", labels={"app": "init", "color": "blue" if i % 2 else "red"})
        infos[i % num_nodes].add_pod(PodInfo.of(pod, i + 1))
    return infos


def default_pod(i: int) -> dict[str, Any]:
    return make_pod(f"basic-{i}")


def anti_affinity_pod(i: int) -> dict[str, Any]:
    pod = make_pod(f"anti-{i}", labels={"color": "green"})
    return add_anti_affinity(pod, "color", "green", HOSTNAME)


def spread_pod(i: int) -> dict[str, Any]:
    pod = make_pod(f"spread-{i}", labels={"app": "spread"})
    return add_spread(pod, 5, ZONE, "app", "spread")


def node_affinity_pod(i: int) -> dict[str, Any]:
    pod = make_pod(f"affinity-{i}")
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": ZONE,
                                "operator": "In",
                                "values": ["zone-a", "zone-b"],
                            }
                        ]
                    }
                ]
            }
        }
    }
    return pod


def one_per_node_pod(i: int) -> dict[str, Any]:
    return make_pod(f"wide-{i}", cpu="3")  # a second one fits no 4-cpu node


KINDS: dict[str, Callable[[int], dict[str, Any]]] = {
    "default": default_pod,
    "one-per-node": one_per_node_pod,
    "anti-affinity": anti_affinity_pod,
    "topology-spread": spread_pod,
    "node-affinity": node_affinity_pod,
}


def measure(
    num_nodes: int,
    kind: str,
    pods: int,
    with_metrics: bool = False,
    percentage: int | None = 100,
    batching: bool = True,
) -> dict[str, Any]:
    """`percentage` is percentageOfNodesToScore: 100 scores every node, None is
    kube-scheduler's adaptive default (what the worker runs with)."""
    infos = cluster(num_nodes, init_pods=num_nodes // 5)
    framework = Framework.from_profile(Profile(), REGISTRY)
    if with_metrics:
        record_frameworks([framework], CollectorRegistry())
    # No age limit: cycles are timed one by one, with the clock stopped between them.
    ob = OpportunisticBatch(framework, max_age=float("inf")) if batching else None
    scheduler = Scheduler(
        framework, percentage_of_nodes_to_score=percentage, rng=random.Random(1), opportunistic=ob
    )
    snapshot = ClusterSnapshot(infos)
    snapshot.fill_image_states()
    times, cpu = [], []
    for i in range(pods):
        pod = PodInfo.of(KINDS[kind](i), 10**6 + i)
        start, start_cpu = time.perf_counter(), time.process_time()
        result = scheduler.schedule_pod(framework.new_cycle_state(), pod, snapshot)
        # CPU time beside wall time: on a loaded machine the wall time mostly waits
        cpu.append(time.process_time() - start_cpu)
        times.append(time.perf_counter() - start)
        snapshot.add_pod(pod, result.suggested_host)
    times.sort()
    return {
        "nodes": num_nodes,
        "pod": kind,
        "cycles": pods,
        "median_ms": round(statistics.median(times) * 1000, 3),
        "median_cpu_ms": round(statistics.median(cpu) * 1000, 3),
        "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))] * 1000, 3),
        "batched": ob.attempts[HINT_USED] if ob is not None else 0,
    }


# The node count the cost model projects to (docs/scale.md §5).
MODEL_NODES = 100_000


def cycle_growth(nodes: int, larger: int = MODEL_NODES, cycles: int = 300) -> dict[int, float]:
    """The default pod's cycle, CPU median in ms, at `nodes` and at `larger` (the
    worker's adaptive percentageOfNodesToScore): what the cost model adds to a worker's
    CPU per pod for the larger cluster."""
    return {
        n: measure(n, "default", cycles, percentage=None)["median_cpu_ms"]
        for n in sorted({nodes, larger})
    }


def run_bench_cycle(args: argparse.Namespace) -> int:
    rows = []
    for num_nodes in args.nodes:
        for kind in args.kinds:
            percentage = None if args.adaptive else 100
            row = measure(
                num_nodes, kind, args.pods, args.metrics, percentage, not args.no_batching
            )
            rows.append(row)
            print(
                f"{row['nodes']:6d} nodes  {kind:16}  median {row['median_ms']:9.3f} ms"
                f"  p99 {row['p99_ms']:9.3f} ms  cpu median {row['median_cpu_ms']:9.3f} ms"
                f"  ({row['cycles']} cycles, {row['batched']} batched)",
                flush=True,
            )
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0
