"""Where a cluster event goes: kube-scheduler's AddAllEventHandlers, as pure functions.

- Nodes go to the cache; a node that appears or changes may make pending pods
  schedulable, so the queue hears of it as a cluster event.
- Assigned pods (spec.nodeName set) go to the cache; for the queue they are
  deletions (a pod that was pending and is now bound leaves the queue).
- Unassigned pods whose schedulerName we serve go to the queue.
- A pod that finished (phase Succeeded or Failed) is gone for scheduling, as
  kube-scheduler's informer field selector makes it.
"""

from __future__ import annotations

from shared.api.events import ClusterEvent
from shared.api.models import Node, Pod
from shared.messages import CacheEvent, QueueEvent

NODE_ADD = "NodeAdd"
NODE_UPDATE = "NodeUpdate"
ASSIGNED_POD_DELETE = "AssignedPodDelete"
TERMINAL_PHASES = ("Succeeded", "Failed")


def route(ev: ClusterEvent, served: frozenset[str]) -> tuple[list[QueueEvent], list[CacheEvent]]:
    if isinstance(ev.obj, Node):
        return _route_node(ev, ev.obj)
    assert isinstance(ev.obj, Pod)
    return _route_pod(ev, ev.obj, served)


def _route_node(ev: ClusterEvent, node: Node) -> tuple[list[QueueEvent], list[CacheEvent]]:
    name = node.metadata.name
    if ev.type == "DELETED":
        return [], [{"op": "node_delete", "name": name}]
    move = NODE_ADD if ev.type == "ADDED" else NODE_UPDATE
    return [{"op": "move", "event": move}], [{"op": "node_upsert", "name": name, "node": ev.raw}]


def _route_pod(
    ev: ClusterEvent, pod: Pod, served: frozenset[str]
) -> tuple[list[QueueEvent], list[CacheEvent]]:
    key = pod.key
    gone = ev.type == "DELETED" or pod.status.phase in TERMINAL_PHASES
    if pod.spec.node_name:
        if gone:
            return (
                [{"op": "delete", "key": key}, {"op": "move", "event": ASSIGNED_POD_DELETE}],
                [{"op": "pod_delete", "name": key}],
            )
        return [{"op": "assigned", "key": key}], [
            {
                "op": "pod_upsert",
                "name": key,
                "uid": pod.metadata.uid,
                "seq": ev.seq,
                "node_name": pod.spec.node_name,
                "pod": ev.raw,
            }
        ]
    if pod.spec.scheduler_name not in served:
        return [], []
    if gone or pod.metadata.deletion_timestamp:
        # Forget any assumption too: its binding can only fail now.
        return [{"op": "delete", "key": key}], [{"op": "pod_delete", "name": key}]
    return [{"op": "upsert", "key": key, "uid": pod.metadata.uid, "seq": ev.seq, "pod": ev.raw}], []
