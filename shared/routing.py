"""Where a cluster event goes: kube-scheduler's AddAllEventHandlers, as pure functions.

- Nodes go to the cache. For the queue, a node added, changed or deleted is a
  cluster event named as precisely as the change allows (Node/Add,
  Node/UpdateNodeLabel, ...; kube's NodeSchedulingPropertiesChange), with the
  old and new node for the plugins' queueing hints. An update that changes
  nothing a plugin reads moves nothing.
- Assigned pods (spec.nodeName set) go to the cache; for the queue they leave
  the pending pods (a pod that was pending and is now bound) and are cluster
  events too: AssignedPod/Add, AssignedPod/UpdatePodLabel, ..., AssignedPod/Delete.
- Unassigned pods whose schedulerName we serve go to the queue; their
  nominations (status.nominatedNodeName set, changed or cleared) to the cache
  too, in stream order, so that the room a preemption frees is reserved there
  before it is free (services/cache/nominations.py).
- A pod that finished (phase Succeeded or Failed) is gone for scheduling, as
  kube-scheduler's informer field selector makes it.

Naming an update needs the previous version, which `Informer` remembers (the
informer cache's part). An object it has not seen, say after a restart, counts
as added: hints then judge it on its own, as on a relist.

The watcher routes every event it consumes; queue and cache route the log's latest
events the same way when they rebuild their state from it (shared/relist.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.api.events import ClusterEvent as WatchEvent
from shared.api.models import Node, Pod, PodGroup
from shared.framework.events import (
    EVENT_ASSIGNED_POD_ADD,
    EVENT_ASSIGNED_POD_DELETE,
    EVENT_NODE_ADD,
    EVENT_NODE_DELETE,
    node_scheduling_properties_change,
    pod_scheduling_properties_change,
)
from shared.framework.interface import ClusterEvent
from shared.messages import CacheEvent, QueueEvent
from shared.podgroups import POD_GROUP_RESOURCE, pod_group_of
from shared.sharding import pod_gang, queue_owner

TERMINAL_PHASES = ("Succeeded", "Failed")

# What queueing hints read of an assigned pod; the rest is not worth remembering.
_SLIM_META = ("name", "namespace", "uid", "labels")
_SLIM_SPEC: tuple[str, ...] = ("nodeName", "schedulerName", "containers", "initContainers")
_SLIM_SPEC += ("overhead", "resources", "tolerations", "workloadRef", "schedulingGroup")

Routed = tuple[list[QueueEvent], list[CacheEvent]]


@dataclass
class Informer:
    """The last version seen of each node and each assigned pod (slimmed)."""

    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    assigned_pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    pod_groups: set[str] = field(default_factory=set)
    nominated: set[str] = field(default_factory=set)  # pending pods nominated at the cache
    # With queue shards: the gang each pending gang pod was last routed by, so that a pod
    # whose Coscheduling label changes leaves the queue shard that held it.
    queue_shards: int = 1
    pending_gangs: dict[str, str] = field(default_factory=dict)


def stamped(routed: Routed, seq: int) -> Routed:
    """Every item names the stream sequence of the event it comes from (moves too): a
    receiver whose rebuilt state holds that event already skips it
    (runtime/watermark.py, Watermark.holds)."""
    for item in (*routed[0], *routed[1]):
        item.setdefault("seq", seq)
    return routed


def move(
    event: ClusterEvent,
    old: dict[str, Any] | None = None,
    new: dict[str, Any] | None = None,
) -> QueueEvent:
    return {
        "op": "move",
        "resource": event.resource,
        "action": event.action,
        "old": old,
        "new": new,
    }


def hinted_view(raw: dict[str, Any]) -> dict[str, Any]:
    """What queueing hints read of an assigned pod (with its node and nomination): not
    the plugins' slim pod (shared/framework/types.py), which leaves out where it is."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    nominated = (raw.get("status") or {}).get("nominatedNodeName")
    return {
        "metadata": {k: meta[k] for k in _SLIM_META if k in meta},
        "spec": {k: spec[k] for k in _SLIM_SPEC if k in spec},
        "status": {"nominatedNodeName": nominated} if nominated else {},
    }


