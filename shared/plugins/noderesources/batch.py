"""The batch (columnar) path of the noderesources plugins: NodeResourcesFit's Filter
and every scorer over the snapshot's columns, in numpy. Each function gives what its
per-node form gives for every node at once, or None where only the per-node path is
exact (amounts too large for int64 arithmetic); tests/unit/test_batch_paths.py checks
the two paths against each other."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from shared.framework.columns import SAFE_AMOUNT, BoolArray, IntArray, NodeColumns
from shared.framework.interface import MAX_NODE_SCORE
from shared.framework.status import Code, Status
from shared.plugins.noderesources.args import (
    MAX_UTILIZATION,
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
    ResourceSpec,
    ScoringStrategy,
    UtilizationShapePoint,
)
from shared.plugins.noderesources.requested_to_capacity_ratio import node_score_shape
from shared.plugins.noderesources.resource_allocation import (
    ResourceAllocationScorer,
    ResourceScorerAll,
)
from shared.plugins.noderesources.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    REASON_TOO_MANY_PODS,
    insufficient_reason,
    is_scalar_resource_name,
)

# Above this allocatable, `amount * MaxNodeScore` could overflow int64: such nodes are
# scored by the per-node path, in Python's unbounded integers.
_MAX_BATCH_AMOUNT = (2**63 - 1) // (MAX_NODE_SCORE * MAX_UTILIZATION)


# --- Filter (NodeResourcesFit) --------------------------------------------------


def fits_all(wanted: Sequence[tuple[str, int]], nodes: NodeColumns) -> BoolArray | None:
    """fits_amounts for every node: which have room for `wanted` (as checked_requests
    gives it). None: leave it to the per-node path."""
    if nodes.oversized:
        return None
    fits = nodes.num_pods + 1 <= nodes.allocatable(PODS)
    for name, quantity in wanted:
        if quantity > SAFE_AMOUNT:
            return None
        if quantity > 0:
            fits &= quantity <= nodes.allocatable(name) - nodes.requested(name)
    # A column first built for this pod may just have met an oversized amount.
    return None if nodes.oversized else fits


def insufficient_statuses(
    wanted: Sequence[tuple[str, int]], nodes: NodeColumns, rows: IntArray, plugin: str
) -> list[Status] | None:
    """NodeResourcesFit's Filter status for each node at `rows` (nodes it rejects), from
    the columns: one status per distinct set of lacking resources, the reasons in
    fits_request's order. None: leave it to the per-node path."""
    if nodes.oversized or not len(rows):
        return None
    checks = [(REASON_TOO_MANY_PODS, nodes.num_pods[rows] + 1 > nodes.allocatable(PODS)[rows])]
    unresolvable = np.zeros(len(rows), dtype=np.bool_)
    for name, quantity in wanted:
        if quantity > SAFE_AMOUNT:
            return None
        if quantity <= 0:
            continue
        alloc = nodes.allocatable(name)[rows]
        lacking = quantity > alloc - nodes.requested(name)[rows]
        checks.append((insufficient_reason(name), lacking))
        unresolvable |= lacking & (quantity > alloc)
    if nodes.oversized:
        return None
    # each row's combination of lacking resources as one code, then one status each
    codes = unresolvable.astype(np.int64)
    for bit, (_, lacking) in enumerate(checks, start=1):
        codes |= lacking.astype(np.int64) << bit
    made: dict[int, tuple[Code, list[str]]] = {}
    for code in np.unique(codes).tolist():
        reasons = [r for bit, (r, _) in enumerate(checks, start=1) if code >> bit & 1]
        if not reasons:
            return None  # a row this plugin passes: not ours to explain
        kind = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if code & 1 else Code.UNSCHEDULABLE
        made[code] = (kind, reasons)
    return [Status(made[c][0], list(made[c][1]), plugin=plugin) for c in codes.tolist()]


# --- the scoring strategies (least_allocated.py, most_allocated.py, ...) ----------


def least_requested_scores(requested: IntArray, capacity: IntArray) -> IntArray:
    scores = (capacity - requested) * MAX_NODE_SCORE // np.maximum(capacity, 1)
    return np.where((capacity == 0) | (requested > capacity), 0, scores)


def least_requested_scores_counted(requested: IntArray, capacity: IntArray) -> IntArray:
    """least_requested_scores where every capacity is positive: over-committed is 0."""
    return np.maximum(capacity - requested, 0) * MAX_NODE_SCORE // capacity


def most_requested_scores(requested: IntArray, capacity: IntArray) -> IntArray:
    scores = np.minimum(requested, capacity) * MAX_NODE_SCORE // np.maximum(capacity, 1)
    return np.where(capacity == 0, 0, scores)


def most_requested_scores_counted(requested: IntArray, capacity: IntArray) -> IntArray:
    return np.minimum(requested, capacity) * MAX_NODE_SCORE // capacity


def all_counted(allocatable: list[IntArray]) -> bool:
    """Every node has every resource (the common case, which needs no masking)."""
    return bool(len(allocatable[0])) and all(int(alloc.min()) > 0 for alloc in allocatable)


