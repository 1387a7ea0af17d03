"""NodeAffinity: nodeSelector and required node affinity (Filter), preferred node affinity
(Score), and a scheduler-enforced `addedAffinity` from the plugin's args.

Implements: PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin (+ NormalizeScore),
EnqueueExtensions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import ValidationError

from shared.api.models import NodeAffinity as NodeAffinityTerms
from shared.api.models import NodeSelector, NodeSelectorTerm, describe_validation_error
from shared.api.validation import aggregate, not_supported
from shared.config import ConfigError
from shared.framework.columns import (
    BoolArray,
    IntArray,
    NodeColumns,
    match_labels_mask,
    node_selector_mask,
    preferred_terms_scores,
)
from shared.framework.cycle_state import CycleState, StateKey
from shared.framework.events import ADD, NODE, UPDATE_NODE_LABEL
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
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
    SignFragment,
    SignPlugin,
)
from shared.framework.normalize import default_normalize_score, default_normalize_scores
from shared.framework.plugin_args import arg_error, reject_unknown
from shared.framework.selectors import (
    OBJECT_NAME_FIELD,
    ParsedNodeSelector,
    PreferredTerms,
    parse_node_selector,
    parse_preferred_terms,
)
from shared.framework.signature import node_affinity_fragment
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import NodeInfo, PodInfo

NAME = "NodeAffinity"
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"

_REQUIRED_KEY = f"{NAME}.required"  # PodInfo.derived keys
_PREFERRED_KEY = f"{NAME}.preferred"


@dataclass(frozen=True)
class RequiredNodeAffinity:
    """nodeaffinity.RequiredNodeAffinity: the pod's nodeSelector AND its required terms.

    Terms that fail to parse match no node (kube-scheduler ignores the parse errors here).
    """

    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: ParsedNodeSelector | None = None

    def matches(self, node: NodeInfo) -> bool:
        labels = node.labels
        # labels.SelectorFromSet: every key present with an equal value.
        if any(labels.get(k) != v for k, v in self.node_selector.items()):
            return False
        return self.affinity is None or self.affinity.matches(labels, node.name)

    def matches_all(self, nodes: NodeColumns) -> BoolArray:
        mask = match_labels_mask(nodes, dict(self.node_selector))
        if self.affinity is not None:
            mask &= node_selector_mask(nodes, self.affinity)
        return mask


@dataclass(frozen=True)
class _PreScoreState:
    preferred: PreferredTerms | None


_PRE_FILTER_KEY = StateKey[RequiredNodeAffinity]("PreFilter" + NAME)
_PRE_SCORE_KEY = StateKey[_PreScoreState]("PreScore" + NAME)


def _required_selector(pod: PodInfo) -> NodeSelector | None:
    aff = pod.pod.spec.affinity
    na = aff.node_affinity if aff is not None else None
    return na.required_during_scheduling_ignored_during_execution if na is not None else None


def required_node_affinity(pod: PodInfo) -> RequiredNodeAffinity:
    """nodeaffinity.GetRequiredNodeAffinity, parsed once per pod."""
    cached: RequiredNodeAffinity | None = pod.derived.get(_REQUIRED_KEY)
    if cached is None:
        selector = _required_selector(pod)
        parsed = parse_node_selector(selector) if selector is not None else None
        cached = RequiredNodeAffinity(dict(pod.pod.spec.node_selector), parsed)
        pod.derived[_REQUIRED_KEY] = cached
    return cached


def required_node_affinity_matches(pod: PodInfo, node: NodeInfo) -> bool:
    """GetRequiredNodeAffinity(pod).Match(node), parse errors ignored (also used by
    PodTopologySpread's nodeAffinityPolicy: Honor)."""
    return required_node_affinity(pod).matches(node)


def preferred_node_affinity(pod: PodInfo) -> tuple[PreferredTerms | None, str | None]:
    """getPodPreferredNodeAffinity: (terms, None), (None, None) when the pod has no
    preferred terms, or (None, error message) when a term does not parse."""
    cached: tuple[PreferredTerms | None, str | None] | None = pod.derived.get(_PREFERRED_KEY)
    if cached is None:
        aff = pod.pod.spec.affinity
        na = aff.node_affinity if aff is not None else None
        terms = na.preferred_during_scheduling_ignored_during_execution if na else []
        if not terms:
            cached = (None, None)
        else:
            parsed, errs = parse_preferred_terms(terms)
            cached = (None, aggregate(errs)) if errs else (parsed, None)
        pod.derived[_PREFERRED_KEY] = cached
    return cached


def _node_names(terms: list[NodeSelectorTerm]) -> set[str] | None:
    """The nodes `metadata.name In` fields allow: intersected within a term, united across
    the ORed terms; None when some term does not restrict the name."""
    names: set[str] = set()
    for term in terms:
        term_names: set[str] | None = None
        for req in term.match_fields:
            if req.key == OBJECT_NAME_FIELD and req.operator == "In":
                values = set(req.values)
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None
        names |= term_names
    return names


class NodeAffinity(
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
        return [node_affinity_fragment(pod)]

    def __init__(
        self, added_selector: ParsedNodeSelector | None, added_preferred: PreferredTerms | None
    ) -> None:
        self.added_selector = added_selector
        self.added_preferred = added_preferred

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        required = _required_selector(pod)
        if required is None and self.added_selector is None and not pod.pod.spec.node_selector:
            return None, Status(Code.SKIP)
        state.write(_PRE_FILTER_KEY, required_node_affinity(pod))
        if required is None or not required.node_selector_terms:
            return None, SUCCESS
        names = _node_names(required.node_selector_terms)
        if names is None:
            return None, SUCCESS
        if not names:  # every term names nodes, but no node satisfies all of a term's names
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_CONFLICT])
        return PreFilterResult(names), SUCCESS

    def pre_filter_extensions(self) -> None:
        return None

    def reads_only_the_node(self, pod: PodInfo) -> bool:
        """NodeOnlyFilter: preemption's dry run may skip this plugin once it passed."""
        return True

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if self.added_selector is not None and not self.added_selector.matches(
            node.labels, node.name
        ):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_ENFORCED])
        required = state.read(_PRE_FILTER_KEY) or required_node_affinity(pod)
        if not required.matches(node):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_POD])
        return SUCCESS

    def filter_all(self, state: CycleState, pod: PodInfo, nodes: NodeColumns) -> BoolArray:
        required = state.read(_PRE_FILTER_KEY) or required_node_affinity(pod)
        mask = required.matches_all(nodes)
        if self.added_selector is not None:
            mask &= node_selector_mask(nodes, self.added_selector)
        return mask

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        preferred, err = preferred_node_affinity(pod)
        if err is not None:
            return Status(Code.ERROR, [err])
        if preferred is None and self.added_preferred is None:
            return Status(Code.SKIP)
        state.write(_PRE_SCORE_KEY, _PreScoreState(preferred))
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        count = 0
        if self.added_preferred is not None:
            count += self.added_preferred.score(node.labels, node.name)
        pre_score = state.read(_PRE_SCORE_KEY)
        if pre_score is None:
            preferred, err = preferred_node_affinity(pod)
            if err is not None:
                return 0, Status(Code.ERROR, [err])
            pre_score = _PreScoreState(preferred)
        if pre_score.preferred is not None:
            count += pre_score.preferred.score(node.labels, node.name)
        return count, SUCCESS

    def score_all(
        self, state: CycleState, pod: PodInfo, nodes: NodeColumns, rows: IntArray
    ) -> IntArray | None:
        pre_score = state.read(_PRE_SCORE_KEY)
        if pre_score is None:
            return None  # the per-node path recomputes it, or reports its error
        counts = np.zeros(nodes.n, dtype=np.int64)
        for preferred in (self.added_preferred, pre_score.preferred):
            if preferred is not None:
                counts += preferred_terms_scores(nodes, preferred)
        return counts[rows]

    def score_extensions(self) -> NodeAffinity:
        return self

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[NodeScore]) -> Status:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return SUCCESS

    def normalize_all(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        return default_normalize_scores(MAX_NODE_SCORE, False, scores)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # With queueing hints (the default), only a new node or new labels can help.
        return [
            ClusterEventWithHint(ClusterEvent(NODE, ADD), self.is_schedulable_after_node_change),
            ClusterEventWithHint(
                ClusterEvent(NODE, UPDATE_NODE_LABEL), self.is_schedulable_after_node_change
            ),
        ]

    def is_schedulable_after_node_change(
        self, pod: PodInfo, old: NodeInfo | None, new: NodeInfo
    ) -> bool:
        """Queue when a node that matches the pod's required affinity (and the
        scheduler-enforced one) appeared or came to match."""
        if self.added_selector is not None and not self.added_selector.matches(
            new.labels, new.name
        ):
            return False
        required = required_node_affinity(pod)
        return required.matches(new) and (old is None or not required.matches(old))


# --- args (NodeAffinityArgs) --------------------------------------------------

# The v1 NodeAffinity shape, to refuse unknown fields as kube-scheduler's strict decoding does.
_LABEL_REQUIREMENT: dict[str, Any] = {"key": None, "operator": None, "values": None}
_FIELD_REQUIREMENT: dict[str, Any] = dict(_LABEL_REQUIREMENT)
_TERM: dict[str, Any] = {
    "matchExpressions": [_LABEL_REQUIREMENT],
    "matchFields": [_FIELD_REQUIREMENT],
}
_AFFINITY: dict[str, Any] = {
    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [_TERM]},
    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": None, "preference": _TERM}],
}
_LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _shape_error(raw: Any, shape: Any, path: str) -> ConfigError | None:
    """The first unknown field or unsupported label operator under `path`; types are left
    to pydantic, matchFields operators to the selector parser (its message lists them)."""
    if isinstance(shape, list) and isinstance(raw, list):
        for i, item in enumerate(raw):
            problem = _shape_error(item, shape[0], f"{path}[{i}]")
            if problem:
                return problem
    elif isinstance(shape, dict) and isinstance(raw, dict):
        for key, value in raw.items():
            if key not in shape:
                return arg_error(NAME, f"{path}.{key}", "unknown field")
            problem = _shape_error(value, shape[key], f"{path}.{key}")
            if problem:
                return problem
        if shape is _LABEL_REQUIREMENT:
            return _operator_error(raw.get("operator"), path)
    return None