def immutable_node_name(ev: WatchEvent, seen: Informer) -> str | None:
    """The API server's refusal of an update that moves or unbinds a bound pod:
    spec.nodeName is set once, by a binding, and never changes. A pod deleted and
    created again (another uid) is a new object, free to differ."""
    if not isinstance(ev.obj, Pod) or ev.type == "DELETED":
        return None
    old = seen.assigned_pods.get(ev.obj.key)
    if old is None:
        return None
    old_node = old["spec"].get("nodeName", "")
    old_uid = old["metadata"].get("uid", "")
    if ev.obj.spec.node_name == old_node or (old_uid and ev.obj.metadata.uid != old_uid):
        return None
    return (
        f'Pod "{ev.obj.metadata.name}" is invalid: spec.nodeName: Forbidden: may not be '
        f"changed once the pod is bound (bound to {old_node!r}, update sets "
        f"{ev.obj.spec.node_name!r})"
    )


def route(ev: WatchEvent, served: frozenset[str], seen: Informer | None = None) -> Routed:
    seen = seen if seen is not None else Informer()
    if isinstance(ev.obj, Node):
        return _route_node(ev, ev.obj, seen)
    if isinstance(ev.obj, PodGroup):
        return _route_pod_group(ev, ev.obj, seen)
    if not isinstance(ev.obj, Pod):
        # PodDisruptionBudgets: validated here (a bad one goes to ksched.errors), read
        # by the workers straight from the stream (docs/preemption.md).
        return [], []
    to_queue, to_cache = _route_pod(ev, ev.obj, served, seen)
    group = pod_group_of(ev.raw)
    if group:  # Coscheduling's PreFilter counts the group's pods, pending or bound
        gone = ev.type == "DELETED" or ev.obj.status.phase in TERMINAL_PHASES
        to_cache.append(
            {"op": "group_member", "name": ev.obj.key, "group": group, "present": not gone}
        )
    return to_queue, to_cache


def _route_pod_group(ev: WatchEvent, group: PodGroup, seen: Informer) -> Routed:
    """PodGroups go to the cache; for the queue an added or changed group is a cluster
    event that may help the pods Coscheduling rejected."""
    key = group.key
    if ev.type == "DELETED":
        seen.pod_groups.discard(key)
        return [], [{"op": "podgroup_delete", "name": key}]
    action = "Update" if key in seen.pod_groups else "Add"
    seen.pod_groups.add(key)
    moves = [move(ClusterEvent(POD_GROUP_RESOURCE, action))]  # hints get no PodGroup object
    return moves, [{"op": "podgroup_upsert", "name": key, "podgroup": ev.raw}]


def _route_node(ev: WatchEvent, node: Node, seen: Informer) -> Routed:
    name = node.metadata.name
    old = seen.nodes.get(name)
    if ev.type == "DELETED":
        seen.nodes.pop(name, None)
        return [move(EVENT_NODE_DELETE, old=old or ev.raw)], [{"op": "node_delete", "name": name}]
    seen.nodes[name] = ev.raw
    if old is None:
        moves = [move(EVENT_NODE_ADD, new=ev.raw)]
    else:
        moves = [move(e, old, ev.raw) for e in node_scheduling_properties_change(ev.raw, old)]
    return moves, [{"op": "node_upsert", "name": name, "node": ev.raw}]


