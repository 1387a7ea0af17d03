"""InterPodAffinity: required pod (anti-)affinity of the incoming pod and of the pods
already on nodes (PreFilter/Filter), preferred terms and existing pods' required
affinity (PreScore/Score, min-max normalized). kube-scheduler's
pkg/scheduler/framework/plugins/interpodaffinity/plugin.go; the phases' work is in
filtering.py and scoring.py, their columnar forms in batch.py, the parsed terms in
terms.py and the index of existing pods' anti-affinity in index.py.

Implements: PreFilterPlugin (with PreFilterExtensions), FilterPlugin, PreScorePlugin,
ScorePlugin (with ScoreExtensions), EnqueueExtensions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.framework.columns import BoolArray, IntArray, NodeColumns
from shared.framework.cycle_state import CycleState, StateKey
from shared.framework.events import (
    ADD,
    ASSIGNED_POD,
    DELETE,
    NODE,
    UPDATE_NODE_LABEL,
    UPDATE_POD_LABEL,
)
from shared.framework.handle import Handle
from shared.framework.interface import (
    BatchFilterPlugin,
    BatchScorePlugin,
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    FilterPlugin,
    NodeScore,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScoreExtensions,
    ScorePlugin,
    SignFragment,
    SignPlugin,
)
from shared.framework.plugin_args import arg_error
from shared.framework.signature import pod_identity_fragment
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.interpodaffinity import batch, filtering, scoring
from shared.plugins.interpodaffinity.filtering import PreFilterState
from shared.plugins.interpodaffinity.index import ExistingAntiAffinityIndex
from shared.plugins.interpodaffinity.scoring import PreScoreState
from shared.plugins.interpodaffinity.terms import AffinityTerm, pod_matches_all_terms, pod_terms

NAME = "InterPodAffinity"

DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1
MIN_HARD_POD_AFFINITY_WEIGHT = 0
MAX_HARD_POD_AFFINITY_WEIGHT = 100

PRE_FILTER_KEY: StateKey[PreFilterState] = StateKey("PreFilter" + NAME)
PRE_SCORE_KEY: StateKey[PreScoreState] = StateKey("PreScore" + NAME)


@dataclass(frozen=True)
class InterPodAffinityArgs:
    hard_pod_affinity_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT
    ignore_preferred_terms_of_existing_pods: bool = False


def parse_args(args: Mapping[str, Any]) -> InterPodAffinityArgs:
    """v1 InterPodAffinityArgs with kube-scheduler's defaults and validation."""
    known = ("hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods")
    for name in args:
        if name not in known:
            raise arg_error(NAME, name, "unknown field")
    weight = args.get("hardPodAffinityWeight")
    if weight is None:  # unset: SetDefaults_InterPodAffinityArgs
        weight = DEFAULT_HARD_POD_AFFINITY_WEIGHT
    if isinstance(weight, bool) or not isinstance(weight, int):
        raise arg_error(NAME, "hardPodAffinityWeight", f"must be an integer, got {weight!r}")
    if not MIN_HARD_POD_AFFINITY_WEIGHT <= weight <= MAX_HARD_POD_AFFINITY_WEIGHT:
        raise arg_error(
            NAME,
            "hardPodAffinityWeight",
            f"Invalid value: {weight}: not in valid range "
            f"[{MIN_HARD_POD_AFFINITY_WEIGHT}, {MAX_HARD_POD_AFFINITY_WEIGHT}]",
        )
    ignore = args.get("ignorePreferredTermsOfExistingPods")
    if ignore is None:
        ignore = False
    if not isinstance(ignore, bool):
        raise arg_error(
            NAME, "ignorePreferredTermsOfExistingPods", f"must be a boolean, got {ignore!r}"
        )
    return InterPodAffinityArgs(weight, ignore)


