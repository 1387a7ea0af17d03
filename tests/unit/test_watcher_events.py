"""The watcher names each node and assigned-pod change as kube's event handlers do
(NodeSchedulingPropertiesChange, PodSchedulingPropertiesChange), with the objects."""

from __future__ import annotations

import copy
from typing import Any

from shared.routing import Informer, hinted_view, route
from shared.tools.synthetic import make_node, make_pod
from tests.unit.test_routing import SERVED, assigned, event


def moves(routed: tuple[list, list]) -> list[tuple[str, str]]:
    return [(e["resource"], e["action"]) for e in routed[0] if e["op"] == "move"]


def test_node_lifecycle() -> None:
    seen = Informer()
    n = make_node("n1")
    added = route(event(n, "ADDED"), SERVED, seen)
    assert moves(added) == [("Node", "Add")]
    assert added[0][0]["new"] == n and added[0][0]["old"] is None

    assert moves(route(event(n, "MODIFIED"), SERVED, seen)) == []  # replayed, nothing changed

    relabelled = copy.deepcopy(n)
    relabelled["metadata"]["labels"]["disk"] = "ssd"
    relabelled["status"]["capacity"]["cpu"] = "8"
    routed = route(event(relabelled, "MODIFIED"), SERVED, seen)
    assert moves(routed) == [("Node", "UpdateNodeAllocatable"), ("Node", "UpdateNodeLabel")]
    assert routed[0][0]["old"] == n and routed[0][0]["new"] == relabelled
    assert routed[1] == [{"op": "node_upsert", "name": "n1", "node": relabelled}]

    heartbeat = copy.deepcopy(relabelled)
    heartbeat["status"]["conditions"] = []
    assert moves(route(event(heartbeat, "MODIFIED"), SERVED, seen)) == []

    deleted = route(event(heartbeat, "DELETED"), SERVED, seen)
    assert moves(deleted) == [("Node", "Delete")]
    assert deleted[0][0]["old"] == heartbeat and "n1" not in seen.nodes


def test_unknown_node_update_counts_as_added() -> None:
    assert moves(route(event(make_node("n"), "MODIFIED"), SERVED, Informer())) == [("Node", "Add")]


def test_assigned_pod_lifecycle() -> None:
    seen = Informer()
    p = assigned(make_pod("p", labels={"app": "web"}))
    added = route(event(p, "MODIFIED"), SERVED, seen)  # the binding
    assert [e["op"] for e in added[0]] == ["assigned", "move"]
    assert moves(added) == [("AssignedPod", "Add")]
    assert added[0][1]["new"] == hinted_view(p)

    status_only = copy.deepcopy(p)
    status_only["status"] = {"phase": "Running"}
    assert moves(route(event(status_only, "MODIFIED"), SERVED, seen)) == []

    relabelled = copy.deepcopy(status_only)
    relabelled["metadata"]["labels"] = {"app": "db"}
    routed = route(event(relabelled, "MODIFIED"), SERVED, seen)
    assert moves(routed) == [("AssignedPod", "UpdatePodLabel")]
    assert routed[0][1]["old"]["metadata"]["labels"] == {"app": "web"}

    deleted = route(event(relabelled, "DELETED"), SERVED, seen)
    assert [e["op"] for e in deleted[0]] == ["delete", "move"]
    assert moves(deleted) == [("AssignedPod", "Delete")]
    assert deleted[0][1]["old"]["metadata"]["labels"] == {"app": "db"}
    assert not seen.assigned_pods


def test_slim_pod_keeps_what_hints_read() -> None:
    p: dict[str, Any] = assigned(make_pod("p"))
    p["metadata"]["annotations"] = {"big": "x" * 1000}
    p["spec"]["tolerations"] = [{"key": "k", "operator": "Exists"}]
    p["status"] = {"nominatedNodeName": "n2", "phase": "Pending"}
    slim = hinted_view(p)
    assert "annotations" not in slim["metadata"]
    assert slim["spec"]["containers"] == p["spec"]["containers"]
    assert slim["spec"]["tolerations"] == p["spec"]["tolerations"]
    assert slim["status"] == {"nominatedNodeName": "n2"}