def _operator_error(operator: Any, path: str) -> ConfigError | None:
    """As nodeSelectorRequirementsAsSelector reports it (without the supported values)."""
    if not isinstance(operator, str) or operator in _LABEL_OPERATORS:
        return None
    where = path.removeprefix("addedAffinity.")
    return arg_error(NAME, "addedAffinity", not_supported(f"{where}.operator", operator))


def _parse_added_affinity(raw: Any) -> tuple[ParsedNodeSelector | None, PreferredTerms | None]:
    """ValidateNodeAffinityArgs, then what New keeps of the added affinity."""
    problem = _shape_error(raw, _AFFINITY, "addedAffinity")
    if problem:
        raise problem
    try:
        added = NodeAffinityTerms.model_validate(raw, strict=True)
    except ValidationError as err:
        raise arg_error(NAME, "addedAffinity", describe_validation_error(err)) from None
    errs: list[str] = []
    selector = None
    required = added.required_during_scheduling_ignored_during_execution
    if required is not None:
        selector = parse_node_selector(required, "requiredDuringSchedulingIgnoredDuringExecution")
        errs += selector.errors
    preferred = None
    terms = added.preferred_during_scheduling_ignored_during_execution
    if terms:
        preferred, pref_errs = parse_preferred_terms(
            terms, "preferredDuringSchedulingIgnoredDuringExecution"
        )
        errs += pref_errs
    if errs:
        raise arg_error(NAME, "addedAffinity", aggregate(errs))
    return selector, preferred


def new(args: dict[str, Any], handle: Handle) -> NodeAffinity:
    reject_unknown(NAME, args, ("addedAffinity",))
    raw = args.get("addedAffinity")
    if raw is None:
        return NodeAffinity(None, None)
    if not isinstance(raw, dict):
        raise arg_error(NAME, "addedAffinity", "must be a NodeAffinity object")
    return NodeAffinity(*_parse_added_affinity(raw))
