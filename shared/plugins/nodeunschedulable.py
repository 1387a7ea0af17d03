"""NodeUnschedulable: a cordoned node (spec.unschedulable) takes only pods that tolerate
the node.kubernetes.io/unschedulable:NoSchedule taint.

Implements: FilterPlugin, EnqueueExtensions.
"""

from __future__ import annotations

from typing import Any

from shared.api.models import Taint
from shared.framework.columns import BoolArray, NodeColumns
from shared.framework.cycle_state import CycleState
from shared.framework.events import ADD, NODE, POD, UPDATE_NODE_TAINT, UPDATE_POD_TOLERATION
from shared.framework.handle import Handle
from shared.framework.interface import (
    BatchFilterPlugin,
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    FilterPlugin,
    SignFragment,
    SignPlugin,
)
from shared.framework.plugin_args import reject_unknown
from shared.framework.signature import tolerations_fragment
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.tainttoleration import tolerations_tolerate_taint

NAME = "NodeUnschedulable"
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
_UNSCHEDULABLE_TAINT = Taint(key=TAINT_NODE_UNSCHEDULABLE, effect="NoSchedule")


class NodeUnschedulable(FilterPlugin, BatchFilterPlugin, EnqueueExtensions, SignPlugin):
    name = NAME

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | None:
        return [tolerations_fragment(pod)]

    def reads_only_the_node(self, pod: PodInfo) -> bool:
        """NodeOnlyFilter: preemption's dry run may skip this plugin once it passed."""
        return True

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if not node.node.spec.unschedulable:
            return SUCCESS
        # A pod that tolerates the unschedulable taint also tolerates spec.unschedulable.
        if tolerations_tolerate_taint(pod.pod.spec.tolerations, _UNSCHEDULABLE_TAINT):
            return SUCCESS
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_UNSCHEDULABLE])

    def filter_all(self, state: CycleState, pod: PodInfo, nodes: NodeColumns) -> BoolArray:
        if not nodes.unschedulable.any() or tolerations_tolerate_taint(
            pod.pod.spec.tolerations, _UNSCHEDULABLE_TAINT
        ):
            return nodes.everyone
        return ~nodes.unschedulable

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(NODE, ADD), self.is_schedulable_after_node_change),
            ClusterEventWithHint(
                ClusterEvent(NODE, UPDATE_NODE_TAINT), self.is_schedulable_after_node_change
            ),
            ClusterEventWithHint(
                ClusterEvent(POD, UPDATE_POD_TOLERATION),
                self.is_schedulable_after_pod_toleration_change,
            ),
        ]

    def is_schedulable_after_node_change(
        self, pod: PodInfo, old: NodeInfo | None, new: NodeInfo
    ) -> bool:
        """Queue for a schedulable new node, or a node that was uncordoned."""
        if new.node.spec.unschedulable:
            return False
        return old is None or old.node.spec.unschedulable

    def is_schedulable_after_pod_toleration_change(
        self, pod: PodInfo, old: PodInfo | None, new: PodInfo
    ) -> bool:
        """Queue when the rejected pod itself now tolerates the unschedulable taint."""
        return new.pod.metadata.uid == pod.pod.metadata.uid and tolerations_tolerate_taint(
            new.pod.spec.tolerations, _UNSCHEDULABLE_TAINT
        )


def new(args: dict[str, Any], handle: Handle) -> NodeUnschedulable:
    reject_unknown(NAME, args, ())
    return NodeUnschedulable()
