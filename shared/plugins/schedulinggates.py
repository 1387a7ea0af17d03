"""SchedulingGates: a pod with scheduling gates waits outside activeQ until they are removed.

Implements: PreEnqueuePlugin, EnqueueExtensions.
"""

from __future__ import annotations

from typing import Any

from shared.framework.events import POD, UPDATE_POD_SCHEDULING_GATES_ELIMINATED
from shared.framework.handle import Handle
from shared.framework.interface import (
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    PreEnqueuePlugin,
)
from shared.framework.plugin_args import reject_unknown
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import PodInfo

NAME = "SchedulingGates"


class SchedulingGates(PreEnqueuePlugin, EnqueueExtensions):
    name = NAME

    def pre_enqueue(self, pod: PodInfo) -> Status:
        if not (pod.raw.get("spec") or {}).get("schedulingGates"):
            return SUCCESS  # from the raw pod: the queue runs this on every pod, unparsed
        gates = [g.name for g in pod.pod.spec.scheduling_gates]
        # Go prints the slice as [a b].
        return Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            [f"waiting for scheduling gates: [{' '.join(gates)}]"],
        )

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(POD, UPDATE_POD_SCHEDULING_GATES_ELIMINATED),
                self.is_schedulable_after_update_pod_scheduling_gates_eliminated,
            )
        ]

    def is_schedulable_after_update_pod_scheduling_gates_eliminated(
        self, pod: PodInfo, old: PodInfo | None, new: PodInfo
    ) -> bool:
        """Only the pod whose gates were removed is released."""
        return new.pod.metadata.uid == pod.pod.metadata.uid


def new(args: dict[str, Any], handle: Handle) -> SchedulingGates:
    reject_unknown(NAME, args, ())
    return SchedulingGates()
