"""NodeResourcesBalancedAllocation: favours nodes whose requested fractions of the
configured resources stay close to each other once the pod is there.
kube-scheduler's pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go.

score = (1 - std) * MaxNodeScore, std being the standard deviation of the fractions
requested / allocatable (each capped at 1), over the resources the node has.

Implements: PreScorePlugin, ScorePlugin.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from shared.framework.columns import IntArray, NodeColumns
from shared.framework.cycle_state import CycleState, StateKey
from shared.framework.handle import Handle
from shared.framework.interface import (
    MAX_NODE_SCORE,
    BatchScorePlugin,
    PreScorePlugin,
    ScoreExtensions,
    ScorePlugin,
    SignFragment,
    SignPlugin,
)
from shared.framework.plugin_args import ArgsParser
from shared.framework.signature import resources_fragment
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.noderesources.args import ResourceSpec, resource_specs
from shared.plugins.noderesources.batch import all_counted, allocation_scores
from shared.plugins.noderesources.resource_allocation import ResourceAllocationScorer

NAME = "NodeResourcesBalancedAllocation"

PRE_SCORE_STATE_KEY: StateKey[list[int]] = StateKey("PreScore" + NAME)


@dataclass(frozen=True)
class BalancedAllocationArgs:
    resources: tuple[ResourceSpec, ...]


def parse_args(args: Mapping[str, Any]) -> BalancedAllocationArgs:
    """v1 NodeResourcesBalancedAllocationArgs: defaults (cpu and memory; weight 0 means 1)
    and ValidateNodeResourcesBalancedAllocationArgs (unique names, every weight 1)."""
    parser = ArgsParser(NAME)
    args = parser.mapping(args, "", ("resources",))
    resources = resource_specs(parser, args.get("resources"), "resources")
    seen: set[str] = set()
    for i, spec in enumerate(resources):
        if spec.name in seen:
            raise parser.error(f"resources[{i}].name", f"Duplicate value: {spec.name!r}")
        seen.add(spec.name)
        if spec.weight != 1:
            raise parser.error(f"resources[{i}].weight", f"Invalid value: {spec.weight}: must be 1")
    return BalancedAllocationArgs(resources)


def balanced_resource_score(requested: list[int], allocatable: list[int]) -> int:
    """balancedResourceScorer, in float64 as kube-scheduler computes it."""
    fractions = [
        min(float(req) / float(alloc), 1.0)
        for req, alloc in zip(requested, allocatable, strict=True)
        if alloc != 0
    ]
    std = 0.0
    if len(fractions) == 2:  # the common cpu+memory case, simplified as upstream
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = _go_sum(fractions) / len(fractions)
        std = math.sqrt(_go_sum([(f - mean) * (f - mean) for f in fractions]) / len(fractions))
    return int((1 - std) * float(MAX_NODE_SCORE))


def balanced_resource_scores(requested: list[IntArray], allocatable: list[IntArray]) -> IntArray:
    """balanced_resource_score over arrays of nodes, in the same float64 operations.
    Nodes lacking some resource (allocatable 0) drop it from their fractions; they are
    few, and scored one by one."""
    n = len(requested[0])
    if len(requested) == 2 and all_counted(allocatable):
        # The common cpu+memory case on nodes that have both: nothing to mask.
        first = np.minimum(requested[0] / allocatable[0], 1.0)
        second = np.minimum(requested[1] / allocatable[1], 1.0)
        return ((1 - np.abs((first - second) / 2)) * float(MAX_NODE_SCORE)).astype(np.int64)
    has_all = np.ones(n, dtype=np.bool_)
    for alloc in allocatable:
        has_all &= alloc != 0
    fractions = [
        np.minimum(req.astype(np.float64) / np.maximum(alloc, 1).astype(np.float64), 1.0)
        for req, alloc in zip(requested, allocatable, strict=True)
    ]
    if len(fractions) == 2:
        std = np.abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        total = np.zeros(n)
        for f in fractions:
            total = total + f
        mean = total / len(fractions)
        squares = np.zeros(n)
        for f in fractions:
            squares = squares + (f - mean) * (f - mean)
        std = np.sqrt(squares / len(fractions))
    else:
        std = np.zeros(n)
    scores = ((1 - std) * float(MAX_NODE_SCORE)).astype(np.int64)
    for row in np.flatnonzero(~has_all).tolist():
        scores[row] = balanced_resource_score(
            [int(r[row]) for r in requested], [int(a[row]) for a in allocatable]
        )
    return scores


def _go_sum(values: list[float]) -> float:
    # Plain left-to-right addition as Go does (newer Pythons' sum() compensates rounding).
    total = 0.0
    for value in values:
        total += value
    return total


def is_best_effort(pod_requests: list[int]) -> bool:
    return not any(pod_requests)


class BalancedAllocation(PreScorePlugin, ScorePlugin, BatchScorePlugin, SignPlugin):
    name = NAME

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | None:
        return [resources_fragment(pod)]

    def __init__(self, args: BalancedAllocationArgs, handle: Handle) -> None:
        self.handle = handle
        # Requested, not non-zero, requests: a pod's defaults must not skew the balance.
        self.scorer = ResourceAllocationScorer(
            args.resources, balanced_resource_score, balanced_resource_scores, use_requested=True
        )

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        pod_requests = self.scorer.pod_requests(pod)
        if is_best_effort(pod_requests):
            # Scoring best-effort pods would pile them onto one node (kubernetes#129138).
            return Status(Code.SKIP)
        state.write(PRE_SCORE_STATE_KEY, pod_requests)
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        pod_requests = state.read(PRE_SCORE_STATE_KEY)
        if pod_requests is None:
            pod_requests = self.scorer.pod_requests(pod)
            if is_best_effort(pod_requests):
                return 0, SUCCESS
        return self.scorer.score(node, pod_requests)

    def score_all(
        self, state: CycleState, pod: PodInfo, nodes: NodeColumns, rows: IntArray
    ) -> IntArray | None:
        pod_requests = state.read(PRE_SCORE_STATE_KEY)
        if pod_requests is None:
            return None  # PreScore skipped or did not run: the per-node path decides
        return allocation_scores(self.scorer, nodes, rows, pod_requests)

    def score_extensions(self) -> ScoreExtensions | None:
        return None


def new(args: dict[str, Any], handle: Handle) -> BalancedAllocation:
    return BalancedAllocation(parse_args(args), handle)
