"""NodeName: a pod that names its node (spec.nodeName) fits only there.

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

NAME = "NodeName"
ERR_REASON = "node(s) didn't match the requested node name"


class NodeName(FilterPlugin, EnqueueExtensions):
    name = NAME

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        wanted = pod.pod.spec.node_name
        if not wanted or wanted == node.name:
            return SUCCESS
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON])

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent("Node", "Add"))]


def new(args: dict[str, Any], handle: Handle) -> NodeName:
    reject_unknown(NAME, args, ())
    return NodeName()
