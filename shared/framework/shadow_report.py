"""The shadow report (pure): the differing decisions, their counts, and the utilisation
and balance the real and the candidate's placements leave at the end of the replay.

The candidate's placements are the real ones with each pod's last differing decision
applied: a pod placed elsewhere moves to the candidate's node, one that would have been
unschedulable leaves, one that would have fit goes to the candidate's node. This is an
estimate under the per-decision model (each decision was taken on the real history), not
the outcome of a divergent history. With --diverge the replay itself followed the
candidate's placements: they are the ones it holds at the end.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping
from typing import Any

from shared.api.resources import pod_requests
from shared.framework.shadow import (
    ELSEWHERE,
    SCHEDULABLE,
    UNSCHEDULABLE,
    Decision,
    Shadow,
    node_of,
)
from shared.framework.types import LABEL_ZONE, NodeInfo

RESOURCES = ("cpu", "memory")  # cpu in millicores, memory in bytes
NO_ZONE = "(no zone)"


def report(shadow: Shadow) -> dict[str, Any]:
    """The whole report, as `ksched shadow -o json` prints it."""
    decisions = shadow.decisions
    counts = Counter(d.verdict for d in decisions)
    real = {k: node_of(p) for k, p in shadow.pods.items() if node_of(p)}
    candidate = (
        dict(shadow.placed) if shadow.diverge else shadow_placements(real, decisions, shadow.pods)
    )
    return {
        "mode": "diverge" if shadow.diverge else "per-decision",
        "decisions": len(decisions),
        "differences": sum(1 for d in decisions if d.differs),
        "counts": dict(sorted(counts.items())),
        "differing": [d.to_dict() for d in decisions if d.differs],
        "utilisation": {
            "real": utilisation(shadow.nodes, real, shadow.pods),
            "shadow": utilisation(shadow.nodes, candidate, shadow.pods),
        },
    }


def shadow_placements(
    real: Mapping[str, str], decisions: list[Decision], pods: Mapping[str, Any]
) -> dict[str, str]:
    """pod -> node under the candidate: the real placements, each pod's last
    differing decision applied (pods gone by the end are left out)."""
    placed = dict(real)
    last = {d.pod: d for d in decisions}
    for key, d in last.items():
        if key not in pods or not d.differs:
            continue
        if d.verdict == UNSCHEDULABLE:
            placed.pop(key, None)
        elif d.verdict in (ELSEWHERE, SCHEDULABLE) and d.shadow_node is not None:
            placed[key] = d.shadow_node
    return placed


def utilisation(
    nodes: Mapping[str, NodeInfo], placed: Mapping[str, str], pods: Mapping[str, Any]
) -> dict[str, Any]:
    """Requested over allocatable (cpu, memory) per node and per zone, and the balance
    across nodes: the mean and the standard deviation of each resource's fraction."""
    requested: dict[str, dict[str, int]] = {n: dict.fromkeys(RESOURCES, 0) for n in nodes}
    for key, node in placed.items():
        if node not in requested:
            continue
        asks = pod_requests(pods[key].get("spec") or {})
        for r in RESOURCES:
            requested[node][r] += asks.get(r, 0)
    per_node: dict[str, dict[str, Any]] = {}
    zones: dict[str, dict[str, list[int]]] = {}
    for name, info in sorted(nodes.items()):
        if info.raw_node is None:
            continue
        alloc = {r: info.allocatable.get(r, 0) for r in RESOURCES}
        zone_name = info.labels.get(LABEL_ZONE) or NO_ZONE
        per_node[name] = {"zone": zone_name, **_fractions(requested[name], alloc)}
        zone = zones.setdefault(zone_name, {r: [0, 0] for r in RESOURCES})
        for r in RESOURCES:
            zone[r][0] += requested[name][r]
            zone[r][1] += alloc[r]
    return {
        "nodes": per_node,
        "zones": {
            z: _fractions({r: v[0] for r, v in t.items()}, {r: v[1] for r, v in t.items()})
            for z, t in sorted(zones.items())
        },
        "balance": {r: _spread([n[r]["fraction"] for n in per_node.values()]) for r in RESOURCES},
    }


def _fractions(requested: Mapping[str, int], alloc: Mapping[str, int]) -> dict[str, Any]:
    return {
        r: {
            "requested": requested[r],
            "allocatable": alloc[r],
            "fraction": round(requested[r] / alloc[r], 4) if alloc[r] else 0.0,
        }
        for r in RESOURCES
    }


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "stddev": 0.0}
    return {
        "mean": round(statistics.fmean(values), 4),
        "stddev": round(statistics.pstdev(values), 4),
    }
