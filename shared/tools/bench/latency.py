"""Where a pod's publish -> bound time goes: its stages, from the stamps on its binding.

A pod's moments, in order: the driver's publish (wall clock just before it), the
hops ksched's services stamp (shared/stages.py, read off the binding's Ksched-Stages
header) and the binding's storage in the stream (its JetStream timestamp). Each stage
runs from one moment to the next; a pod missing a stamp (a queue restored from Redis
keeps none) has that hop's two stages merged into one, reported under its own name,
so a table never mixes different spans under one label.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable

from shared import stages

PUBLISHED = "published"
BOUND = "bound"  # the stream stored the binding
MOMENTS = (PUBLISHED, *stages.HOPS, BOUND)
TOTAL = f"{PUBLISHED}->{BOUND}"

# What each stage is made of, for the printed table (docs/bench.md explains them).
WHAT = {
    "published->watched": "stream stores the event, delivers it to the watcher",
    "watched->routed": "watcher decodes, routes; the cache applies it",
    "routed->queued": "request to the queue, added to activeQ",
    "queued->popped": "waits in activeQ for a worker's pop",
    "popped->picked": "queue writes Redis, pop reply reaches the worker",
    "picked->scheduled": "snapshot refresh, Filter/Score of the worker's batch",
    "scheduled->assumed": "assume request, the cache commits and writes Redis",
    "picked->assumed": "snapshot refresh, Filter/Score, assume at the cache",
    "assumed->bind_requested": "cache reply reaches the worker; Permit; bind request",
    "bind_requested->binding": "bind work queue to a binder, PreBind",
    "binding->bound": "conditional write of the binding, stored",
    TOTAL: "the whole way",
}


def percentiles(values: Iterable[float], ps: tuple[int, ...] = (50, 90, 99)) -> dict[str, float]:
    """scheduler_perf's percentile (index ceil(n*p/100)-1 of the sorted values), and max."""
    ordered = sorted(values)
    if not ordered:
        return {}
    out = {f"p{p}": ordered[max(math.ceil(len(ordered) * p / 100) - 1, 0)] for p in ps}
    out["max"] = ordered[-1]
    return out


def pod_stages(published: float, stamps: stages.Stamps, bound: float) -> dict[str, float]:
    """Milliseconds per stage of one pod, and the total: `published` and `bound` in
    seconds since the epoch, `stamps` the binding's hops."""
    moments = [(PUBLISHED, published)]
    moments += [(hop, stamps[hop]) for hop in stages.HOPS if hop in stamps]
    moments.append((BOUND, bound))
    out = {f"{a}->{b}": (tb - ta) * 1000 for (a, ta), (b, tb) in itertools.pairwise(moments)}
    out[TOTAL] = (bound - published) * 1000
    return out


def stage_table(pods: Iterable[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per stage, the percentiles over the pods that have it, and how many do ("pods");
    stages in the order a pod passes them, the total last."""
    by_stage: dict[str, list[float]] = {}
    for pod in pods:
        for stage, ms in pod.items():
            by_stage.setdefault(stage, []).append(ms)
    order = {m: i for i, m in enumerate(MOMENTS)}

    def rank(stage: str) -> tuple[int, int]:
        if stage == TOTAL:
            return (len(MOMENTS), 0)
        a, _, b = stage.partition("->")
        return (order.get(a, 0), order.get(b, 0))

    return {
        stage: {**percentiles(by_stage[stage]), "pods": float(len(by_stage[stage]))}
        for stage in sorted(by_stage, key=rank)
    }


def format_stage_table(table: dict[str, dict[str, float]]) -> str:
    head = (
        f"{'stage':<30} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>8} {'pods':>6}  what"
    )
    lines = [head, "-" * len(head)]
    for stage, row in table.items():
        lines.append(
            f"{stage:<30}{row['p50']:>9.2f}{row['p90']:>9.2f}{row['p99']:>9.2f}"
            f"{row['max']:>9.2f} {row['pods']:>6.0f}  {WHAT.get(stage, '')}"
        )
    return "\n".join(lines)
