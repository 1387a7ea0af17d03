"""GangScheduling: all-or-nothing scheduling of gang pod groups, as kube-scheduler's
in-tree plugin (pkg/scheduler/framework/plugins/gangscheduling): 1.35's
scheduling.k8s.io/v1alpha1 Workload (KEP-4671), 1.36's v1alpha2 PodGroup (KEP-5832) and
1.37's v1beta1 PodGroup (read as v1alpha2's: the policy is at the same place).

In v1beta1 a gang's minCount may change after creation (shared/api/immutable.py): the
informers of the queue and the workers take the new object, and the next PreEnqueue or
Permit reads the new count ("may not take effect until the next cycle" upstream: pods
already waiting at Permit wait on until another member's Permit allows the gang, or
time out and are tried again). v1beta1's priority, priorityClassName, disruptionMode and
resourceClaims are validated and carried, not read: upstream's plugin reads only the
scheduling policy (its pod group priority serves the workload scheduling cycle and
preemption, which ksched does not have).

Implements: PreEnqueuePlugin, ReservePlugin, PermitPlugin, EnqueueExtensions.
Upstream it is alpha behind the GangScheduling feature gate, off by default; in ksched
it is registered but out of the default profile: a profile enables it in its plugins
(docs/configuration.md).

A pod is in a gang by spec.schedulingGroup {podGroupName} whose PodGroup object has the
policy `gang: {minCount}` (all the pods naming one PodGroup are one gang), or by
spec.workloadRef {name, podGroup, podGroupReplicaKey} whose Workload gives that pod
group that policy (pods with equal references are one gang). shared/api/workload.py
gang_of names the gang.

- PreEnqueue (queue): the pod waits outside activeQ until its PodGroup exists (or its
  Workload exists and names its pod group), and minCount pods of the gang exist
  (pending or bound).
- Permit (worker): Wait until minCount pods of the gang are assumed or bound, then
  allow the gang's waiting pods, wherever they wait. A pod that waits longer than the
  scheduling timeout is rejected and its resources freed (the binder's WaitOnPermit).
- Reserve / Unreserve: nothing to do here. Upstream marks the pod assumed in its
  workload manager; ksched counts assumed pods from the cache's snapshot instead.
"""

from __future__ import annotations

from typing import Any

from shared.api.podgroup import SchedulingPodGroup
from shared.api.validation import go_quote
from shared.api.workload import Workload, gang_of, scheduling_group_of
from shared.framework.cycle_state import CycleState
from shared.framework.events import ADD, POD, WORKLOAD, WORKLOAD_POD_GROUP
from shared.framework.handle import Handle
from shared.framework.interface import (
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    PermitPlugin,
    PreEnqueuePlugin,
    ReservePlugin,
)
from shared.framework.plugin_args import arg_error, reject_unknown
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import PodInfo
from shared.framework.waiting_pods import MAX_PERMIT_TIMEOUT

NAME = "GangScheduling"
# Upstream waits 5 minutes at Permit; ksched caps any wait at MAX_PERMIT_TIMEOUT.
DEFAULT_SCHEDULING_TIMEOUT_SECONDS = MAX_PERMIT_TIMEOUT
WAITING_FOR_PODS = "waiting for minCount pods from a gang to appear in scheduling queue"
WAITING_ON_PERMIT = "waiting for minCount pods from a gang to be waiting on permit"


def waiting_for_workload(name: str) -> str:
    return f'waiting for pods\'s workload "{name}" to appear in scheduling queue'


def waiting_for_pod_group(name: str) -> str:
    return f"waiting for pod's pod group {go_quote(name)} to appear in scheduling queue"


def no_pod_group(pod_group: str, workload: str) -> str:
    return f'pod group "{pod_group}" doesn\'t exist for a workload "{workload}"'