class InterPodAffinity(
    PreFilterPlugin,
    PreFilterExtensions,
    FilterPlugin,
    BatchFilterPlugin,
    BatchScorePlugin,
    PreScorePlugin,
    ScorePlugin,
    ScoreExtensions,
    EnqueueExtensions,
    SignPlugin,
):
    name = NAME

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | None:
        # The pod's own terms read the pods of other nodes: refused, as upstream. Without
        # them, what other pods' terms say of it rests on its namespace and labels, and
        # only if such pods exist (a node gaining one is where batching starts over).
        if pod.has_affinity:
            return None
        return [pod_identity_fragment(pod)] if self.handle.snapshot.affinity_node_names else []

    def __init__(self, args: InterPodAffinityArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.existing_anti = ExistingAntiAffinityIndex()

    # --- enqueue ---------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # An assigned pod appearing, relabelled or deleted may satisfy (anti-)affinity;
        # a node added or relabelled may open a topology domain. With queueing hints (on
        # by default upstream) UpdateNodeTaint is not registered.
        return [
            ClusterEventWithHint(
                ClusterEvent(ASSIGNED_POD, ADD), self.is_schedulable_after_pod_change
            ),
            ClusterEventWithHint(
                ClusterEvent(ASSIGNED_POD, UPDATE_POD_LABEL), self.is_schedulable_after_pod_change
            ),
            ClusterEventWithHint(
                ClusterEvent(ASSIGNED_POD, DELETE), self.is_schedulable_after_pod_change
            ),
            ClusterEventWithHint(ClusterEvent(NODE, ADD), self.is_schedulable_after_node_change),
            ClusterEventWithHint(
                ClusterEvent(NODE, UPDATE_NODE_LABEL), self.is_schedulable_after_node_change
            ),
        ]

    def is_schedulable_after_pod_change(
        self, pod: PodInfo, old: PodInfo | None, new: PodInfo | None
    ) -> bool:
        """Queue when an assigned pod came to match all of the pod's affinity terms, or
        stopped matching (or left) all of its anti-affinity terms; unscheduled pods never
        count. Namespace selectors are not resolved here, as upstream."""
        if any(p is not None and not p.pod.spec.node_name for p in (old, new)):
            return False
        terms = pod_terms(pod)
        affinity, anti = terms.required_affinity, terms.required_anti_affinity

        def matches_all(ts: tuple[AffinityTerm, ...], other: PodInfo) -> bool:
            return pod_matches_all_terms(ts, other.pod, {})

        if old is not None and new is not None:
            gained = not matches_all(affinity, old) and matches_all(affinity, new)
            return gained or (matches_all(anti, old) and not matches_all(anti, new))
        if new is not None:
            return matches_all(affinity, new)
        return old is None or matches_all(anti, old)  # an unknown freed pod may help

    def is_schedulable_after_node_change(
        self, pod: PodInfo, old: NodeInfo | None, new: NodeInfo
    ) -> bool:
        """Queue when the node carries the topology key of any required term."""
        terms = pod_terms(pod)
        labels = new.labels
        return any(
            t.topology_key in labels
            for t in (*terms.required_affinity, *terms.required_anti_affinity)
        )

    # --- PreFilter / Filter ---------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        pre = self._pre_filter_state(pod)
        if pre is None:
            return None, Status(Code.SKIP)
        state.write(PRE_FILTER_KEY, pre)
        return None, SUCCESS

    def _pre_filter_state(self, pod: PodInfo) -> PreFilterState | None:
        return filtering.pre_filter_state(pod, self.handle.snapshot, self.existing_anti)

    def pre_filter_extensions(self) -> InterPodAffinity:
        return self

    def _update_state(self, state: CycleState, other: PodInfo, node: NodeInfo, sign: int) -> Status:
        pre = state.read(PRE_FILTER_KEY)
        if pre is None:
            return Status(
                Code.ERROR, [f'reading "{PRE_FILTER_KEY.name}" from cycleState: not found']
            )
        pre.update_with_pod(other, node.labels, sign)
        return SUCCESS

    def add_pod(
        self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node: NodeInfo
    ) -> Status:
        return self._update_state(state, pod_to_add, node, 1)

    def remove_pod(
        self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node: NodeInfo
    ) -> Status:
        return self._update_state(state, pod_to_remove, node, -1)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if node.raw_node is None:
            return Status(Code.ERROR, ["node not found"])
        pre = state.read(PRE_FILTER_KEY)
        if pre is None:  # PreFilter did not run
            pre = self._pre_filter_state(pod)
            if pre is None:
                return SUCCESS
        return filtering.filter_node(pre, node.labels)

    def filter_all(self, state: CycleState, pod: PodInfo, nodes: NodeColumns) -> BoolArray | None:
        pre = state.read(PRE_FILTER_KEY)
        if pre is None:
            return None
        return batch.filter_all(pre, nodes)

    # --- PreScore / Score -----------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        pre = self._pre_score_state(pod, nodes)
        if pre is None:
            return Status(Code.SKIP)
        state.write(PRE_SCORE_KEY, pre)
        return SUCCESS

    def _pre_score_state(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreScoreState | None:
        snapshot = self.handle.snapshot
        return scoring.pre_score_state(pod, nodes, snapshot, self.existing_anti, self.args)

    def _score_state(self, state: CycleState, pod: PodInfo) -> PreScoreState | None:
        pre = state.read(PRE_SCORE_KEY)
        if pre is None:  # PreScore did not run
            pre = self._pre_score_state(pod, self.handle.snapshot.nodes)
            if pre is not None:
                state.write(PRE_SCORE_KEY, pre)
        return pre

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        pre = self._score_state(state, pod)
        if pre is None:
            return 0, SUCCESS
        return scoring.node_score(pre, node.labels), SUCCESS

    def score_all(
        self, state: CycleState, pod: PodInfo, nodes: NodeColumns, rows: IntArray
    ) -> IntArray | None:
        pre = state.read(PRE_SCORE_KEY)
        if pre is None:
            return None
        return batch.score_all(pre, nodes, rows)

    def normalize_all(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        pre = state.read(PRE_SCORE_KEY)
        if pre is None or not pre.topology_score or not len(scores):
            return scores
        return batch.normalize_all(scores)

    def score_extensions(self) -> InterPodAffinity:
        return self

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[NodeScore]) -> Status:
        """Min-max to 0..MAX_NODE_SCORE; all equal scores become 0."""
        pre = self._score_state(state, pod)
        if pre is None or not pre.topology_score or not scores:
            return SUCCESS
        scoring.normalize(scores)
        return SUCCESS


def new(args: dict[str, Any], handle: Handle) -> InterPodAffinity:
    return InterPodAffinity(parse_args(args), handle)