def _route_pod(ev: WatchEvent, pod: Pod, served: frozenset[str], seen: Informer) -> Routed:
    key = pod.key
    gone = ev.type == "DELETED" or pod.status.phase in TERMINAL_PHASES
    gang = pod_gang(ev.raw)  # its queue shard's (shared/sharding.py queue_owner)
    if pod.spec.node_name:
        seen.nominated.discard(key)  # the cache drops the nomination of a bound pod
        seen.pending_gangs.pop(key, None)
        return _route_assigned_pod(ev, pod, key, gone, seen, gang)
    if pod.spec.scheduler_name not in served:
        return [], []
    if gone or pod.metadata.deletion_timestamp:
        seen.nominated.discard(key)
        seen.pending_gangs.pop(key, None)
        # Forget any assumption (and nomination) too: its binding can only fail now.
        return [in_gang({"op": "delete", "key": key}, gang)], [{"op": "pod_delete", "name": key}]
    upsert: QueueEvent = {
        "op": "upsert",
        "key": key,
        "uid": pod.metadata.uid,
        "seq": ev.seq,
        "pod": ev.raw,
    }
    return [*_left_queue_shard(seen, key, gang), in_gang(upsert, gang)], _nomination(
        ev, pod, key, seen
    )


def _left_queue_shard(seen: Informer, key: str, gang: str) -> list[QueueEvent]:
    """The delete, at the queue shard that held a pending pod, when its gang (its
    Coscheduling label: GangScheduling's references are immutable) moves it to another
    (shared/sharding.py queue_owner). A gang pod not seen before may have been held by
    its partition's shard: that one is told too (a delete of a pod it does not hold
    changes nothing). After a watcher restart, a pod that left its gang is not."""
    shards = seen.queue_shards
    if shards == 1:
        return []
    before = seen.pending_gangs.pop(key, None)
    if gang:
        seen.pending_gangs[key] = gang
    elif before is None:
        return []  # a pod in no gang, as it was: the hot path
    was = before or ""  # not seen in a gang: routed by its partition
    if queue_owner(shards, key, was) == queue_owner(shards, key, gang):
        return []
    return [in_gang({"op": "delete", "key": key}, was)]


def in_gang(item: QueueEvent, gang: str) -> QueueEvent:
    """A pod's queue item with its gang, which picks its queue shard (none: no field)."""
    if gang:
        item["gang"] = gang
    return item


def _nomination(ev: WatchEvent, pod: Pod, key: str, seen: Informer) -> list[CacheEvent]:
    """The pending pod's (`key`'s) nomination for the cache, when it has one or just
    lost it: the hot path (pods without nominations) sends the cache nothing."""
    node = pod.status.nominated_node_name
    if not node and key not in seen.nominated:
        return []
    if node:
        seen.nominated.add(key)
    else:
        seen.nominated.discard(key)
    return [
        {
            "op": "pod_nominate",
            "name": key,
            "uid": pod.metadata.uid,
            "seq": ev.seq,
            "nominated_node": node,
            "pod": ev.raw,
        }
    ]


def _route_assigned_pod(
    ev: WatchEvent, pod: Pod, key: str, gone: bool, seen: Informer, gang: str
) -> Routed:
    old = seen.assigned_pods.get(key)
    if gone:
        seen.assigned_pods.pop(key, None)
        return (
            [
                in_gang({"op": "delete", "key": key}, gang),
                move(EVENT_ASSIGNED_POD_DELETE, old=old or hinted_view(ev.raw)),
            ],
            [{"op": "pod_delete", "name": key}],
        )
    new = hinted_view(ev.raw)
    seen.assigned_pods[key] = new
    if old is None:
        moves = [move(EVENT_ASSIGNED_POD_ADD, new=new)]
    elif old == new:
        moves = []  # nothing a hint reads changed (a status update, say)
    else:
        moves = [move(e, old, new) for e in pod_scheduling_properties_change(new, old)]
    cache: CacheEvent = {
        "op": "pod_upsert",
        "name": key,
        "uid": pod.metadata.uid,
        "seq": ev.seq,
        "node_name": pod.spec.node_name,
        "pod": ev.raw,
    }
    return [in_gang({"op": "assigned", "key": key}, gang), *moves], [cache]
