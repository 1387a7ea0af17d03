"""The LeastAllocated scoring strategy (kube-scheduler's least_allocated.go): favours
nodes with the most room left."""

from __future__ import annotations

from collections.abc import Sequence

from shared.framework.interface import MAX_NODE_SCORE
from shared.plugins.noderesources.args import ResourceSpec
from shared.plugins.noderesources.resource_allocation import ResourceScorer, weighted_mean_scorer


def least_requested_score(requested: int, capacity: int) -> int:
    """(capacity - requested) * MaxNodeScore / capacity; an over-committed node gets 0."""
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def least_resource_scorer(resources: Sequence[ResourceSpec]) -> ResourceScorer:
    return weighted_mean_scorer(resources, least_requested_score)
