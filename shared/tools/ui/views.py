"""What the page shows, as JSON-ready dicts (pure: no I/O).

The heat map reuses `ksched top`'s node usage (requests of bound pods against
allocatable); pending pods and their reasons come from the PodScheduled=False
condition ksched writes on each unschedulable pod (the contract's Unschedulable
output), so the page needs no other source than the cluster stream."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from shared.tools.cli.top import NodeUse, node_usage

MAX_PENDING = 200  # pending pods listed (the rest counted): the page stays readable


def fraction(used: int, total: int) -> float:
    """Requested over allocatable, 0 when the node offers none of the resource."""
    return round(used / total, 4) if total else 0.0


def node_cell(use: NodeUse) -> dict[str, Any]:
    return {
        "name": use.name,
        "cpu": {"requested": use.cpu[0], "allocatable": use.cpu[1]},
        "memory": {"requested": use.memory[0], "allocatable": use.memory[1]},
        "pods": {"requested": use.pods[0], "allocatable": use.pods[1]},
        "heat": {
            "cpu": fraction(*use.cpu),
            "memory": fraction(*use.memory),
            "pods": fraction(*use.pods),
        },
    }


def nodes_view(nodes: Sequence[dict[str, Any]], pods: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Every node's requested vs allocatable, sorted by name (a heat map keeps its
    tiles in place between refreshes), and the counts above the map."""
    cells = sorted((node_cell(u) for u in node_usage(nodes, pods)), key=lambda c: c["name"])
    bound = sum(1 for p in pods if (p.get("spec") or {}).get("nodeName"))
    return {"nodes": cells, "counts": {"nodes": len(cells), "pods": len(pods), "bound": bound}}


def scheduled_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "PodScheduled":
            return cond
    return None


def pending_entry(pod: dict[str, Any]) -> dict[str, Any]:
    meta = pod.get("metadata") or {}
    cond = scheduled_condition(pod) or {}
    failed = cond.get("status") == "False"
    return {
        "pod": f"{meta.get('namespace', 'default')}/{meta.get('name', '')}",
        "reason": cond.get("reason", "") if failed else "",
        "message": cond.get("message", "") if failed else "not tried yet",
        "nominatedNode": (pod.get("status") or {}).get("nominatedNodeName") or "",
        "since": cond.get("lastTransitionTime") or meta.get("creationTimestamp") or "",
    }


def pending_view(pods: Iterable[dict[str, Any]], limit: int = MAX_PENDING) -> dict[str, Any]:
    """The pods without a node, those ksched found unschedulable first, oldest first
    within each kind; at most `limit` listed, the rest counted."""
    entries = [
        pending_entry(p)
        for p in pods
        if not (p.get("spec") or {}).get("nodeName")
        and not (p.get("metadata") or {}).get("deletionTimestamp")
    ]
    entries.sort(key=lambda e: (not e["reason"], e["since"], e["pod"]))
    return {"pending": entries[:limit], "total": len(entries)}
