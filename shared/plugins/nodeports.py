"""NodePorts: the pod's host ports must be free on the node.

Implements: PreFilterPlugin, FilterPlugin, EnqueueExtensions.
"""

from __future__ import annotations

from typing import Any

from shared.framework.cycle_state import CycleState, StateKey
from shared.framework.interface import (
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
)
from shared.framework.snapshot import Handle
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import HostPort, NodeInfo, PodInfo
from shared.plugins.args import reject_unknown

NAME = "NodePorts"
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
DEFAULT_BIND_ALL_HOST_IP = "0.0.0.0"
_WANTED = StateKey[tuple[HostPort, ...]]("PreFilter" + NAME)


def conflicts(wanted: tuple[HostPort, ...], used: Any) -> bool:
    """0.0.0.0 conflicts with every IP on the same protocol and port, as HostPortInfo."""
    for ip, protocol, port in wanted:
        for used_ip, used_protocol, used_port in used:
            if port != used_port or protocol != used_protocol:
                continue
            if ip == used_ip or DEFAULT_BIND_ALL_HOST_IP in (ip, used_ip):
                return True
    return False


class NodePorts(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    name = NAME

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

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        wanted = state.read(_WANTED)
        if wanted is None:
            wanted = pod.resources.host_ports
        if conflicts(wanted, node.used_ports):
            return Status(Code.UNSCHEDULABLE, [ERR_REASON])
        return SUCCESS

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent("Pod", "Delete")),
            ClusterEventWithHint(ClusterEvent("Node", "Add")),
        ]


def new(args: dict[str, Any], handle: Handle) -> NodePorts:
    reject_unknown(NAME, args, ())
    return NodePorts()
