"""The RequestedToCapacityRatio scoring strategy (kube-scheduler's
requested_to_capacity_ratio.go and helper/shape_score.go): each resource's
utilization scored by a broken-linear shape, weighted."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from shared.framework.interface import MAX_NODE_SCORE
from shared.framework.normalize import go_div, go_round
from shared.plugins.noderesources.args import (
    MAX_CUSTOM_PRIORITY_SCORE,
    MAX_UTILIZATION,
    ResourceSpec,
    UtilizationShapePoint,
)
from shared.plugins.noderesources.resource_allocation import ResourceScorer


def broken_linear_function(shape: Sequence[UtilizationShapePoint]) -> Callable[[int], int]:
    """helper.BuildBrokenLinearFunction: linear between points, flat outside them."""

    def f(p: int) -> int:
        for i, point in enumerate(shape):
            if p <= point.utilization:
                if i == 0:
                    return shape[0].score
                prev = shape[i - 1]
                rise = (point.score - prev.score) * (p - prev.utilization)
                return prev.score + go_div(rise, point.utilization - prev.utilization)
        return shape[-1].score

    return f


def node_score_shape(shape: Sequence[UtilizationShapePoint]) -> list[UtilizationShapePoint]:
    """Shape scores are on the config's 0-10 scale; scale them to the node score's 0-100."""
    scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    return [UtilizationShapePoint(p.utilization, p.score * scale) for p in shape]


def requested_to_capacity_ratio_scorer(
    resources: Sequence[ResourceSpec], shape: Sequence[UtilizationShapePoint]
) -> ResourceScorer:
    raw = broken_linear_function(node_score_shape(shape))

    def resource_score(requested: int, capacity: int) -> int:
        if capacity == 0 or requested > capacity:
            return raw(MAX_UTILIZATION)
        return raw(requested * MAX_UTILIZATION // capacity)

    def score(requested: list[int], allocatable: list[int]) -> int:
        node_score = weight_sum = 0
        for i, spec in enumerate(resources):
            if allocatable[i] == 0:
                continue
            value = resource_score(requested[i], allocatable[i])
            if value > 0:  # resources scoring 0 do not count toward the mean
                node_score += value * spec.weight
                weight_sum += spec.weight
        return go_round(node_score / weight_sum) if weight_sum else 0

    return score
