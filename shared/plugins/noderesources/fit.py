"""NodeResourcesFit: does the node have room for the pod's requests (PreFilter/Filter), and
how much room is left (PreScore/Score, by the configured scoring strategy).
kube-scheduler's pkg/scheduler/framework/plugins/noderesources/fit.go; the strategies
are in least_allocated.py, most_allocated.py and requested_to_capacity_ratio.py, the
scorer they share with NodeResourcesBalancedAllocation in resource_allocation.py, the
args in args.py and the columnar forms in batch.py.

Implements: PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.framework.columns import BoolArray, IntArray, NodeColumns
from shared.framework.cycle_state import CycleState, StateKey
from shared.framework.events import (
    ADD,
    DELETE,
    NODE,
    POD,
    UPDATE_NODE_ALLOCATABLE,
    UPDATE_POD_SCALE_DOWN,
)
from shared.framework.handle import Handle
from shared.framework.interface import (
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
    SignFragment,
    SignPlugin,
)
from shared.framework.plugin_args import ArgsParser
from shared.framework.signature import resources_fragment
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.noderesources.args import (
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
    NodeResourcesFitArgs,
    ScoringStrategy,
    parse_ignored,
    parse_strategy,
)
from shared.plugins.noderesources.batch import (
    allocation_scores,
    fits_all,
    insufficient_statuses,
    strategy_scorer_all,
)
from shared.plugins.noderesources.least_allocated import least_resource_scorer
from shared.plugins.noderesources.most_allocated import most_resource_scorer
from shared.plugins.noderesources.requested_to_capacity_ratio import (
    requested_to_capacity_ratio_scorer,
)
from shared.plugins.noderesources.resource_allocation import (
    ResourceAllocationScorer,
    ResourceScorer,
)
from shared.plugins.noderesources.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    REASON_TOO_MANY_PODS,
    insufficient_reason,
    is_extended_resource_name,
    is_scalar_resource_name,
)

NAME = "NodeResourcesFit"

PRE_FILTER_STATE_KEY: StateKey[PreFilterState] = StateKey("PreFilter" + NAME)
PRE_SCORE_STATE_KEY: StateKey[list[int]] = StateKey("PreScore" + NAME)


def parse_args(args: Mapping[str, Any]) -> NodeResourcesFitArgs:
    """v1 NodeResourcesFitArgs with kube-scheduler's defaults and validation."""
    parser = ArgsParser(NAME)
    known = ("ignoredResources", "ignoredResourceGroups", "scoringStrategy")
    args = parser.mapping(args, "", known)
    resources, groups = parse_ignored(parser, args)
    strategy = parse_strategy(parser, args.get("scoringStrategy"))
    return NodeResourcesFitArgs(frozenset(resources), frozenset(groups), strategy)


def strategy_scorer(strategy: ScoringStrategy) -> ResourceScorer:
    """nodeResourceStrategyTypeMap: the configured strategy's scorer."""
    if strategy.type == MOST_ALLOCATED:
        return most_resource_scorer(strategy.resources)
    if strategy.type == REQUESTED_TO_CAPACITY_RATIO:
        assert strategy.shape is not None  # parse_args requires it
        return requested_to_capacity_ratio_scorer(strategy.resources, strategy.shape)
    return least_resource_scorer(strategy.resources)


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
    SignPlugin,
):
    name = NAME

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | None:
        return [resources_fragment(pod)]

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
            ClusterEventWithHint(ClusterEvent(POD, DELETE), self.is_schedulable_after_pod_event),
            ClusterEventWithHint(
                ClusterEvent(POD, UPDATE_POD_SCALE_DOWN), self.is_schedulable_after_pod_event
            ),
            ClusterEventWithHint(ClusterEvent(NODE, ADD), self.is_schedulable_after_node_change),
            ClusterEventWithHint(
                ClusterEvent(NODE, UPDATE_NODE_ALLOCATABLE), self.is_schedulable_after_node_change
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

    def status_on_amounts(
        self,
        wanted: Sequence[tuple[str, int]],
        num_pods: int,
        requested: Mapping[str, int],
        allocatable: Mapping[str, int],
    ) -> Status:
        """Filter's status on plain amounts (preemption's dry run): this plugin's."""
        status = insufficient_status(fits_amounts(wanted, num_pods, requested, allocatable))
        if not status.ok:
            status.plugin = self.name
        return status

    def lacks_on_amounts(
        self,
        wanted: Sequence[tuple[str, int]],
        num_pods: int,
        requested: Mapping[str, int],
        allocatable: Mapping[str, int],
    ) -> bool:
        return lacks_any(wanted, num_pods, requested, allocatable)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        wanted = self.checked_requests(state, pod)
        return insufficient_status(
            fits_amounts(wanted, node.num_pods, node.requested, node.allocatable)
        )

    def filter_all(self, state: CycleState, pod: PodInfo, nodes: NodeColumns) -> BoolArray | None:
        return fits_all(self.checked_requests(state, pod), nodes)

    def filter_statuses(
        self, state: CycleState, pod: PodInfo, nodes: NodeColumns, rows: IntArray
    ) -> list[Status] | None:
        """`filter`'s status for each node at `rows` (nodes it rejects), from the columns.
        None: leave it to the per-node path."""
        return insufficient_statuses(self.checked_requests(state, pod), nodes, rows, self.name)

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
        return allocation_scores(self.scorer, nodes, rows, pod_requests)

    def score_extensions(self) -> ScoreExtensions | None:
        return None


def new(args: dict[str, Any], handle: Handle) -> NodeResourcesFit:
    return NodeResourcesFit(parse_args(args), handle)
