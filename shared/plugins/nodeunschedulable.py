"""NodeUnschedulable: a cordoned node (spec.unschedulable) takes only pods that tolerate
the node.kubernetes.io/unschedulable:NoSchedule taint.

Implements: FilterPlugin, EnqueueExtensions.
"""

from __future__ import annotations

from typing import Any

from shared.framework.cycle_state import CycleState
from shared.framework.interface import (
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    FilterPlugin,
)
from shared.framework.snapshot import Handle
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.args import reject_unknown

NAME = "NodeUnschedulable"
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"


class NodeUnschedulable(FilterPlugin, EnqueueExtensions):
    name = NAME

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if not node.node.spec.unschedulable:
            return SUCCESS
        for tol in pod.pod.spec.tolerations:
            key_ok = tol.key == TAINT_NODE_UNSCHEDULABLE or (
                tol.key == "" and tol.operator == "Exists"
            )
            effect_ok = tol.effect in ("", "NoSchedule")
            if key_ok and effect_ok and (tol.operator == "Exists" or tol.value == ""):
                return SUCCESS
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_UNSCHEDULABLE])

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent("Node", "Add")),
            ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeTaint")),
        ]


def new(args: dict[str, Any], handle: Handle) -> NodeUnschedulable:
    reject_unknown(NAME, args, ())
    return NodeUnschedulable()
