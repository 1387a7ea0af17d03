"""NodeResourcesFit: does the node have room for the pod's requests (PreFilter/Filter), and
how much room is left (PreScore/Score, by the configured scoring strategy).
kube-scheduler's pkg/scheduler/framework/plugins/noderesources (fit.go,
resource_allocation.go, least_allocated.go, most_allocated.go,
requested_to_capacity_ratio.go) and helper/shape_score.go.

Implements: PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions.
The resource-allocation scorer here is shared with NodeResourcesBalancedAllocation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from shared.api.validation import qualified_name_errors
from shared.framework.columns import SAFE_AMOUNT, BoolArray, IntArray, NodeColumns
from shared.framework.cycle_state import CycleState, StateKey
from shared.framework.interface import (
    MAX_NODE_SCORE,
    BatchFilterPlugin,
    BatchScorePlugin,
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    FilterPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from shared.framework.normalize import go_round
from shared.framework.plugin_args import ArgsParser
from shared.framework.snapshot import Handle
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import NodeInfo, PodInfo

NAME = "NodeResourcesFit"

REASON_TOO_MANY_PODS = "Too many pods"

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
SCORING_STRATEGY_TYPES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)

MAX_RESOURCE_WEIGHT = 100
MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10  # the shape's score scale in the config

PRE_FILTER_STATE_KEY: StateKey[PreFilterState] = StateKey("PreFilter" + NAME)
PRE_SCORE_STATE_KEY: StateKey[list[int]] = StateKey("PreScore" + NAME)


def insufficient_reason(resource: str) -> str:
    return f"Insufficient {resource}"


# --- resource names (k8s.io/kubernetes/pkg/apis/core/v1/helper) ---------------

_RESOURCE_DEFAULT_NAMESPACE_PREFIX = "kubernetes.io/"
_DEFAULT_RESOURCE_REQUESTS_PREFIX = "requests."
_HUGEPAGES_PREFIX = "hugepages-"
_ATTACHABLE_VOLUMES_PREFIX = "attachable-volumes-"


def is_qualified_name(value: str) -> bool:
    """validation.IsQualifiedName: [DNS-subdomain prefix '/'] name of at most 63 characters."""
    return not qualified_name_errors(value)


def is_prefixed_native_resource(name: str) -> bool:
    return _RESOURCE_DEFAULT_NAMESPACE_PREFIX in name


def is_extended_resource_name(name: str) -> bool:
    """Not native (has a '/' outside kubernetes.io), and valid as a quota name."""
    if "/" not in name or is_prefixed_native_resource(name):
        return False
    if name.startswith(_DEFAULT_RESOURCE_REQUESTS_PREFIX):
        return False
    return is_qualified_name(_DEFAULT_RESOURCE_REQUESTS_PREFIX + name)


def is_scalar_resource_name(name: str) -> bool:
    """The names framework.Resource keeps in ScalarResources; others are not accounted."""
    return (
        is_extended_resource_name(name)
        or name.startswith(_HUGEPAGES_PREFIX)
        or is_prefixed_native_resource(name)
        or name.startswith(_ATTACHABLE_VOLUMES_PREFIX)
    )


# --- args ----------------------------------------------------------------------


@dataclass(frozen=True)
class ResourceSpec:
    name: str
    weight: int


@dataclass(frozen=True)
class UtilizationShapePoint:
    utilization: int
    score: int


@dataclass(frozen=True)
class ScoringStrategy:
    type: str
    resources: tuple[ResourceSpec, ...]
    shape: tuple[UtilizationShapePoint, ...] | None = None  # RequestedToCapacityRatio only


@dataclass(frozen=True)
class NodeResourcesFitArgs:
    ignored_resources: frozenset[str]
    ignored_resource_groups: frozenset[str]
    scoring_strategy: ScoringStrategy


DEFAULT_RESOURCES = (ResourceSpec(CPU, 1), ResourceSpec(MEMORY, 1))


def resource_specs(parser: ArgsParser, value: Any, path: str) -> tuple[ResourceSpec, ...]:
    """[]ResourceSpec with SetDefaults: none means cpu and memory, weight 0 means 1."""
    specs = []
    for i, raw in enumerate(parser.items(value, path)):
        item = parser.mapping(raw, f"{path}[{i}]", ("name", "weight"))
        name = parser.string(item.get("name"), f"{path}[{i}].name")
        weight = parser.integer(item.get("weight"), f"{path}[{i}].weight") or 1
        specs.append(ResourceSpec(name, weight))
    return tuple(specs) or DEFAULT_RESOURCES


def _validate_label_name(parser: ArgsParser, value: str, path: str) -> None:
    if not is_qualified_name(value):
        raise parser.error(
            path,
            f"Invalid value: {value!r}: name part must consist of alphanumeric characters, "
            "'-', '_' or '.', and must start and end with an alphanumeric character, "
            "with an optional DNS subdomain prefix and '/'",
        )


def _parse_ignored(parser: ArgsParser, args: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    resources = [
        parser.string(v, f"ignoredResources[{i}]")
        for i, v in enumerate(parser.items(args.get("ignoredResources"), "ignoredResources"))
    ]
    for i, name in enumerate(resources):
        _validate_label_name(parser, name, f"ignoredResources[{i}]")
    groups_raw = parser.items(args.get("ignoredResourceGroups"), "ignoredResourceGroups")
    groups = [parser.string(v, f"ignoredResourceGroups[{i}]") for i, v in enumerate(groups_raw)]
    for i, group in enumerate(groups):
        if "/" in group:
            raise parser.error(
                f"ignoredResourceGroups[{i}]",
                f"Invalid value: {group!r}: resource group name can't contain '/'",
            )
        _validate_label_name(parser, group, f"ignoredResourceGroups[{i}]")
    return resources, groups


def _validate_weights(parser: ArgsParser, resources: Sequence[ResourceSpec], path: str) -> None:
    for i, spec in enumerate(resources):
        if not 0 < spec.weight <= MAX_RESOURCE_WEIGHT:
            raise parser.error(
                f"{path}[{i}].weight",
                f"Invalid value: {spec.weight}: resource weight of {spec.name} "
                f"not in valid range (0, {MAX_RESOURCE_WEIGHT}]",
            )


def _parse_shape(
    parser: ArgsParser, value: Any, path: str
) -> tuple[UtilizationShapePoint, ...] | None:
    """RequestedToCapacityRatioParam.shape, validated as validateFunctionShape."""
    if value is None:
        return None
    param = parser.mapping(value, path, ("shape",))
    shape_path = f"{path}.shape"
    points = []
    for i, raw in enumerate(parser.items(param.get("shape"), shape_path)):
        item = parser.mapping(raw, f"{shape_path}[{i}]", ("utilization", "score"))
        utilization = parser.integer(item.get("utilization"), f"{shape_path}[{i}].utilization")
        score = parser.integer(item.get("score"), f"{shape_path}[{i}].score")
        points.append(UtilizationShapePoint(utilization, score))
    _validate_function_shape(parser, points, shape_path)
    return tuple(points)


def _validate_function_shape(
    parser: ArgsParser, points: Sequence[UtilizationShapePoint], path: str
) -> None:
    if not points:
        raise parser.error(path, "Required value: at least one point must be specified")
    for i in range(1, len(points)):
        if points[i - 1].utilization >= points[i].utilization:
            value = points[i].utilization
            raise parser.error(
                f"{path}[{i}].utilization",
                f"Invalid value: {value}: values must be sorted in increasing order",
            )
    for i, point in enumerate(points):
        for name, value, top in (
            ("utilization", point.utilization, MAX_UTILIZATION),
            ("score", point.score, MAX_CUSTOM_PRIORITY_SCORE),
        ):
            if not 0 <= value <= top:
                raise parser.error(
                    f"{path}[{i}].{name}", f"Invalid value: {value}: not in valid range [0, {top}]"
                )


def _parse_strategy(parser: ArgsParser, value: Any) -> ScoringStrategy:
    if value is None:  # SetDefaults_NodeResourcesFitArgs
        return ScoringStrategy(LEAST_ALLOCATED, DEFAULT_RESOURCES)
    path = "scoringStrategy"
    raw = parser.mapping(value, path, ("type", "resources", "requestedToCapacityRatio"))
    strategy_type = parser.string(raw.get("type"), f"{path}.type")
    if strategy_type not in SCORING_STRATEGY_TYPES:
        raise parser.error(f"{path}.type", "must be one of " + ", ".join(SCORING_STRATEGY_TYPES))
    resources = resource_specs(parser, raw.get("resources"), f"{path}.resources")
    _validate_weights(parser, resources, f"{path}.resources")
    ratio_path = f"{path}.requestedToCapacityRatio"
    shape = _parse_shape(parser, raw.get("requestedToCapacityRatio"), ratio_path)
    if strategy_type == REQUESTED_TO_CAPACITY_RATIO and shape is None:
        # kube-scheduler would dereference a nil pointer here; refuse the config instead.
        raise parser.error(ratio_path, f"Required value: for type {REQUESTED_TO_CAPACITY_RATIO}")
    return ScoringStrategy(strategy_type, resources, shape)


def parse_args(args: Mapping[str, Any]) -> NodeResourcesFitArgs:
    """v1 NodeResourcesFitArgs with kube-scheduler's defaults and validation."""
    parser = ArgsParser(NAME)
    known = ("ignoredResources", "ignoredResourceGroups", "scoringStrategy")
    args = parser.mapping(args, "", known)
    resources, groups = _parse_ignored(parser, args)
    strategy = _parse_strategy(parser, args.get("scoringStrategy"))
    return NodeResourcesFitArgs(frozenset(resources), frozenset(groups), strategy)


# --- scoring (resource_allocation.go and the strategies) -----------------------

ResourceScorer = Callable[[list[int], list[int]], int]
# The same over arrays of nodes: per resource, requested and allocatable of every node.
ResourceScorerAll = Callable[[list[IntArray], list[IntArray]], IntArray]

# Above this allocatable, `amount * MaxNodeScore` could overflow int64: such nodes are
# scored by the per-node path, in Python's unbounded integers.
_MAX_BATCH_AMOUNT = (2**63 - 1) // (MAX_NODE_SCORE * MAX_UTILIZATION)


def go_div(a: int, b: int) -> int:
    """Go's integer division, which truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def least_requested_score(requested: int, capacity: int) -> int:
    """(capacity - requested) * MaxNodeScore / capacity; an over-committed node gets 0."""
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def most_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    # Pods without requests count non-zero defaults, so requested may exceed capacity.
    requested = min(requested, capacity)
    return requested * MAX_NODE_SCORE // capacity


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


def _weighted_mean_scorer_all(
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


def _weighted_mean_scorer(
    resources: Sequence[ResourceSpec], per_resource: Callable[[int, int], int]
) -> ResourceScorer:
    def score(requested: list[int], allocatable: list[int]) -> int:
        node_score = weight_sum = 0
        for i, spec in enumerate(resources):
            if allocatable[i] == 0:
                continue
            node_score += per_resource(requested[i], allocatable[i]) * spec.weight
            weight_sum += spec.weight
        return node_score // weight_sum if weight_sum else 0

    return score


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


def _node_score_shape(shape: Sequence[UtilizationShapePoint]) -> list[UtilizationShapePoint]:
    """Shape scores are on the config's 0-10 scale; scale them to the node score's 0-100."""
    scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    return [UtilizationShapePoint(p.utilization, p.score * scale) for p in shape]


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
    raw = broken_linear_function_all(_node_score_shape(shape))

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


def requested_to_capacity_ratio_scorer(
    resources: Sequence[ResourceSpec], shape: Sequence[UtilizationShapePoint]
) -> ResourceScorer:
    raw = broken_linear_function(_node_score_shape(shape))

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


def strategy_scorer_all(strategy: ScoringStrategy) -> ResourceScorerAll:
    if strategy.type == MOST_ALLOCATED:
        return _weighted_mean_scorer_all(
            strategy.resources, most_requested_scores, most_requested_scores_counted
        )
    if strategy.type == REQUESTED_TO_CAPACITY_RATIO:
        assert strategy.shape is not None
        return requested_to_capacity_ratio_scorer_all(strategy.resources, strategy.shape)
    return _weighted_mean_scorer_all(
        strategy.resources, least_requested_scores, least_requested_scores_counted
    )


def strategy_scorer(strategy: ScoringStrategy) -> ResourceScorer:
    if strategy.type == MOST_ALLOCATED:
        return _weighted_mean_scorer(strategy.resources, most_requested_score)
    if strategy.type == REQUESTED_TO_CAPACITY_RATIO:
        assert strategy.shape is not None  # parse_args requires it
        return requested_to_capacity_ratio_scorer(strategy.resources, strategy.shape)
    return _weighted_mean_scorer(strategy.resources, least_requested_score)


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
            return pod.resources.nonzero_cpu
        if not self.use_requested and name == MEMORY:
            return pod.resources.nonzero_memory
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

    def columns(
        self, nodes: NodeColumns, rows: IntArray, pod_requests: Sequence[int]
    ) -> tuple[list[IntArray], list[IntArray]] | None:
        """allocatable_and_requested for the nodes at `rows`, per resource (allocatable 0
        leaves the resource out on that node); None if amounts are too large to batch."""
        requested, allocatable = [], []
        zeros = np.zeros(len(rows), dtype=np.int64)
        # every amount in the columns, plus the largest request, stays in range: no need
        # to look at the rows
        within_bounds = not nodes.negative and (
            nodes.amount_bound + max(pod_requests, default=0) <= _MAX_BATCH_AMOUNT
        )
        for spec, pod_request in zip(self.resources, pod_requests, strict=True):
            name = spec.name
            if pod_request > _MAX_BATCH_AMOUNT:
                return None
            if pod_request == 0 and is_scalar_resource_name(name):
                alloc, used = zeros, zeros
            elif name in (CPU, MEMORY):
                alloc = nodes.allocatable(name)[rows]
                if self.use_requested:
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
                and (
                    max(int(alloc.max()), int(req.max())) > _MAX_BATCH_AMOUNT or int(req.min()) < 0
                )
            ):
                return None
            allocatable.append(alloc)
            requested.append(req)
        return requested, allocatable

    def score_all(
        self, nodes: NodeColumns, rows: IntArray, pod_requests: Sequence[int]
    ) -> IntArray | None:
        if self.scorer_all is None or not self.resources:
            return None
        amounts = self.columns(nodes, rows, pod_requests)
        if amounts is None:
            return None
        return self.scorer_all(*amounts)


# --- filter (fitsRequest) --------------------------------------------------------


@dataclass(frozen=True)
class PreFilterState:
    """framework.Resource of the pod's requests: cpu, memory, ephemeral-storage and the
    scalar resources (extended, hugepages-*, ...); other names are not accounted."""

    milli_cpu: int
    memory: int
    ephemeral_storage: int
    scalar_resources: dict[str, int]

    @classmethod
    def of(cls, pod: PodInfo) -> PreFilterState:
        requests = pod.resources.requests
        scalar = {n: v for n, v in requests.items() if is_scalar_resource_name(n)}
        return cls(
            requests.get(CPU, 0),
            requests.get(MEMORY, 0),
            requests.get(EPHEMERAL_STORAGE, 0),
            dict(sorted(scalar.items())),
        )

    @property
    def is_empty(self) -> bool:
        return not (self.milli_cpu or self.memory or self.ephemeral_storage) and not (
            self.scalar_resources
        )


@dataclass(frozen=True)
class InsufficientResource:
    resource_name: str
    reason: str
    requested: int
    used: int
    capacity: int
    # The request alone exceeds the node's allocatable: preemption cannot help there.
    unresolvable: bool = False


def _is_ignored(name: str, ignored: frozenset[str], ignored_groups: frozenset[str]) -> bool:
    if not is_extended_resource_name(name):
        return False  # only extended resources can be ignored
    return name in ignored or name.split("/")[0] in ignored_groups


def _lacks(
    request: int, name: str, requested: Mapping[str, int], allocatable: Mapping[str, int]
) -> bool:
    """Whether the node has too little of `name` left; a zero request is not checked."""
    return request > 0 and request > allocatable.get(name, 0) - requested.get(name, 0)


def _too_many_pods(num_pods: int, allocatable: Mapping[str, int]) -> bool:
    return num_pods + 1 > allocatable.get(PODS, 0)


def fits_request(
    state: PreFilterState,
    node: NodeInfo,
    ignored: frozenset[str] = frozenset(),
    ignored_groups: frozenset[str] = frozenset(),
) -> list[InsufficientResource]:
    """Every resource the node lacks for the pod, in kube-scheduler's order (pods, cpu,
    memory, ephemeral-storage, then scalar resources, here sorted by name)."""
    wanted = checked_requests(state, ignored, ignored_groups)
    return fits_amounts(wanted, node.num_pods, node.requested, node.allocatable)


def fits_amounts(
    wanted: Sequence[tuple[str, int]],
    num_pods: int,
    requested: Mapping[str, int],
    allocatable: Mapping[str, int],
) -> list[InsufficientResource]:
    """fits_request on plain numbers: `wanted` as checked_requests gives it, and a node's
    pod count, requested and allocatable amounts (preemption's dry run computes these
    without building a node)."""
    insufficient = []
    if _too_many_pods(num_pods, allocatable):
        allowed = allocatable.get(PODS, 0)
        insufficient.append(InsufficientResource(PODS, REASON_TOO_MANY_PODS, 1, num_pods, allowed))
    for name, quantity in wanted:
        if _lacks(quantity, name, requested, allocatable):
            capacity, used = allocatable.get(name, 0), requested.get(name, 0)
            insufficient.append(
                InsufficientResource(
                    name, insufficient_reason(name), quantity, used, capacity, quantity > capacity
                )
            )
    return insufficient


def lacks_any(
    wanted: Sequence[tuple[str, int]],
    num_pods: int,
    requested: Mapping[str, int],
    allocatable: Mapping[str, int],
) -> bool:
    """Whether fits_amounts finds anything lacking, without saying what: cheaper where
    only the verdict counts (preemption's reprieves)."""
    if _too_many_pods(num_pods, allocatable):
        return True
    for name, quantity in wanted:  # noqa: SIM110 - any() over a generator costs more here
        if _lacks(quantity, name, requested, allocatable):
            return True
    return False


def insufficient_status(insufficient: Sequence[InsufficientResource]) -> Status:
    """Filter's status for what fits_request found lacking (success if nothing)."""
    if not insufficient:
        return SUCCESS
    unresolvable = any(r.unresolvable for r in insufficient)
    code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
    return Status(code, [r.reason for r in insufficient])


def checked_requests(
    state: PreFilterState, ignored: frozenset[str], ignored_groups: frozenset[str]
) -> list[tuple[str, int]]:
    """The requests Filter checks, in kube's order: cpu, memory, ephemeral-storage,
    then the scalar resources that are not ignored."""
    if state.is_empty:
        return []
    wanted = [(CPU, state.milli_cpu), (MEMORY, state.memory)]
    wanted.append((EPHEMERAL_STORAGE, state.ephemeral_storage))
    for name, quantity in state.scalar_resources.items():
        if not _is_ignored(name, ignored, ignored_groups):
            wanted.append((name, quantity))
    return wanted


def fits(pod: PodInfo, node: NodeInfo) -> list[InsufficientResource]:
    """Fits: the check without ignored resources (preemption, queueing hints)."""
    return fits_request(PreFilterState.of(pod), node)


# --- plugin ----------------------------------------------------------------------


class NodeResourcesFit(
    PreFilterPlugin,
    FilterPlugin,
    BatchFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    BatchScorePlugin,
    EnqueueExtensions,
):
    name = NAME

    def __init__(self, args: NodeResourcesFitArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        strategy = args.scoring_strategy
        self.scorer = ResourceAllocationScorer(
            strategy.resources, strategy_scorer(strategy), strategy_scorer_all(strategy)
        )

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # Deleting or scaling down an assigned pod frees resources; a node added or with
        # more allocatable may fit. With queueing hints (on by default upstream) node
        # label/taint updates are not registered.
        return [
            ClusterEventWithHint(
                ClusterEvent("Pod", "Delete"), self.is_schedulable_after_pod_event
            ),
            ClusterEventWithHint(
                ClusterEvent("Pod", "UpdatePodScaleDown"), self.is_schedulable_after_pod_event
            ),
            ClusterEventWithHint(
                ClusterEvent("Node", "Add"), self.is_schedulable_after_node_change
            ),
            ClusterEventWithHint(
                ClusterEvent("Node", "UpdateNodeAllocatable"), self.is_schedulable_after_node_change
            ),
        ]

    def is_schedulable_after_pod_event(
        self, pod: PodInfo, old: PodInfo | None, new: PodInfo | None
    ) -> bool:
        """Queue when an assigned (or nominated) pod left, or when a pod scaled down a
        resource this pod requests (or this pod scaled itself down)."""
        if old is None:
            return True  # the freed pod is unknown: assume it freed room
        if new is None:
            return bool(old.pod.spec.node_name or old.pod.status.nominated_node_name)
        if new.pod.metadata.uid == pod.pod.metadata.uid:
            return True
        if not new.pod.spec.node_name:
            return False
        before, after = old.resources.requests, new.resources.requests
        return any(before.get(name, 0) > after.get(name, 0) for name in self._requested_names(pod))

    def is_schedulable_after_node_change(
        self, pod: PodInfo, old: NodeInfo | None, new: NodeInfo
    ) -> bool:
        """Queue when the empty node fits the pod and, for an update, when it grew in the
        pod count or in something the pod requests (haveAnyRequestedResourcesIncreased)."""
        if fits(pod, new):
            return False
        if old is None:
            return True
        if new.allowed_pod_number > old.allowed_pod_number:
            return True
        return any(
            new.allocatable.get(name, 0) > old.allocatable.get(name, 0)
            for name in self._requested_names(pod)
        )

    @staticmethod
    def _requested_names(pod: PodInfo) -> list[str]:
        """The accounted resources the pod requests a non-zero amount of."""
        s = PreFilterState.of(pod)
        amounts = {CPU: s.milli_cpu, MEMORY: s.memory, EPHEMERAL_STORAGE: s.ephemeral_storage}
        return [name for name, v in (amounts | s.scalar_resources).items() if v > 0]

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        state.write(PRE_FILTER_STATE_KEY, PreFilterState.of(pod))
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def checked_requests(self, state: CycleState, pod: PodInfo) -> list[tuple[str, int]]:
        """The requests Filter checks for `pod`, with this profile's ignored resources."""
        requests = state.read(PRE_FILTER_STATE_KEY) or PreFilterState.of(pod)
        args = self.args
        return checked_requests(requests, args.ignored_resources, args.ignored_resource_groups)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        wanted = self.checked_requests(state, pod)
        return insufficient_status(
            fits_amounts(wanted, node.num_pods, node.requested, node.allocatable)
        )

    def filter_all(self, state: CycleState, pod: PodInfo, nodes: NodeColumns) -> BoolArray | None:
        if nodes.oversized:
            return None
        fits = nodes.num_pods + 1 <= nodes.allocatable(PODS)
        wanted = self.checked_requests(state, pod)
        for name, quantity in wanted:
            if quantity > SAFE_AMOUNT:
                return None
            if quantity > 0:
                fits &= quantity <= nodes.allocatable(name) - nodes.requested(name)
        # A column first built for this pod may just have met an oversized amount.
        return None if nodes.oversized else fits

    def filter_statuses(
        self, state: CycleState, pod: PodInfo, nodes: NodeColumns, rows: IntArray
    ) -> list[Status] | None:
        """`filter`'s status for each node at `rows` (nodes it rejects), from the columns:
        one status per distinct set of lacking resources, the reasons in fits_request's
        order. None: leave it to the per-node path."""
        if nodes.oversized or not len(rows):
            return None
        checks = [(REASON_TOO_MANY_PODS, nodes.num_pods[rows] + 1 > nodes.allocatable(PODS)[rows])]
        unresolvable = np.zeros(len(rows), dtype=np.bool_)
        wanted = self.checked_requests(state, pod)
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
        return [Status(made[c][0], list(made[c][1]), plugin=self.name) for c in codes.tolist()]

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        state.write(PRE_SCORE_STATE_KEY, self.scorer.pod_requests(pod))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        pod_requests = state.read(PRE_SCORE_STATE_KEY)
        if pod_requests is None:
            pod_requests = self.scorer.pod_requests(pod)
        return self.scorer.score(node, pod_requests)

    def score_all(
        self, state: CycleState, pod: PodInfo, nodes: NodeColumns, rows: IntArray
    ) -> IntArray | None:
        pod_requests = state.read(PRE_SCORE_STATE_KEY)
        if pod_requests is None:
            pod_requests = self.scorer.pod_requests(pod)
        return self.scorer.score_all(nodes, rows, pod_requests)

    def score_extensions(self) -> ScoreExtensions | None:
        return None


def new(args: dict[str, Any], handle: Handle) -> NodeResourcesFit:
    return NodeResourcesFit(parse_args(args), handle)
