"""NodeResourcesFit: does the node have room for the pod's requests (Filter), and how
much room is left (Score, LeastAllocated strategy).

Implements: FilterPlugin, ScorePlugin.
"""

from __future__ import annotations

from shared.framework.interface import MAX_NODE_SCORE
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import NodeInfo, PodInfo

NAME = "NodeResourcesFit"
REASON_TOO_MANY_PODS = "Too many pods"
CORE_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


def fit_reasons(pod: PodInfo, node: NodeInfo) -> tuple[list[str], bool]:
    """The reasons the pod does not fit, and whether any is unresolvable.

    A request larger than the node's whole allocatable can never fit there, so
    (as in current kube-scheduler) that case is UnschedulableAndUnresolvable.
    """
    reasons: list[str] = []
    unresolvable = False
    if node.num_pods + 1 > node.allowed_pod_number:
        reasons.append(REASON_TOO_MANY_PODS)
    requests = pod.resources.requests
    if not any(v > 0 for k, v in requests.items() if k != "pods"):
        return reasons, unresolvable
    ordered = [r for r in CORE_RESOURCES if r in requests]
    ordered += sorted(r for r in requests if r not in CORE_RESOURCES and r != "pods")
    for resource in ordered:
        want = requests[resource]
        if want <= 0:
            continue
        free = node.allocatable.get(resource, 0) - node.requested.get(resource, 0)
        if want > free:
            reasons.append(insufficient(resource))
            unresolvable = unresolvable or want > node.allocatable.get(resource, 0)
    return reasons, unresolvable


class NodeResourcesFit:
    name = NAME

    def filter(self, pod: PodInfo, node: NodeInfo) -> Status:
        reasons, unresolvable = fit_reasons(pod, node)
        if not reasons:
            return SUCCESS
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
        return Status(code, reasons)

    def score(self, pod: PodInfo, node: NodeInfo) -> int:
        """LeastAllocated over cpu and memory, weight 1 each, on non-zero requests."""
        total = 0
        weights = 0
        for resource, requested in (
            ("cpu", node.nonzero_cpu + pod.resources.nonzero_cpu),
            ("memory", node.nonzero_memory + pod.resources.nonzero_memory),
        ):
            total += least_requested_score(requested, node.allocatable.get(resource, 0))
            weights += 1
        return total // weights


def least_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity
