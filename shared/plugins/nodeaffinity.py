"""NodeAffinity: nodeSelector and required node affinity (Filter), preferred node affinity
(Score), and a scheduler-enforced `addedAffinity` from the plugin's args.

Implements: PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin (+ NormalizeScore),
EnqueueExtensions.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from shared.api.models import NodeAffinity as NodeAffinityTerms
from shared.api.models import NodeSelector, PreferredSchedulingTerm, describe_validation_error
from shared.framework.cycle_state import CycleState
from shared.framework.interface import (
    MAX_NODE_SCORE,
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    FilterPlugin,
    NodeScore,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
)
from shared.framework.normalize import default_normalize_score
from shared.framework.selectors import node_selector_matches, node_selector_term_matches
from shared.framework.snapshot import Handle
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.args import arg_error, reject_unknown

NAME = "NodeAffinity"
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"
OBJECT_NAME_FIELD = "metadata.name"


def _required(pod: PodInfo) -> NodeSelector | None:
    aff = pod.pod.spec.affinity
    na = aff.node_affinity if aff is not None else None
    return na.required_during_scheduling_ignored_during_execution if na is not None else None


def _preferred(pod: PodInfo) -> list[PreferredSchedulingTerm]:
    aff = pod.pod.spec.affinity
    na = aff.node_affinity if aff is not None else None
    return na.preferred_during_scheduling_ignored_during_execution if na is not None else []


def required_node_affinity_matches(pod: PodInfo, node: NodeInfo) -> bool:
    """nodeaffinity.GetRequiredNodeAffinity(pod).Match: nodeSelector AND required terms."""
    labels = node.labels
    if any(labels.get(k) != v for k, v in pod.pod.spec.node_selector.items()):
        return False
    required = _required(pod)
    return required is None or node_selector_matches(required, labels, node.name)


def preferred_score(terms: list[PreferredSchedulingTerm], node: NodeInfo) -> int:
    """Sum of the weights of matching terms; zero-weight and empty terms never count."""
    fields = {OBJECT_NAME_FIELD: node.name}
    total = 0
    for term in terms:
        pref = term.preference
        if term.weight == 0 or (not pref.match_expressions and not pref.match_fields):
            continue
        if node_selector_term_matches(pref, node.labels, fields):
            total += term.weight
    return total


class NodeAffinity(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions):
    name = NAME

    def __init__(self, added: NodeAffinityTerms | None) -> None:
        self.added_selector = (
            added.required_during_scheduling_ignored_during_execution if added else None
        )
        self.added_preferred = (
            added.preferred_during_scheduling_ignored_during_execution if added else []
        )

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        required = _required(pod)
        if required is None and self.added_selector is None and not pod.pod.spec.node_selector:
            return None, Status(Code.SKIP)
        if required is None or not required.node_selector_terms:
            return None, SUCCESS
        names: set[str] | None = None
        for term in required.node_selector_terms:
            term_names: set[str] | None = None
            for req in term.match_fields:
                if req.key == OBJECT_NAME_FIELD and req.operator == "In":
                    values = set(req.values)  # ANDed requirements: intersect
                    term_names = values if term_names is None else term_names & values
            if term_names is None:
                return None, SUCCESS  # an ORed term without a name: every node may match
            names = term_names if names is None else names | term_names
        if names is not None and not names:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_CONFLICT])
        return (PreFilterResult(names) if names else None), SUCCESS

    def pre_filter_extensions(self) -> None:
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if self.added_selector is not None and not node_selector_matches(
            self.added_selector, node.labels, node.name
        ):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_ENFORCED])
        if not required_node_affinity_matches(pod, node):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_POD])
        return SUCCESS

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status:
        if nodes and not _preferred(pod) and not self.added_preferred:
            return Status(Code.SKIP)
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        return preferred_score(self.added_preferred, node) + preferred_score(
            _preferred(pod), node
        ), SUCCESS

    def score_extensions(self) -> NodeAffinity:
        return self

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[NodeScore]) -> Status:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return SUCCESS

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent("Node", "Add")),
            ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeLabel")),
            ClusterEventWithHint(ClusterEvent("Pod", "UpdatePodLabel")),
        ]


def new(args: dict[str, Any], handle: Handle) -> NodeAffinity:
    reject_unknown(NAME, args, ("addedAffinity",))
    raw = args.get("addedAffinity")
    if raw is None:
        return NodeAffinity(None)
    try:
        added = NodeAffinityTerms.model_validate(raw)
    except ValidationError as err:
        raise arg_error(NAME, "addedAffinity", describe_validation_error(err)) from None
    return NodeAffinity(added)
