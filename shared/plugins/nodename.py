"""NodeName: a pod that names its node (spec.nodeName) fits only there.

Implements: PreFilterPlugin, FilterPlugin, EnqueueExtensions.
"""

from __future__ import annotations

from typing import Any

from shared.framework.columns import BoolArray, NodeColumns
from shared.framework.cycle_state import CycleState
from shared.framework.events import ADD, NODE
from shared.framework.handle import Handle
from shared.framework.interface import (
    BatchFilterPlugin,
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    SignFragment,
    SignPlugin,
)
from shared.framework.plugin_args import reject_unknown
from shared.framework.signature import node_name_fragment
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import NodeInfo, PodInfo

NAME = "NodeName"
ERR_REASON = "node(s) didn't match the requested node name"


def fits(pod: PodInfo, node: NodeInfo) -> bool:
    wanted = pod.pod.spec.node_name
    return not wanted or wanted == node.name


class NodeName(PreFilterPlugin, FilterPlugin, BatchFilterPlugin, EnqueueExtensions, SignPlugin):
    name = NAME

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | None:
        return [node_name_fragment(pod)]

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        # Only the named node needs Filter; the others are not even evaluated.
        wanted = pod.pod.spec.node_name
        return (PreFilterResult({wanted}) if wanted else None), SUCCESS

    def pre_filter_extensions(self) -> None:
        return None

    def reads_only_the_node(self, pod: PodInfo) -> bool:
        """NodeOnlyFilter: preemption's dry run may skip this plugin once it passed."""
        return True

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if fits(pod, node):
            return SUCCESS
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON])

    def filter_all(self, state: CycleState, pod: PodInfo, nodes: NodeColumns) -> BoolArray:
        wanted = pod.pod.spec.node_name
        return nodes.name_mask((wanted,)) if wanted else nodes.everyone

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # No queueing hint: a new node always warrants a retry.
        return [ClusterEventWithHint(ClusterEvent(NODE, ADD))]


def new(args: dict[str, Any], handle: Handle) -> NodeName:
    reject_unknown(NAME, args, ())
    return NodeName()
