"""TaintToleration: NoSchedule/NoExecute taints the pod does not tolerate exclude the node
(Filter); untolerated PreferNoSchedule taints lower its score (Score, reversed).

Implements: FilterPlugin, PreScorePlugin, ScorePlugin (+ NormalizeScore), EnqueueExtensions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from shared.api.models import Taint, Toleration
from shared.framework.columns import BoolArray, IntArray, NodeColumns
from shared.framework.cycle_state import CycleState, StateKey
from shared.framework.events import ADD, NODE, POD, UPDATE_NODE_TAINT, UPDATE_POD_TOLERATION
from shared.framework.handle import Handle
from shared.framework.interface import (
    MAX_NODE_SCORE,
    BatchFilterPlugin,
    BatchScorePlugin,
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    FilterPlugin,
    NodeScore,
    PreScorePlugin,
    ScorePlugin,
    SignFragment,
    SignPlugin,
)
from shared.framework.normalize import default_normalize_score, default_normalize_scores
from shared.framework.plugin_args import reject_unknown
from shared.framework.signature import tolerations_fragment
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import NodeInfo, PodInfo

NAME = "TaintToleration"
ERR_REASON_NOT_MATCH = "node(s) had untolerated taint(s)"
_PREFER_NO_SCHEDULE = StateKey[list[Toleration]]("PreScore" + NAME)


def tolerates(tol: Toleration, taint: Taint) -> bool:
    """core/v1 Toleration.ToleratesTaint: an empty effect matches every effect and an empty
    key every key; Exists matches any value, Equal (the default) only the same value."""
    if tol.effect and tol.effect != taint.effect:
        return False
    if tol.key and tol.key != taint.key:
        return False
    if tol.operator == "Exists":
        return True
    return tol.value == taint.value


def tolerations_tolerate_taint(tolerations: list[Toleration], taint: Taint) -> bool:
    """v1helper.TolerationsTolerateTaint."""
    return any(tolerates(t, taint) for t in tolerations)


def untolerated(taints: list[Taint], tolerations: list[Toleration]) -> Taint | None:
    """v1helper.FindMatchingUntoleratedTaint over taints already filtered by effect."""
    for taint in taints:
        if not tolerations_tolerate_taint(tolerations, taint):
            return taint
    return None


class TaintToleration(
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
        return [tolerations_fragment(pod)]

    def reads_only_the_node(self, pod: PodInfo) -> bool:
        """NodeOnlyFilter: preemption's dry run may skip this plugin once it passed."""
        return True

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if tolerates_hard_taints(node.node.spec.taints, pod.pod.spec.tolerations):
            return SUCCESS
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_NOT_MATCH])

    def filter_all(self, state: CycleState, pod: PodInfo, nodes: NodeColumns) -> BoolArray:
        tolerations = pod.pod.spec.tolerations
        if all(tolerates_hard_taints(taints, tolerations) for taints in nodes.taint_groups):
            return nodes.everyone
        ok = nodes.per_taint_group(lambda taints: tolerates_hard_taints(taints, tolerations))
        return ok.astype(np.bool_)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        state.write(_PREFER_NO_SCHEDULE, _soft_tolerations(pod))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        return _count_soft_untolerated(node.node.spec.taints, self._soft(state, pod)), SUCCESS

    def score_all(
        self, state: CycleState, pod: PodInfo, nodes: NodeColumns, rows: IntArray
    ) -> IntArray:
        tolerations = self._soft(state, pod)
        return nodes.per_taint_group(lambda t: _count_soft_untolerated(t, tolerations), rows)

    @staticmethod
    def _soft(state: CycleState, pod: PodInfo) -> list[Toleration]:
        tolerations = state.read(_PREFER_NO_SCHEDULE)
        if tolerations is None:  # PreScore did not run: recompute what it would have written
            tolerations = _soft_tolerations(pod)
        return tolerations

    def score_extensions(self) -> TaintToleration:
        return self

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[NodeScore]) -> Status:
        default_normalize_score(MAX_NODE_SCORE, True, scores)
        return SUCCESS

    def normalize_all(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        return default_normalize_scores(MAX_NODE_SCORE, True, scores)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # With queueing hints (kube's default) a node label cannot change the verdict, and
        # a new toleration matters only to the pod that got it.
        return [
            ClusterEventWithHint(ClusterEvent(NODE, ADD), self.is_schedulable_after_node_change),
            ClusterEventWithHint(
                ClusterEvent(NODE, UPDATE_NODE_TAINT), self.is_schedulable_after_node_change
            ),
            ClusterEventWithHint(
                ClusterEvent(POD, UPDATE_POD_TOLERATION),
                self.is_schedulable_after_pod_toleration_change,
            ),
        ]

    def is_schedulable_after_node_change(
        self, pod: PodInfo, old: NodeInfo | None, new: NodeInfo
    ) -> bool:
        """Queue when the node's hard taints went from untolerated to tolerated."""
        tolerations = pod.pod.spec.tolerations
        was_untolerated = old is None or not tolerates_hard_taints(
            old.node.spec.taints, tolerations
        )
        return was_untolerated and tolerates_hard_taints(new.node.spec.taints, tolerations)

    def is_schedulable_after_pod_toleration_change(
        self, pod: PodInfo, old: PodInfo | None, new: PodInfo
    ) -> bool:
        """Only the rejected pod's own new toleration can help it."""
        return new.pod.metadata.uid == pod.pod.metadata.uid


def tolerates_hard_taints(taints: list[Taint], tolerations: list[Toleration]) -> bool:
    """DoNotScheduleTaintsFilterFunc: PreferNoSchedule taints only lower the score."""
    hard = [t for t in taints if t.effect in ("NoSchedule", "NoExecute")]
    return untolerated(hard, tolerations) is None


def _count_soft_untolerated(taints: list[Taint], tolerations: list[Toleration]) -> int:
    return sum(
        1
        for taint in taints
        if taint.effect == "PreferNoSchedule" and not tolerations_tolerate_taint(tolerations, taint)
    )


def _soft_tolerations(pod: PodInfo) -> list[Toleration]:
    """getAllTolerationPreferNoSchedule: an empty effect covers PreferNoSchedule too."""
    return [t for t in pod.pod.spec.tolerations if t.effect in ("", "PreferNoSchedule")]


def new(args: dict[str, Any], handle: Handle) -> TaintToleration:
    reject_unknown(NAME, args, ())
    return TaintToleration()
