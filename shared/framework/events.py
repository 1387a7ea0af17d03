"""Cluster events for the scheduling queue (kube-scheduler's framework/events.go and the
ActionType / ClusterEvent matching of framework/types.go).

A plugin registers the events that may make a pod it rejected schedulable
(`events_to_register`), optionally with a queueing hint; the watcher names each
change of a Node or an assigned Pod as precisely as it can (NodeSchedulingPropertiesChange,
PodSchedulingPropertiesChange), and the queue moves an unschedulable pod only
when a plugin that rejected it registered a matching event and its hint agrees.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import IntFlag
from functools import lru_cache
from typing import Any

from shared.api.quantity import QuantityError
from shared.api.resources import pod_requests
from shared.framework.interface import ClusterEvent
from shared.framework.types import allocatable_of


class ActionType(IntFlag):
    """Bit flags in kube's order: the order matters, since a registered action matches
    an incoming one only if it is at least as large (MatchClusterEvents)."""

    NONE = 0
    ADD = 1 << 0
    DELETE = 1 << 1
    UPDATE_NODE_ALLOCATABLE = 1 << 2
    UPDATE_NODE_LABEL = 1 << 3
    UPDATE_NODE_TAINT = 1 << 4  # taints, or spec.unschedulable turned off
    UPDATE_NODE_CONDITION = 1 << 5
    UPDATE_NODE_ANNOTATION = 1 << 6
    UPDATE_NODE_DECLARED_FEATURE = 1 << 7
    UPDATE_POD_LABEL = 1 << 8
    UPDATE_POD_SCALE_DOWN = 1 << 9
    UPDATE_POD_TOLERATION = 1 << 10
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = 1 << 11
    UPDATE_POD_GENERATED_RESOURCE_CLAIM = 1 << 12
    ALL = (1 << 13) - 1
    UPDATE = ALL & ~(ADD | DELETE)  # any update, when no finer kind applies


# ActionType.String(): the names used in registrations (events_to_register), labels and
# messages, each once.
ADD = "Add"
DELETE = "Delete"
UPDATE_NODE_ALLOCATABLE = "UpdateNodeAllocatable"
UPDATE_NODE_LABEL = "UpdateNodeLabel"
UPDATE_NODE_TAINT = "UpdateNodeTaint"
UPDATE_NODE_CONDITION = "UpdateNodeCondition"
UPDATE_NODE_ANNOTATION = "UpdateNodeAnnotation"
UPDATE_NODE_DECLARED_FEATURE = "UpdateNodeDeclaredFeature"
UPDATE_POD_LABEL = "UpdatePodLabel"
UPDATE_POD_SCALE_DOWN = "UpdatePodScaleDown"
UPDATE_POD_TOLERATION = "UpdatePodToleration"
UPDATE_POD_SCHEDULING_GATES_ELIMINATED = "UpdatePodSchedulingGatesEliminated"
UPDATE_POD_GENERATED_RESOURCE_CLAIM = "UpdatePodGeneratedResourceClaim"
ALL = "All"
UPDATE = "Update"
ACTION_NAMES: dict[str, ActionType] = {
    ADD: ActionType.ADD,
    DELETE: ActionType.DELETE,
    UPDATE_NODE_ALLOCATABLE: ActionType.UPDATE_NODE_ALLOCATABLE,
    UPDATE_NODE_LABEL: ActionType.UPDATE_NODE_LABEL,
    UPDATE_NODE_TAINT: ActionType.UPDATE_NODE_TAINT,
    UPDATE_NODE_CONDITION: ActionType.UPDATE_NODE_CONDITION,
    UPDATE_NODE_ANNOTATION: ActionType.UPDATE_NODE_ANNOTATION,
    UPDATE_NODE_DECLARED_FEATURE: ActionType.UPDATE_NODE_DECLARED_FEATURE,
    UPDATE_POD_LABEL: ActionType.UPDATE_POD_LABEL,
    UPDATE_POD_SCALE_DOWN: ActionType.UPDATE_POD_SCALE_DOWN,
    UPDATE_POD_TOLERATION: ActionType.UPDATE_POD_TOLERATION,
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED: ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
    UPDATE_POD_GENERATED_RESOURCE_CLAIM: ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM,
    ALL: ActionType.ALL,
    UPDATE: ActionType.UPDATE,
}

# Event resources. Plugins register "Pod", which matches both internal pod resources.
POD = "Pod"
NODE = "Node"
ASSIGNED_POD = "AssignedPod"
UNSCHEDULED_POD = "UnschedulablePod"
WORKLOAD = "Workload"  # scheduling.k8s.io Workload (GangScheduling)
# scheduling.k8s.io PodGroup (v1alpha2, v1beta1; GangScheduling); not Coscheduling's
# "PodGroup" (scheduling.x-k8s.io, shared/podgroups.py), whose hints get no object
WORKLOAD_POD_GROUP = "PodGroup.scheduling.k8s.io"
WILDCARD = "*"

# Labels of queue moves that are not cluster events (metrics, logs).
SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
BACKOFF_COMPLETE = "BackoffComplete"
UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"
FORCE_ACTIVATE = "ForceActivate"

EVENT_NODE_ADD = ClusterEvent(NODE, ADD)
EVENT_NODE_DELETE = ClusterEvent(NODE, DELETE)
EVENT_ASSIGNED_POD_ADD = ClusterEvent(ASSIGNED_POD, ADD)
EVENT_ASSIGNED_POD_UPDATE = ClusterEvent(ASSIGNED_POD, UPDATE)
EVENT_ASSIGNED_POD_DELETE = ClusterEvent(ASSIGNED_POD, DELETE)
EVENT_UNSCHEDULED_POD_ADD = ClusterEvent(UNSCHEDULED_POD, ADD)
EVENT_UNSCHEDULED_POD_UPDATE = ClusterEvent(UNSCHEDULED_POD, UPDATE)
EVENT_UNSCHEDULED_POD_DELETE = ClusterEvent(UNSCHEDULED_POD, DELETE)
EVENT_UNSCHEDULABLE_TIMEOUT = ClusterEvent(WILDCARD, ALL, UNSCHEDULABLE_TIMEOUT)
EVENT_FORCE_ACTIVATE = ClusterEvent(WILDCARD, ALL, FORCE_ACTIVATE)

# QueueingHintFn(pod, old, new): may the event (old -> new object; old is None for an
# Add, new is None for a Delete) make `pod`, which this plugin rejected, schedulable?
# True is kube's Queue, False its QueueSkip. The queue passes PodInfo / NodeInfo
# objects; a hint that raises counts as Queue, so that no pod gets stuck.
QueueingHintFn = Callable[[Any, Any, Any], bool]


@lru_cache(maxsize=256)
def action_type(action: str) -> ActionType:
    """Parse "Add", "UpdateNodeLabel" or a union such as "Add|UpdateNodeTaint"."""
    bits = ActionType.NONE
    for name in action.split("|"):
        try:
            bits |= ACTION_NAMES[name.strip()]
        except KeyError:
            raise ValueError(f"unknown cluster event action {name!r}") from None
    return bits


def event_label(ev: ClusterEvent) -> str:
    """ClusterEvent.Label(): the custom label, else resource and action ("NodeAdd")."""
    return ev.label or f"{ev.resource}{ev.action}"


_BY_LABEL = {
    f"{resource}{name}": ClusterEvent(resource, name)
    for resource in (POD, NODE, ASSIGNED_POD, UNSCHEDULED_POD)
    for name in ACTION_NAMES
}
_BY_LABEL |= {e.label: e for e in (EVENT_UNSCHEDULABLE_TIMEOUT, EVENT_FORCE_ACTIVATE)}


def event_from_label(label: str) -> ClusterEvent:
    """The event a label names ("AssignedPodDelete"); an unknown label is a wildcard
    event, which moves every pod, as an unknown reason to retry should."""
    return _BY_LABEL.get(label) or ClusterEvent(WILDCARD, ALL, label)


def is_wildcard(ev: ClusterEvent) -> bool:
    return ev.resource == WILDCARD and action_type(ev.action) == ActionType.ALL


def _match_resources(registered: str, incoming: str) -> bool:
    if registered in (WILDCARD, incoming):
        return True
    return registered == POD and incoming in (ASSIGNED_POD, UNSCHEDULED_POD)


def match_cluster_events(registered: ClusterEvent, incoming: ClusterEvent) -> bool:
    """MatchClusterEvents: the incoming event is the registered one or more specific
    (a registered Node/Update matches Node/UpdateNodeLabel, not the reverse)."""
    if is_wildcard(registered):
        return True
    reg, inc = action_type(registered.action), action_type(incoming.action)
    return (
        _match_resources(registered.resource, incoming.resource) and bool(reg & inc) and inc <= reg
    )


# --- what changed: PodSchedulingPropertiesChange / NodeSchedulingPropertiesChange ------


def _meta(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    return raw.get("metadata") or {}


def _spec(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    return raw.get("spec") or {}


def _status(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    return raw.get("status") or {}


def _scaled_down(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """extractPodScaleDown: some request of the old pod is gone or smaller."""
    try:
        new_req, old_req = pod_requests(dict(_spec(new))), pod_requests(dict(_spec(old)))
    except QuantityError:
        return False
    return any(name not in new_req or amount > new_req[name] for name, amount in old_req.items())


def pod_update_actions(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[str]:
    actions = []
    if (_meta(new).get("labels") or {}) != (_meta(old).get("labels") or {}):
        actions.append("UpdatePodLabel")
    if _scaled_down(new, old):
        actions.append("UpdatePodScaleDown")
    if not _spec(new).get("schedulingGates") and _spec(old).get("schedulingGates"):
        actions.append("UpdatePodSchedulingGatesEliminated")
    # Tolerations can only be added, so a different count is the whole change.
    if len(_spec(new).get("tolerations") or []) != len(_spec(old).get("tolerations") or []):
        actions.append("UpdatePodToleration")
    return actions or ["Update"]


def pod_scheduling_properties_change(
    new: Mapping[str, Any], old: Mapping[str, Any]
) -> list[ClusterEvent]:
    """The UpdatePodXYZ events of a pod update; the plain Update when none applies."""
    resource = ASSIGNED_POD if _spec(new).get("nodeName") else UNSCHEDULED_POD
    return [ClusterEvent(resource, a) for a in pod_update_actions(new, old)]


def _allocatable(raw: Mapping[str, Any]) -> dict[str, int] | None:
    try:
        return allocatable_of(dict(raw))
    except (QuantityError, ValueError):
        return None


def _conditions(raw: Mapping[str, Any]) -> dict[str, Any]:
    return {c.get("type"): c.get("status") for c in _status(raw).get("conditions") or []}


def node_update_actions(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[str]:
    actions: list[str] = []
    # Turning spec.unschedulable off is reported as a taint change (kube's TODO).
    unschedulable = bool(_spec(new).get("unschedulable"))
    if unschedulable != bool(_spec(old).get("unschedulable")) and not unschedulable:
        actions.append("UpdateNodeTaint")
    if _allocatable(new) != _allocatable(old):
        actions.append("UpdateNodeAllocatable")
    if (_meta(new).get("labels") or {}) != (_meta(old).get("labels") or {}):
        actions.append("UpdateNodeLabel")
    taints_changed = (_spec(new).get("taints") or []) != (_spec(old).get("taints") or [])
    if taints_changed and "UpdateNodeTaint" not in actions:
        actions.append("UpdateNodeTaint")
    if _conditions(new) != _conditions(old):
        actions.append("UpdateNodeCondition")
    if (_meta(new).get("annotations") or {}) != (_meta(old).get("annotations") or {}):
        actions.append("UpdateNodeAnnotation")
    return actions


def node_scheduling_properties_change(
    new: Mapping[str, Any], old: Mapping[str, Any]
) -> list[ClusterEvent]:
    """The UpdateNodeXYZ events of a node update; none when nothing a plugin reads
    changed (a heartbeat, say), so such updates move no pod."""
    return [ClusterEvent(NODE, a) for a in node_update_actions(new, old)]
