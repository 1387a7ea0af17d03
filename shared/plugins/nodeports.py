"""NodePorts: the pod's host ports must be free on the node.

Implements: PreFilterPlugin, FilterPlugin, EnqueueExtensions.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

import numpy as np

from shared.framework.columns import BoolArray, NodeColumns
from shared.framework.cycle_state import CycleState, StateKey
from shared.framework.events import ADD, DELETE, NODE, POD
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
from shared.framework.signature import resources_fragment
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import HostPort, NodeInfo, PodInfo

NAME = "NodePorts"
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
DEFAULT_BIND_ALL_HOST_IP = "0.0.0.0"
_WANTED = StateKey[tuple[HostPort, ...]]("PreFilter" + NAME)


def conflicts(wanted: Iterable[HostPort], used: Collection[HostPort]) -> bool:
    """HostPortInfo.CheckConflict for each wanted port: 0.0.0.0 conflicts with every IP on
    the same protocol and port, any other IP with itself and 0.0.0.0."""
    for ip, protocol, port in wanted:
        if ip == DEFAULT_BIND_ALL_HOST_IP:
            if any(u[1] == protocol and u[2] == port for u in used):
                return True
        elif (ip, protocol, port) in used or (DEFAULT_BIND_ALL_HOST_IP, protocol, port) in used:
            return True
    return False


class NodePorts(PreFilterPlugin, FilterPlugin, BatchFilterPlugin, EnqueueExtensions, SignPlugin):
    name = NAME

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | None:
        return [resources_fragment(pod)]  # the host ports are the containers'

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        wanted = pod.resources.host_ports
        if not wanted:
            return None, Status(Code.SKIP)
        state.write(_WANTED, wanted)
        return None, SUCCESS

    def pre_filter_extensions(self) -> None:
        return None

    def reads_only_the_node(self, pod: PodInfo) -> bool:
        """NodeOnlyFilter: preemption's dry run may skip this plugin once it passed."""
        return not pod.resources.host_ports  # wanting none, it conflicts with none

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        wanted = state.read(_WANTED)
        if wanted is None:  # PreFilter did not run: recompute what it would have written
            wanted = pod.resources.host_ports
        if conflicts(wanted, node.used_ports):
            return Status(Code.UNSCHEDULABLE, [ERR_REASON])
        return SUCCESS

    def filter_all(self, state: CycleState, pod: PodInfo, nodes: NodeColumns) -> BoolArray:
        wanted = state.read(_WANTED)
        if wanted is None:
            wanted = pod.resources.host_ports
        mask = np.ones(nodes.n, dtype=np.bool_)
        for row in np.flatnonzero(nodes.has_ports).tolist():  # few nodes use host ports
            mask[row] = not conflicts(wanted, nodes.infos[row].used_ports)
        return mask

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # Host ports are immutable, so only a deleted pod or a new node can free one.
        return [
            ClusterEventWithHint(ClusterEvent(POD, DELETE), self.is_schedulable_after_pod_deleted),
            ClusterEventWithHint(ClusterEvent(NODE, ADD)),
        ]

    def is_schedulable_after_pod_deleted(
        self, pod: PodInfo, old: PodInfo | None, new: PodInfo | None
    ) -> bool:
        """Queue when the deleted pod was placed (or nominated) and held a port this pod
        wants."""
        if old is None:
            return True  # the freed pod is unknown: assume it freed the port
        if not (old.pod.spec.node_name or old.pod.status.nominated_node_name):
            return False
        freed = old.resources.host_ports
        return bool(freed) and conflicts(pod.resources.host_ports, freed)


def new(args: dict[str, Any], handle: Handle) -> NodePorts:
    reject_unknown(NAME, args, ())
    return NodePorts()
