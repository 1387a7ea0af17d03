"""The MostAllocated scoring strategy (kube-scheduler's most_allocated.go): favours
the nodes already most requested, to pack pods."""

from __future__ import annotations

from collections.abc import Sequence

from shared.framework.interface import MAX_NODE_SCORE
from shared.plugins.noderesources.args import ResourceSpec
from shared.plugins.noderesources.resource_allocation import ResourceScorer, weighted_mean_scorer


def most_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    # Pods without requests count non-zero defaults, so requested may exceed capacity.
    requested = min(requested, capacity)
    return requested * MAX_NODE_SCORE // capacity


def most_resource_scorer(resources: Sequence[ResourceSpec]) -> ResourceScorer:
    return weighted_mean_scorer(resources, most_requested_score)
