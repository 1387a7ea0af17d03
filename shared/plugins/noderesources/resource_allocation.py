"""The scorer that NodeResourcesFit's strategies and NodeResourcesBalancedAllocation
share (kube-scheduler's resource_allocation.go). Its columnar form is in batch.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from shared.framework.columns import IntArray
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.noderesources.args import ResourceSpec
from shared.plugins.noderesources.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    is_scalar_resource_name,
)

ResourceScorer = Callable[[list[int], list[int]], int]
# The same over arrays of nodes: per resource, requested and allocatable of every node.
ResourceScorerAll = Callable[[list[IntArray], list[IntArray]], IntArray]


def weighted_mean_scorer(
    resources: Sequence[ResourceSpec], per_resource: Callable[[int, int], int]
) -> ResourceScorer:
    """The mean of the per-resource scores, weighted, over the resources the node has
    (LeastAllocated and MostAllocated)."""

    def score(requested: list[int], allocatable: list[int]) -> int:
        node_score = weight_sum = 0
        for i, spec in enumerate(resources):
            if allocatable[i] == 0:
                continue
            node_score += per_resource(requested[i], allocatable[i]) * spec.weight
            weight_sum += spec.weight
        return node_score // weight_sum if weight_sum else 0

    return score


@dataclass(frozen=True)
class ResourceAllocationScorer:
    """resourceAllocationScorer: per configured resource, the node's allocatable and what
    would be requested with the pod there, fed to a strategy's scorer."""

    resources: tuple[ResourceSpec, ...]
    scorer: ResourceScorer
    scorer_all: ResourceScorerAll | None = None  # the batch form, where there is one
    # False: cpu and memory count non-zero requests (defaults for pods requesting none).
    use_requested: bool = False

    def pod_requests(self, pod: PodInfo) -> list[int]:
        """calculatePodResourceRequestList, in the order of `resources`."""
        return [self._pod_request(pod, spec.name) for spec in self.resources]

    def _pod_request(self, pod: PodInfo, name: str) -> int:
        if not self.use_requested and name == CPU:
            return pod.resources.scored_cpu
        if not self.use_requested and name == MEMORY:
            return pod.resources.scored_memory
        return pod.resources.requests.get(name, 0)

    def allocatable_and_requested(
        self, node: NodeInfo, name: str, pod_request: int
    ) -> tuple[int, int]:
        """calculateResourceAllocatableRequest; (0, 0) leaves the resource out of scoring."""
        if pod_request == 0 and is_scalar_resource_name(name):
            return 0, 0  # an extended resource the pod does not request
        if name == CPU:
            used = node.requested.get(CPU, 0) if self.use_requested else node.nonzero_cpu
            return node.allocatable.get(CPU, 0), used + pod_request
        if name == MEMORY:
            used = node.requested.get(MEMORY, 0) if self.use_requested else node.nonzero_memory
            return node.allocatable.get(MEMORY, 0), used + pod_request
        if name == EPHEMERAL_STORAGE or (
            is_scalar_resource_name(name) and name in node.allocatable
        ):
            return node.allocatable.get(name, 0), node.requested.get(name, 0) + pod_request
        return 0, 0

    def score(self, node: NodeInfo, pod_requests: Sequence[int]) -> tuple[int, Status]:
        if not self.resources:
            return 0, Status(Code.ERROR, ["resources not found"])
        requested = [0] * len(self.resources)
        allocatable = [0] * len(self.resources)
        for i, spec in enumerate(self.resources):
            alloc, req = self.allocatable_and_requested(node, spec.name, pod_requests[i])
            if alloc == 0:
                continue
            allocatable[i], requested[i] = alloc, req
        return self.scorer(requested, allocatable), SUCCESS