class GangScheduling(PreEnqueuePlugin, ReservePlugin, PermitPlugin, EnqueueExtensions):
    name = NAME

    def __init__(self, handle: Handle, timeout: float) -> None:
        self.handle = handle
        self.timeout = timeout

    # --- the gang of a pod ---------------------------------------------------------------

    def min_count(self, pod: PodInfo) -> tuple[int | None, Status]:
        """The minCount of the pod's gang; None with SUCCESS for a pod in no gang (no
        schedulingGroup nor workloadRef, or a `basic` policy), None with the reason while
        it cannot say. A schedulingGroup pod's policy is its PodGroup object's (1.36), a
        workloadRef pod's its Workload's pod group's (1.35)."""
        namespace = (pod.raw.get("metadata") or {}).get("namespace") or ""
        objects = self.handle.snapshot.objects
        group_name = scheduling_group_of(pod.raw)
        if group_name:
            group = objects.pod_groups.get(f"{namespace}/{group_name}")
            if group is None:
                return None, unresolvable(waiting_for_pod_group(group_name))
            return group.min_count, SUCCESS
        ref = (pod.raw.get("spec") or {}).get("workloadRef")
        if not ref:
            return None, SUCCESS
        name, pod_group = ref.get("name") or "", ref.get("podGroup") or ""
        workload = objects.workloads.get(f"{namespace}/{name}")
        if workload is None:
            return None, unresolvable(waiting_for_workload(name))
        policy = workload.policy(pod_group)
        if policy is None:
            return None, unresolvable(no_pod_group(pod_group, name))
        return (None if policy.gang is None else policy.gang.min_count), SUCCESS

    # --- PreEnqueue ---------------------------------------------------------------------

    def pre_enqueue(self, pod: PodInfo) -> Status:
        spec = pod.raw.get("spec") or {}
        if not spec.get("workloadRef") and not spec.get("schedulingGroup"):
            return SUCCESS  # from the raw pod: the queue runs this on every pod, unparsed
        min_count, status = self.min_count(pod)
        if min_count is None:
            return status
        members = self.handle.snapshot.objects.gang_members.get(gang_of(pod.raw), set())
        if len(members | {pod.key}) < min_count:
            return unresolvable(WAITING_FOR_PODS)
        return SUCCESS

    # --- Reserve / Permit ----------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        return None

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        min_count, status = self.min_count(pod)
        if min_count is None:
            # The Workload went away meanwhile: an error, retried when it comes back.
            return (SUCCESS if status.ok else Status(Code.ERROR, status.reasons)), 0.0
        gang = gang_of(pod.raw)
        if self.placed(gang, pod) < min_count:
            return Status(Code.WAIT, [WAITING_ON_PERMIT]), self.timeout
        namespace = (pod.raw.get("metadata") or {}).get("namespace") or ""
        self.handle.allow_waiting_pods(NAME, namespace, {}, gang=gang)
        return SUCCESS, 0.0

    def progress(self, pod: PodInfo) -> dict[str, int]:
        """How far the pod's gang is at Permit (what-if's report): its pods placed, this
        one included, and its minCount; {} for a pod in no gang."""
        min_count, _ = self.min_count(pod)
        if min_count is None:
            return {}
        return {"placed": self.placed(gang_of(pod.raw), pod), "minCount": min_count}

    def placed(self, gang: str, pod: PodInfo) -> int:
        """Pods of the gang on nodes of the snapshot (assumed, waiting or bound), this pod
        included. A pod another lane placed whose commit is still out is not counted:
        its assume may be refused (as Coscheduling counts)."""
        uncommitted = self.handle.uncommitted
        seen = {pod.key}
        for info in self.handle.snapshot.node_infos:
            for other in info.pods.values():
                if other.key not in uncommitted and gang_of(other.raw) == gang:
                    seen.add(other.key)
        return len(seen)

    # --- events -------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A new pod may complete a gang. workloadRef is immutable: no Pod/Update.
            ClusterEventWithHint(ClusterEvent(POD, ADD), self.is_schedulable_after_pod_added),
            # A Workload may make a waiting gang schedulable; its pod groups are immutable.
            ClusterEventWithHint(
                ClusterEvent(WORKLOAD, ADD), self.is_schedulable_after_workload_added
            ),
            # So may a PodGroup. Upstream registers PodGroup/Update too (v1beta1's
            # minCount lowered); ksched's queue reports any change of the object as this
            # Add event (services/queue), whose hint takes the gang's pods again.
            ClusterEventWithHint(
                ClusterEvent(WORKLOAD_POD_GROUP, ADD), self.is_schedulable_after_pod_group_added
            ),
        ]

    def is_schedulable_after_pod_added(
        self, pod: PodInfo, old: PodInfo | None, new: PodInfo | None
    ) -> bool:
        mine = gang_of(pod.raw)
        return bool(mine) and new is not None and gang_of(new.raw) == mine

    def is_schedulable_after_workload_added(
        self, pod: PodInfo, old: Workload | None, new: Workload | None
    ) -> bool:
        ref = (pod.raw.get("spec") or {}).get("workloadRef") or {}
        namespace = (pod.raw.get("metadata") or {}).get("namespace") or ""
        return new is not None and new.key == f"{namespace}/{ref.get('name') or ''}"

    def is_schedulable_after_pod_group_added(
        self, pod: PodInfo, old: SchedulingPodGroup | None, new: SchedulingPodGroup | None
    ) -> bool:
        namespace = (pod.raw.get("metadata") or {}).get("namespace") or ""
        name = scheduling_group_of(pod.raw)
        return bool(name) and new is not None and new.key == f"{namespace}/{name}"


def unresolvable(message: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [message])


def new(args: dict[str, Any], handle: Handle) -> GangScheduling:
    """kube's GangScheduling has no args; `schedulingTimeoutSeconds` is ksched's, to
    shorten the Permit wait (upstream's is fixed)."""
    reject_unknown(NAME, args, ("schedulingTimeoutSeconds",))
    seconds = args.get("schedulingTimeoutSeconds", DEFAULT_SCHEDULING_TIMEOUT_SECONDS)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
        raise arg_error(NAME, "schedulingTimeoutSeconds", f"must be positive, got {seconds!r}")
    if seconds > MAX_PERMIT_TIMEOUT:
        raise arg_error(NAME, "schedulingTimeoutSeconds", f"must be at most {MAX_PERMIT_TIMEOUT:g}")
    return GangScheduling(handle, float(seconds))
