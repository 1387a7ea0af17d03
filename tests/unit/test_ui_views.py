"""The page's data: the heat map's requested vs allocatable, and which pods are pending
with which reason (shared/tools/ui/views.py)."""

from __future__ import annotations

from typing import Any

from shared.tools.synthetic import make_node, make_pod
from shared.tools.ui.views import nodes_view, pending_view


def unschedulable(pod: dict[str, Any], message: str, at: str) -> dict[str, Any]:
    cond = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
        "lastTransitionTime": at,
    }
    return {**pod, "status": {"conditions": [cond]}}


def test_heat_is_requested_over_allocatable_per_resource() -> None:
    nodes = [make_node("b", cpu="2", pods=4), make_node("a", cpu="4", memory="8Gi")]
    pods = [make_pod("x", cpu="1", memory="2Gi", node="b"), make_pod("y", cpu="3")]
    view = nodes_view(nodes, pods)
    assert [c["name"] for c in view["nodes"]] == ["a", "b"]  # stable tiles: by name
    b = view["nodes"][1]
    assert b["cpu"] == {"requested": 1000, "allocatable": 2000}
    assert b["heat"] == {"cpu": 0.5, "memory": 0.125, "pods": 0.25}
    assert view["nodes"][0]["heat"]["cpu"] == 0.0  # y is not bound: it uses nothing
    assert view["counts"] == {"nodes": 2, "pods": 2, "bound": 1}


def test_pending_lists_unschedulable_pods_first_with_their_reason() -> None:
    fresh = make_pod("fresh")
    late = unschedulable(make_pod("late"), "0/2 nodes are available: 2 Insufficient cpu.", "t2")
    early = unschedulable(make_pod("early"), "0/2 nodes are available: 2 Too many pods.", "t1")
    bound = make_pod("bound", node="a")
    view = pending_view([fresh, late, bound, early])
    assert [e["pod"] for e in view["pending"]] == ["default/early", "default/late", "default/fresh"]
    assert view["pending"][1]["reason"] == "Unschedulable"
    assert view["pending"][1]["message"].endswith("2 Insufficient cpu.")
    assert view["pending"][2]["message"] == "not tried yet"
    assert view["total"] == 3


def test_pending_counts_what_it_does_not_list() -> None:
    view = pending_view([make_pod(f"p{i}") for i in range(5)], limit=2)
    assert len(view["pending"]) == 2 and view["total"] == 5
