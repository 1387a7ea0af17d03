"""Coscheduling: gang scheduling, as scheduler-plugins' coscheduling plugin.

Implements: QueueSortPlugin, PreFilterPlugin, PermitPlugin, ReservePlugin
(for Unreserve), EnqueueExtensions. Not in the default profile.

- QueueSort: priority, then the group's first-seen time (a pod in no group: its
  first attempt), then the group's name, so a group's pods leave activeQ together.
- PreFilter: a group with fewer existing pods than minMember is rejected
  (UnschedulableAndUnresolvable) before any node is looked at.
- Permit: wait until minMember pods of the group are assumed or bound (the
  worker's snapshot counts assumed, waiting and bound pods alike), then allow the
  group's waiting pods, wherever they wait.
- Unreserve: a member that fails (rejected, timed out, bind failed) rejects the
  group's waiting pods, which frees their resources.
A pod labelled with a group that has neither a PodGroup object nor the
min-available annotation is scheduled as a regular pod (as upstream).
"""

from __future__ import annotations

from typing import Any

from shared.api.models import object_key
from shared.framework.cycle_state import CycleState
from shared.framework.events import ADD, POD
from shared.framework.handle import Handle
from shared.framework.interface import (
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    PermitPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    QueuedSortablePod,
    QueueSortKeyPlugin,
    QueueSortPlugin,
    ReservePlugin,
    SortablePod,
)
from shared.framework.plugin_args import arg_error, reject_unknown
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import NodeInfo, PodInfo
from shared.podgroups import MIN_AVAILABLE_ANNOTATION, POD_GROUP_LABEL, POD_GROUP_RESOURCE

NAME = "Coscheduling"
DEFAULT_PERMIT_WAITING_TIME_SECONDS = 60
REJECTION_IN_UNRESERVE = "rejection in Unreserve"


def not_enough_siblings(pod_name: str, have: int, min_member: int) -> str:
    return (
        f"pre-filter pod {pod_name} cannot find enough sibling pods, "
        f"current pods number: {have}, minMember of group: {min_member}"
    )


class Coscheduling(
    QueueSortPlugin,
    QueueSortKeyPlugin,
    PreFilterPlugin,
    PermitPlugin,
    ReservePlugin,
    EnqueueExtensions,
):
    name = NAME

    def __init__(self, handle: Handle, permit_waiting_time: float) -> None:
        self.handle = handle
        self.permit_waiting_time = permit_waiting_time
        self._group_seen: dict[str, float] = {}  # group -> first time the queue saw it

    # --- the group of a pod -------------------------------------------------------

    def group(self, pod: PodInfo) -> tuple[str, int, float] | None:
        """(group key, minMember, timeout) for a pod in a gang, else None."""
        meta = pod.pod.metadata
        name = meta.labels.get(POD_GROUP_LABEL)
        if not name:
            return None
        key = object_key(meta.namespace, name)
        record = self.handle.pod_groups.get(key) or {}
        if record.get("object"):
            min_member = int(record.get("min_member") or 0)
            timeout = record.get("timeout")
        else:
            try:
                min_member = int(meta.annotations.get(MIN_AVAILABLE_ANNOTATION, ""))
            except ValueError:
                return None
            timeout = None
        if min_member <= 0:
            return None
        wait = float(timeout) if timeout else self.permit_waiting_time
        return key, min_member, wait

    # --- QueueSort ----------------------------------------------------------------

    def sort_key(self, pod: QueuedSortablePod) -> tuple[Any, ...]:
        meta = (pod.raw.get("metadata") or {}) if pod.raw else {}
        first = pod.initial_attempt_timestamp or pod.timestamp
        group = (meta.get("labels") or {}).get(POD_GROUP_LABEL)
        if not group:
            return (-pod.priority, first, pod.key, pod.key)
        key = object_key(meta.get("namespace") or "", group)
        seen = self._group_seen.setdefault(key, first)
        return (-pod.priority, seen, key, pod.key)

    def less(self, a: SortablePod, b: SortablePod) -> bool:
        return self.sort_key(a) < self.sort_key(b)  # type: ignore[arg-type]

    # --- PreFilter ----------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        group = self.group(pod)
        if group is None:
            return None, Status(Code.SKIP)
        key, min_member, _ = group
        have = int((self.handle.pod_groups.get(key) or {}).get("members") or 0)
        if have < min_member:
            message = not_enough_siblings(pod.pod.metadata.name, have, min_member)
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [message])
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    # --- Permit ---------------------------------------------------------------------

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        group = self.group(pod)
        if group is None:
            return SUCCESS, 0.0
        key, min_member, wait = group
        if self.assigned(key, pod) < min_member:
            return Status(Code.WAIT), wait
        namespace, _, name = key.partition("/")
        self.handle.allow_waiting_pods(NAME, namespace, {POD_GROUP_LABEL: name})
        return SUCCESS, 0.0

    def assigned(self, key: str, pod: PodInfo) -> int:
        """Pods of the group on nodes of the snapshot (assumed, waiting or bound), this
        pod included: the worker has already assumed it there. A pod another lane has
        placed but the cache has not committed is not counted: its assume may be refused."""
        namespace, _, name = key.partition("/")
        uncommitted = self.handle.uncommitted
        seen = {pod.key}
        for info in self.handle.snapshot.node_infos:
            for other in info.pods.values():
                meta = other.pod.metadata
                if (
                    meta.namespace == namespace
                    and meta.labels.get(POD_GROUP_LABEL) == name
                    and other.key not in uncommitted
                ):
                    seen.add(other.key)
        return len(seen)

    # --- Reserve / Unreserve -------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        group = self.group(pod)
        if group is None:
            return
        namespace, _, name = group[0].partition("/")
        self.handle.reject_waiting_pods(
            NAME, namespace, {POD_GROUP_LABEL: name}, REJECTION_IN_UNRESERVE
        )

    # --- events ---------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(POD, ADD), self.is_sibling),
            ClusterEventWithHint(ClusterEvent(POD_GROUP_RESOURCE, "Add|Update")),
        ]

    def is_sibling(self, pod: PodInfo, old: PodInfo | None, new: PodInfo | None) -> bool:
        """A new pod of the same group may give a rejected group enough members."""
        if new is None:
            return False
        mine, theirs = pod.pod.metadata, new.pod.metadata
        group = mine.labels.get(POD_GROUP_LABEL)
        return bool(group) and (
            theirs.namespace == mine.namespace and theirs.labels.get(POD_GROUP_LABEL) == group
        )


def new(args: dict[str, Any], handle: Handle) -> Coscheduling:
    reject_unknown(NAME, args, ("permitWaitingTimeSeconds",))
    seconds = args.get("permitWaitingTimeSeconds", DEFAULT_PERMIT_WAITING_TIME_SECONDS)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
        raise arg_error(NAME, "permitWaitingTimeSeconds", f"must be positive, got {seconds!r}")
    return Coscheduling(handle, float(seconds))