def weighted_mean_scorer_all(
    resources: Sequence[ResourceSpec],
    per_resource: Callable[[IntArray, IntArray], IntArray],
    per_resource_counted: Callable[[IntArray, IntArray], IntArray],
) -> ResourceScorerAll:
    def score(requested: list[IntArray], allocatable: list[IntArray]) -> IntArray:
        if all_counted(allocatable):
            return counted(requested, allocatable)
        node_score = np.zeros(len(requested[0]), dtype=np.int64)
        weight_sum = np.zeros(len(requested[0]), dtype=np.int64)
        for i, spec in enumerate(resources):
            counted_here = allocatable[i] != 0
            node_score += np.where(counted_here, per_resource(requested[i], allocatable[i]), 0) * (
                spec.weight
            )
            weight_sum += np.where(counted_here, spec.weight, 0)
        return np.where(weight_sum > 0, node_score // np.maximum(weight_sum, 1), 0)

    def counted(requested: list[IntArray], allocatable: list[IntArray]) -> IntArray:
        # The same weighted mean with nothing to mask: a third of the array operations.
        total: IntArray | None = None
        for i, spec in enumerate(resources):
            one = per_resource_counted(requested[i], allocatable[i])
            if spec.weight != 1:
                one = one * spec.weight
            total = one if total is None else total + one
        assert total is not None
        weight_sum = sum(spec.weight for spec in resources)
        return total // weight_sum if weight_sum != 1 else total

    return score


def broken_linear_function_all(
    shape: Sequence[UtilizationShapePoint],
) -> Callable[[IntArray], IntArray]:
    """broken_linear_function over an array of utilizations."""

    def f(p: IntArray) -> IntArray:
        result = np.full(len(p), shape[-1].score, dtype=np.int64)
        done = np.zeros(len(p), dtype=np.bool_)
        for i, point in enumerate(shape):
            here = (p <= point.utilization) & ~done
            if i == 0:
                value = np.full(len(p), shape[0].score, dtype=np.int64)
            else:
                prev = shape[i - 1]
                rise = (point.score - prev.score) * (p - prev.utilization)
                run = point.utilization - prev.utilization  # > 0: points are increasing
                value = prev.score + np.sign(rise) * (np.abs(rise) // run)  # Go truncation
            result[here] = value[here]
            done |= here
        return result

    return f


def requested_to_capacity_ratio_scorer_all(
    resources: Sequence[ResourceSpec], shape: Sequence[UtilizationShapePoint]
) -> ResourceScorerAll:
    raw = broken_linear_function_all(node_score_shape(shape))

    def score(requested: list[IntArray], allocatable: list[IntArray]) -> IntArray:
        n = len(requested[0])
        node_score = np.zeros(n, dtype=np.int64)
        weight_sum = np.zeros(n, dtype=np.int64)
        for i, spec in enumerate(resources):
            req, cap = requested[i], allocatable[i]
            full = (cap == 0) | (req > cap)
            value = raw(
                np.where(full, MAX_UTILIZATION, req * MAX_UTILIZATION // np.maximum(cap, 1))
            )
            counted = (cap != 0) & (value > 0)  # resources scoring 0 do not count
            node_score += np.where(counted, value * spec.weight, 0)
            weight_sum += np.where(counted, spec.weight, 0)
        mean = node_score / np.maximum(weight_sum, 1)
        return np.where(weight_sum > 0, np.floor(mean + 0.5).astype(np.int64), 0)

    return score


def strategy_scorer_all(strategy: ScoringStrategy) -> ResourceScorerAll:
    if strategy.type == MOST_ALLOCATED:
        return weighted_mean_scorer_all(
            strategy.resources, most_requested_scores, most_requested_scores_counted
        )
    if strategy.type == REQUESTED_TO_CAPACITY_RATIO:
        assert strategy.shape is not None
        return requested_to_capacity_ratio_scorer_all(strategy.resources, strategy.shape)
    return weighted_mean_scorer_all(
        strategy.resources, least_requested_scores, least_requested_scores_counted
    )


# --- the resource-allocation scorer --------------------------------------------


def resource_columns(
    scorer: ResourceAllocationScorer,
    nodes: NodeColumns,
    rows: IntArray,
    pod_requests: Sequence[int],
) -> tuple[list[IntArray], list[IntArray]] | None:
    """ResourceAllocationScorer.allocatable_and_requested for the nodes at `rows`, per
    resource (allocatable 0 leaves the resource out on that node); None if amounts are
    too large to batch."""
    requested, allocatable = [], []
    zeros = np.zeros(len(rows), dtype=np.int64)
    # every amount in the columns, plus the largest request, stays in range: no need
    # to look at the rows
    within_bounds = not nodes.negative and (
        nodes.amount_bound + max(pod_requests, default=0) <= _MAX_BATCH_AMOUNT
    )
    for spec, pod_request in zip(scorer.resources, pod_requests, strict=True):
        name = spec.name
        if pod_request > _MAX_BATCH_AMOUNT:
            return None
        if pod_request == 0 and is_scalar_resource_name(name):
            alloc, used = zeros, zeros
        elif name in (CPU, MEMORY):
            alloc = nodes.allocatable(name)[rows]
            if scorer.use_requested:
                used = nodes.requested(name)[rows]
            else:
                used = (nodes.nonzero_cpu if name == CPU else nodes.nonzero_memory)[rows]
        elif name == EPHEMERAL_STORAGE or is_scalar_resource_name(name):
            alloc, used = nodes.allocatable(name)[rows], nodes.requested(name)[rows]
        else:
            alloc, used = zeros, zeros
        req = used + pod_request
        if (
            len(rows)
            and not within_bounds
            and (max(int(alloc.max()), int(req.max())) > _MAX_BATCH_AMOUNT or int(req.min()) < 0)
        ):
            return None
        allocatable.append(alloc)
        requested.append(req)
    return requested, allocatable


def allocation_scores(
    scorer: ResourceAllocationScorer,
    nodes: NodeColumns,
    rows: IntArray,
    pod_requests: Sequence[int],
) -> IntArray | None:
    """ResourceAllocationScorer.score for the nodes at `rows`; None: score them one by one."""
    if scorer.scorer_all is None or not scorer.resources:
        return None
    amounts = resource_columns(scorer, nodes, rows, pod_requests)
    if amounts is None:
        return None
    return scorer.scorer_all(*amounts)
