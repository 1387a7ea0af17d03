"""The watcher's routing rules (kube-scheduler's event handlers)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.api.events import ClusterEvent, decode_cluster_event
from shared.routing import Informer, route
from shared.tools.synthetic import make_node, make_pod
from shared.wire import dump_json

SERVED = frozenset({"default-scheduler"})


def event(obj: dict[str, Any], etype: str = "ADDED", seq: int = 7) -> ClusterEvent:
    meta = obj["metadata"]
    if obj["kind"] == "Node":
        subject = f"ksched.cluster.nodes.{meta['name']}"
    else:
        subject = f"ksched.cluster.pods.{meta['namespace']}.{meta['name']}"
    return decode_cluster_event(subject, dump_json({"type": etype, "object": obj}), None, seq)


def assigned(pod: dict[str, Any], node: str = "n1") -> dict[str, Any]:
    pod["spec"]["nodeName"] = node
    return pod


def ops(routed: tuple[list, list]) -> tuple[list[str], list[str]]:
    queue, cache = routed
    return [e["op"] for e in queue], [e["op"] for e in cache]


@pytest.mark.parametrize(
    ("obj", "etype", "queue_ops", "cache_ops"),
    [
        pytest.param(make_pod("p"), "ADDED", ["upsert"], [], id="unassigned pod added -> queue"),
        pytest.param(
            make_pod("p"), "MODIFIED", ["upsert"], [], id="unassigned pod updated -> queue"
        ),
        pytest.param(
            make_pod("p"),
            "DELETED",
            ["delete"],
            ["pod_delete"],
            id="unassigned pod deleted -> queue delete, cache forgets assumption",
        ),
        pytest.param(
            assigned(make_pod("p")),
            "ADDED",
            ["assigned", "move"],
            ["pod_upsert"],
            id="assigned pod added -> cache add, queue delete, AssignedPod/Add",
        ),
        pytest.param(
            assigned(make_pod("p")),
            "MODIFIED",
            ["assigned", "move"],
            ["pod_upsert"],
            id="pod became assigned -> queue delete, cache add, AssignedPod/Add",
        ),
        pytest.param(
            assigned(make_pod("p")),
            "DELETED",
            ["delete", "move"],
            ["pod_delete"],
            id="assigned pod deleted -> cache remove, queue moves pods",
        ),
        pytest.param(make_node("n"), "ADDED", ["move"], ["node_upsert"], id="node added"),
        pytest.param(make_node("n"), "MODIFIED", ["move"], ["node_upsert"], id="node updated"),
        pytest.param(make_node("n"), "DELETED", ["move"], ["node_delete"], id="node deleted"),
    ],
)
def test_routes(obj: dict, etype: str, queue_ops: list[str], cache_ops: list[str]) -> None:
    assert ops(route(event(obj, etype), SERVED)) == (queue_ops, cache_ops)


def test_pod_of_another_scheduler_is_ignored() -> None:
    pod = make_pod("p")
    pod["spec"]["schedulerName"] = "someone-else"
    assert ops(route(event(pod), SERVED)) == ([], [])


def test_assigned_pod_of_another_scheduler_still_counts_on_its_node() -> None:
    pod = assigned(make_pod("p"))
    pod["spec"]["schedulerName"] = "someone-else"
    assert ops(route(event(pod), SERVED)) == (["assigned", "move"], ["pod_upsert"])


def test_finished_pod_is_a_deletion() -> None:
    pod = assigned(make_pod("p"))
    pod["status"] = {"phase": "Succeeded"}
    assert ops(route(event(pod, "MODIFIED"), SERVED)) == (["delete", "move"], ["pod_delete"])


def test_pod_being_deleted_leaves_the_queue() -> None:
    pod = make_pod("p")
    pod["metadata"]["deletionTimestamp"] = "2026-11-21T10:00:00Z"
    assert ops(route(event(pod, "MODIFIED"), SERVED)) == (["delete"], ["pod_delete"])


def test_upsert_carries_sequence_and_raw_object() -> None:
    pod = make_pod("p")
    queue, _ = route(event(pod, seq=42), SERVED)
    assert queue[0]["seq"] == 42
    assert queue[0]["pod"]["spec"] == pod["spec"]
    assert queue[0]["key"] == "default/p"


def _nominated(name: str, node: str) -> dict[str, Any]:
    pod = make_pod(name)
    pod["status"] = {"nominatedNodeName": node} if node else {}
    return pod


def test_a_nomination_reaches_the_cache_and_so_does_its_clearing() -> None:
    """The cache reserves a preemptor's room (services/cache/nominations.py); pending pods
    that never had a nomination send it nothing."""
    seen = Informer()
    assert ops(route(event(make_pod("other")), SERVED, seen)) == (["upsert"], [])
    _, cache = route(event(_nominated("p", "n1"), "MODIFIED", seq=9), SERVED, seen)
    assert [(e["op"], e["nominated_node"], e["seq"]) for e in cache] == [("pod_nominate", "n1", 9)]
    _, cache = route(event(_nominated("p", ""), "MODIFIED"), SERVED, seen)
    assert [(e["op"], e["nominated_node"]) for e in cache] == [("pod_nominate", "")]
    assert ops(route(event(_nominated("p", ""), "MODIFIED"), SERVED, seen)) == (["upsert"], [])


def test_a_bound_nominated_pod_is_no_longer_followed() -> None:
    seen = Informer()
    route(event(_nominated("p", "n1")), SERVED, seen)
    route(event(assigned(_nominated("p", "n1")), "MODIFIED"), SERVED, seen)  # cache drops it
    assert seen.nominated == set()
