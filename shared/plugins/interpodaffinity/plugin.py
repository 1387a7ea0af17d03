"""InterPodAffinity: required pod (anti-)affinity of the incoming pod and of the pods
already on nodes (PreFilter/Filter), preferred terms and existing pods' required
affinity (PreScore/Score, min-max normalized). kube-scheduler's
pkg/scheduler/framework/plugins/interpodaffinity (plugin.go, filtering.go, scoring.go).

Implements: PreFilterPlugin (with PreFilterExtensions), FilterPlugin, PreScorePlugin,
ScorePlugin (with ScoreExtensions), EnqueueExtensions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from shared.api.models import (
    DEFAULT_NAMESPACE,
    LabelSelector,
    LabelSelectorRequirement,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    WeightedPodAffinityTerm,
)
from shared.framework.columns import BoolArray, IntArray, NodeColumns
from shared.framework.cycle_state import CycleState, StateKey
from shared.framework.interface import (
    MAX_NODE_SCORE,
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
)
from shared.framework.plugin_args import arg_error
from shared.framework.selectors import label_selector_matches
from shared.framework.snapshot import ClusterSnapshot, Handle
from shared.framework.status import SUCCESS, Code, Status, unschedulable
from shared.framework.types import NodeInfo, PodInfo

NAME = "InterPodAffinity"

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = (
    "node(s) didn't satisfy existing pods anti-affinity rules"
)
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1
MIN_HARD_POD_AFFINITY_WEIGHT = 0
MAX_HARD_POD_AFFINITY_WEIGHT = 100

_DERIVED_KEY = NAME

TopologyPair = tuple[str, str]  # (topology key, value)
TopologyCounts = dict[TopologyPair, int]
ScoreMap = dict[str, dict[str, int]]  # topology key -> value -> score


# --- args ---------------------------------------------------------------------


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


# --- affinity terms -----------------------------------------------------------


def _is_empty(selector: LabelSelector | None) -> bool:
    return selector is not None and not selector.match_labels and not selector.match_expressions


@dataclass(frozen=True)
class AffinityTerm:
    """framework.AffinityTerm: a PodAffinityTerm with its namespaces resolved."""

    namespaces: frozenset[str]
    # As metav1.LabelSelectorAsSelector: None selects nothing, an empty selector everything.
    namespace_selector: LabelSelector | None
    selector: LabelSelector | None
    topology_key: str

    def matches(self, pod: Pod, ns_labels: Mapping[str, str]) -> bool:
        """Whether `pod` (whose namespace has `ns_labels`) is selected by the term."""
        if pod.metadata.namespace in self.namespaces or label_selector_matches(
            self.namespace_selector, ns_labels
        ):
            return label_selector_matches(self.selector, pod.metadata.labels)
        return False

    def merge_namespaces(self, namespace_labels: Mapping[str, Mapping[str, str]]) -> AffinityTerm:
        """mergeAffinityTermNamespacesIfNotEmpty: unroll a non-empty namespaceSelector
        into namespaces, so the incoming pod's terms need no namespace lookup per pod."""
        if self.namespace_selector is None or _is_empty(self.namespace_selector):
            return self
        selected = {
            ns
            for ns, labels in namespace_labels.items()
            if label_selector_matches(self.namespace_selector, labels)
        }
        return replace(self, namespaces=self.namespaces | selected, namespace_selector=None)


@dataclass(frozen=True)
class WeightedAffinityTerm:
    term: AffinityTerm
    weight: int


def _label_selector(term: PodAffinityTerm, pod_labels: Mapping[str, str]) -> LabelSelector | None:
    """matchLabelKeys / mismatchLabelKeys merged into the labelSelector as the API server
    does at pod creation (MatchLabelKeysInPodAffinity); a nil selector stays nil."""
    selector = term.label_selector
    if selector is None or not (term.match_label_keys or term.mismatch_label_keys):
        return selector
    extra = [
        LabelSelectorRequirement(key=key, operator="In", values=[pod_labels[key]])
        for key in term.match_label_keys
        if key in pod_labels
    ]
    extra += [
        LabelSelectorRequirement(key=key, operator="NotIn", values=[pod_labels[key]])
        for key in term.mismatch_label_keys
        if key in pod_labels
    ]
    return selector.model_copy(update={"match_expressions": [*selector.match_expressions, *extra]})


def new_affinity_term(pod: Pod, term: PodAffinityTerm) -> AffinityTerm:
    # Without namespaces and namespaceSelector a term applies to the pod's own namespace.
    if not term.namespaces and term.namespace_selector is None:
        namespaces = frozenset((pod.metadata.namespace,))
    else:
        # The empty name means the default namespace, as for the pod itself (Pod model).
        namespaces = frozenset(ns or DEFAULT_NAMESPACE for ns in term.namespaces)
    return AffinityTerm(
        namespaces,
        term.namespace_selector,
        _label_selector(term, pod.metadata.labels),
        term.topology_key,
    )


@dataclass(frozen=True)
class PodTerms:
    """The parsed (anti-)affinity terms of one pod (framework.PodInfo's term fields)."""

    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedAffinityTerm, ...] = ()


def _required(pod: Pod, aff: PodAffinity | None) -> tuple[AffinityTerm, ...]:
    terms = aff.required_during_scheduling_ignored_during_execution if aff else []
    return tuple(new_affinity_term(pod, t) for t in terms)


def _preferred(pod: Pod, aff: PodAffinity | None) -> tuple[WeightedAffinityTerm, ...]:
    terms: list[WeightedPodAffinityTerm] = (
        aff.preferred_during_scheduling_ignored_during_execution if aff else []
    )
    return tuple(
        WeightedAffinityTerm(new_affinity_term(pod, t.pod_affinity_term), t.weight) for t in terms
    )


def pod_terms(pod_info: PodInfo) -> PodTerms:
    """The pod's terms, parsed once per PodInfo (PodInfos are reused across cycles)."""
    cached = pod_info.derived.get(_DERIVED_KEY)
    if isinstance(cached, PodTerms):
        return cached
    pod = pod_info.pod
    affinity = pod.spec.affinity
    terms = PodTerms()
    if affinity is not None:
        aff, anti = affinity.pod_affinity, affinity.pod_anti_affinity
        terms = PodTerms(
            _required(pod, aff), _required(pod, anti), _preferred(pod, aff), _preferred(pod, anti)
        )
    pod_info.derived[_DERIVED_KEY] = terms
    return terms


# --- topology counts (filtering.go) -------------------------------------------


def _update(counts: TopologyCounts, node_labels: Mapping[str, str], key: str, value: int) -> None:
    if key in node_labels:
        pair = (key, node_labels[key])
        counts[pair] = counts.get(pair, 0) + value
        if counts[pair] == 0:  # value may be negative (RemovePod)
            del counts[pair]


def _update_with_anti_affinity_terms(
    counts: TopologyCounts,
    terms: Iterable[AffinityTerm],
    pod: Pod,
    ns_labels: Mapping[str, str],
    node_labels: Mapping[str, str],
    value: int,
) -> None:
    """Counts every term that `pod` matches in the node's topology domain."""
    for term in terms:
        if term.matches(pod, ns_labels):
            _update(counts, node_labels, term.topology_key, value)


def _pod_matches_all_terms(
    terms: tuple[AffinityTerm, ...], pod: Pod, ns_labels: Mapping[str, str]
) -> bool:
    return bool(terms) and all(t.matches(pod, ns_labels) for t in terms)


def _update_with_affinity_terms(
    counts: TopologyCounts,
    terms: tuple[AffinityTerm, ...],
    pod: Pod,
    ns_labels: Mapping[str, str],
    node_labels: Mapping[str, str],
    value: int,
) -> None:
    """Counts the node's topology domains only if `pod` matches ALL the terms."""
    if _pod_matches_all_terms(terms, pod, ns_labels):
        for term in terms:
            _update(counts, node_labels, term.topology_key, value)


@dataclass
class PreFilterState:
    pod: Pod
    terms: PodTerms  # the incoming pod's, namespaceSelectors merged into namespaces
    namespace_labels: dict[str, str]  # of the incoming pod's namespace
    # Topology pairs where existing pods' required anti-affinity terms match the pod.
    existing_anti_affinity_counts: TopologyCounts = field(default_factory=dict)
    # Topology pairs with existing pods matching all the pod's required affinity terms.
    affinity_counts: TopologyCounts = field(default_factory=dict)
    # Topology pairs with existing pods matching the pod's required anti-affinity terms.
    anti_affinity_counts: TopologyCounts = field(default_factory=dict)

    def clone(self) -> PreFilterState:
        return replace(
            self,
            existing_anti_affinity_counts=dict(self.existing_anti_affinity_counts),
            affinity_counts=dict(self.affinity_counts),
            anti_affinity_counts=dict(self.anti_affinity_counts),
        )

    def update_with_pod(self, other: PodInfo, node_labels: Mapping[str, str], sign: int) -> None:
        """AddPod/RemovePod: account for `other` appearing on / leaving a node."""
        _update_with_anti_affinity_terms(
            self.existing_anti_affinity_counts,
            pod_terms(other).required_anti_affinity,
            self.pod,
            self.namespace_labels,
            node_labels,
            sign,
        )
        # The incoming pod's terms have their namespaceSelector merged: no lookup needed.
        _update_with_affinity_terms(
            self.affinity_counts, self.terms.required_affinity, other.pod, {}, node_labels, sign
        )
        _update_with_anti_affinity_terms(
            self.anti_affinity_counts,
            self.terms.required_anti_affinity,
            other.pod,
            {},
            node_labels,
            sign,
        )


PRE_FILTER_KEY: StateKey[PreFilterState] = StateKey("PreFilter" + NAME)


# --- topology scores (scoring.go) ---------------------------------------------


@dataclass
class PreScoreState:
    topology_score: ScoreMap


PRE_SCORE_KEY: StateKey[PreScoreState] = StateKey("PreScore" + NAME)


def _add_scores(into: ScoreMap, other: ScoreMap) -> None:
    for key, values in other.items():
        scores = into.setdefault(key, {})
        for value, score in values.items():
            scores[value] = scores.get(value, 0) + score


def _process_term(
    scores: ScoreMap,
    term: AffinityTerm,
    weight: int,
    pod: Pod,
    ns_labels: Mapping[str, str],
    node_labels: Mapping[str, str],
    multiplier: int,
) -> None:
    if term.matches(pod, ns_labels) and term.topology_key in node_labels:
        values = scores.setdefault(term.topology_key, {})
        value = node_labels[term.topology_key]
        values[value] = values.get(value, 0) + weight * multiplier


def _process_terms(
    scores: ScoreMap,
    terms: Iterable[WeightedAffinityTerm],
    pod: Pod,
    ns_labels: Mapping[str, str],
    node_labels: Mapping[str, str],
    multiplier: int,
) -> None:
    for wt in terms:
        _process_term(scores, wt.term, wt.weight, pod, ns_labels, node_labels, multiplier)


# --- the plugin -----------------------------------------------------------------


# --- existing pods' required anti-affinity, kept per node -------------------------

TermKey = tuple[Any, ...]
_ANTI_KEYS = f"{NAME}.anti_keys"  # PodInfo.derived: the required anti terms with keys


def term_key(term: AffinityTerm) -> TermKey:
    """What decides which pods a term selects, and where: equal keys, equal verdicts."""

    def sel(selector: LabelSelector | None) -> str | None:
        return None if selector is None else selector.model_dump_json()

    return (
        term.namespaces,
        sel(term.namespace_selector),
        sel(term.selector),
        term.topology_key,
    )


def _anti_terms_with_keys(pod_info: PodInfo) -> list[tuple[TermKey, AffinityTerm]]:
    cached = pod_info.derived.get(_ANTI_KEYS)
    if cached is None:
        terms = pod_terms(pod_info).required_anti_affinity
        cached = pod_info.derived[_ANTI_KEYS] = [(term_key(t), t) for t in terms]
    return cached


@dataclass
class ExistingAntiAffinityIndex:
    """Per distinct required anti-affinity term of the pods on the nodes, the topology
    pairs holding such pods and how many: what PreFilter's existing-anti-affinity count
    sums over the terms that match the incoming pod. Kept up to date from the
    snapshot's change log, so a cycle no longer walks every pod with anti-affinity."""

    snapshot: ClusterSnapshot | None = None  # the one it follows (compared by identity)
    position: int = 0
    terms: dict[TermKey, AffinityTerm] = field(default_factory=dict)
    domains: dict[TermKey, dict[TopologyPair, int]] = field(default_factory=dict)
    per_node: dict[str, list[tuple[TermKey, TopologyPair]]] = field(default_factory=dict)
    # Nodes holding a pod whose own terms score other pods (required affinity, for the
    # hard weight, or preferences): PreScore's candidates when the incoming pod has no
    # preferences of its own.
    scoring_nodes: dict[str, NodeInfo] = field(default_factory=dict)

    def sync(self, snapshot: ClusterSnapshot) -> None:
        changes = snapshot.changes_since(self.position) if snapshot is self.snapshot else None
        if changes is None:
            self._rebuild(snapshot)
            return
        names, self.position = changes
        for name in dict.fromkeys(names):
            node = snapshot.get(name)
            self._apply(name, _contribution(node))
            self._note_scoring(name, node)

    def _rebuild(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self.terms, self.domains, self.per_node = {}, {}, {}
        self.scoring_nodes = {}
        self.position = snapshot.log_position
        for node in snapshot.have_pods_with_required_anti_affinity:
            self._apply(node.name, _contribution(node))
        for node in snapshot.have_pods_with_affinity:
            self._note_scoring(node.name, node)

    def _note_scoring(self, name: str, node: NodeInfo | None) -> None:
        if (
            node is not None
            and node.affinity_pods
            and any(_scores_others(p) for p in node.pods_with_affinity)
        ):
            self.scoring_nodes[name] = node
        else:
            self.scoring_nodes.pop(name, None)

    def _apply(self, name: str, new: list[tuple[TermKey, AffinityTerm, TopologyPair]]) -> None:
        for key, pair in self.per_node.pop(name, []):
            counts = self.domains[key]
            counts[pair] -= 1
            if counts[pair] == 0:
                del counts[pair]
        for key, term, pair in new:
            self.terms.setdefault(key, term)
            counts = self.domains.setdefault(key, {})
            counts[pair] = counts.get(pair, 0) + 1
        if new:
            self.per_node[name] = [(key, pair) for key, _, pair in new]

    def add_to(self, counts: TopologyCounts, pod: Pod, ns_labels: Mapping[str, str]) -> None:
        """existing_anti_affinity_counts for `pod`: the pairs of every term matching it."""
        for key, pairs in self.domains.items():
            if pairs and self.terms[key].matches(pod, ns_labels):
                for pair, n in pairs.items():
                    counts[pair] = counts.get(pair, 0) + n


def _scores_others(pod_info: PodInfo) -> bool:
    terms = pod_terms(pod_info)
    return bool(
        terms.required_affinity or terms.preferred_affinity or terms.preferred_anti_affinity
    )


def _contribution(node: NodeInfo | None) -> list[tuple[TermKey, AffinityTerm, TopologyPair]]:
    """Each required anti term of the node's pods, with the node's pair for its key (a
    node without the key counts nowhere, as _update does)."""
    if node is None or node.raw_node is None or not node.anti_affinity_pods:
        return []
    labels = node.labels
    found = []
    for existing in node.pods_with_required_anti_affinity:
        for key, term in _anti_terms_with_keys(existing):
            if term.topology_key in labels:
                found.append((key, term, (term.topology_key, labels[term.topology_key])))
    return found


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
):
    name = NAME

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
                ClusterEvent("AssignedPod", "Add"), self.is_schedulable_after_pod_change
            ),
            ClusterEventWithHint(
                ClusterEvent("AssignedPod", "UpdatePodLabel"), self.is_schedulable_after_pod_change
            ),
            ClusterEventWithHint(
                ClusterEvent("AssignedPod", "Delete"), self.is_schedulable_after_pod_change
            ),
            ClusterEventWithHint(
                ClusterEvent("Node", "Add"), self.is_schedulable_after_node_change
            ),
            ClusterEventWithHint(
                ClusterEvent("Node", "UpdateNodeLabel"), self.is_schedulable_after_node_change
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
            return _pod_matches_all_terms(ts, other.pod, {})

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

    # --- prefilter -------------------------------------------------------------

    def _namespace_labels(self, namespace: str) -> dict[str, str]:
        # GetNamespaceLabelsSnapshot: an unknown namespace has no labels.
        return dict(self.handle.snapshot.objects.namespace_labels.get(namespace) or {})

    def _merged(self, terms: Iterable[AffinityTerm]) -> tuple[AffinityTerm, ...]:
        namespace_labels = self.handle.snapshot.objects.namespace_labels
        return tuple(t.merge_namespaces(namespace_labels) for t in terms)

    def _merged_weighted(
        self, terms: Iterable[WeightedAffinityTerm]
    ) -> tuple[WeightedAffinityTerm, ...]:
        namespace_labels = self.handle.snapshot.objects.namespace_labels
        return tuple(replace(t, term=t.term.merge_namespaces(namespace_labels)) for t in terms)

    def _pre_filter_state(self, pod: PodInfo) -> PreFilterState | None:
        """The PreFilter state, or None when there is nothing to check (Skip)."""
        parsed = pod_terms(pod)
        terms = PodTerms(
            required_affinity=self._merged(parsed.required_affinity),
            required_anti_affinity=self._merged(parsed.required_anti_affinity),
        )
        state = PreFilterState(pod.pod, terms, self._namespace_labels(pod.pod.metadata.namespace))
        self._count_existing_anti_affinity(state)
        self._count_incoming_affinity(state)
        if not (
            state.existing_anti_affinity_counts
            or terms.required_affinity
            or terms.required_anti_affinity
        ):
            return None
        return state

    def _count_existing_anti_affinity(self, state: PreFilterState) -> None:
        index = self.existing_anti
        index.sync(self.handle.snapshot)
        index.add_to(state.existing_anti_affinity_counts, state.pod, state.namespace_labels)

    def _count_incoming_affinity(self, state: PreFilterState) -> None:
        terms = state.terms
        if not terms.required_affinity and not terms.required_anti_affinity:
            return
        columns = self.handle.snapshot.built_columns
        if columns is not None:
            _count_incoming_affinity_from_columns(state, columns)
            return
        for node in self.handle.snapshot.node_infos:
            if node.raw_node is None:
                continue
            for existing in node.pods.values():
                _update_with_affinity_terms(
                    state.affinity_counts, terms.required_affinity, existing.pod, {}, node.labels, 1
                )
                _update_with_anti_affinity_terms(
                    state.anti_affinity_counts,
                    terms.required_anti_affinity,
                    existing.pod,
                    {},
                    node.labels,
                    1,
                )

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        pre = self._pre_filter_state(pod)
        if pre is None:
            return None, Status(Code.SKIP)
        state.write(PRE_FILTER_KEY, pre)
        return None, SUCCESS

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

    # --- filter ----------------------------------------------------------------

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if node.raw_node is None:
            return Status(Code.ERROR, ["node not found"])
        pre = state.read(PRE_FILTER_KEY)
        if pre is None:  # PreFilter did not run
            pre = self._pre_filter_state(pod)
            if pre is None:
                return SUCCESS
        labels = node.labels
        if not _satisfies_pod_affinity(pre, labels):
            return unschedulable(ERR_REASON_AFFINITY_RULES_NOT_MATCH, resolvable=False)
        if not _satisfies_pod_anti_affinity(pre, labels):
            return unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
        if not _satisfies_existing_pods_anti_affinity(pre, labels):
            return unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)
        return SUCCESS

    def filter_all(self, state: CycleState, pod: PodInfo, nodes: NodeColumns) -> BoolArray | None:
        pre = state.read(PRE_FILTER_KEY)
        if pre is None:
            return None
        mask = np.ones(nodes.n, dtype=np.bool_)
        terms = pre.terms.required_affinity
        if terms:  # _satisfies_pod_affinity
            pods_exist = np.ones(nodes.n, dtype=np.bool_)
            for term in terms:
                col = nodes.label(term.topology_key)
                mask &= col.present()
                pods_exist &= col.equals_any(_positive(pre.affinity_counts, term.topology_key))
            if pre.affinity_counts or not _pod_matches_all_terms(
                terms, pre.pod, pre.namespace_labels
            ):
                mask &= pods_exist
        if pre.anti_affinity_counts:  # _satisfies_pod_anti_affinity
            for term in pre.terms.required_anti_affinity:
                key = term.topology_key
                mask &= ~nodes.label(key).equals_any(_positive(pre.anti_affinity_counts, key))
        existing = pre.existing_anti_affinity_counts
        for key in dict.fromkeys(k for k, _ in existing):  # _satisfies_existing_pods_anti_affinity
            mask &= ~nodes.label(key).equals_any(_positive(existing, key))
        return mask

    # --- prescore / score --------------------------------------------------------

    def _pre_score_state(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> PreScoreState | None:
        """The PreScore state, or None when nothing can score (Skip)."""
        if not nodes:
            return None
        parsed = pod_terms(pod)
        has_constraints = bool(parsed.preferred_affinity or parsed.preferred_anti_affinity)
        # Existing pods' terms are ignored only when the pod has no preferences itself.
        if self.args.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return None
        incoming = PodTerms(
            preferred_affinity=self._merged_weighted(parsed.preferred_affinity),
            preferred_anti_affinity=self._merged_weighted(parsed.preferred_anti_affinity),
        )
        ns_labels = self._namespace_labels(pod.pod.metadata.namespace)
        snapshot = self.handle.snapshot
        # Without preferences of its own, only pods whose own terms score others can.
        if has_constraints:
            candidates: Iterable[NodeInfo] = snapshot.node_infos
        else:
            self.existing_anti.sync(snapshot)
            candidates = list(self.existing_anti.scoring_nodes.values())
        total: ScoreMap = {}
        scored_any = False
        for node in candidates:
            if node.raw_node is None:
                continue
            existing = node.pods.values() if has_constraints else node.pods_with_affinity
            scores: ScoreMap = {}
            for other in existing:
                self._process_existing_pod(scores, incoming, other, node, pod.pod, ns_labels)
            if scores:
                scored_any = True
                _add_scores(total, scores)
        return PreScoreState(total) if scored_any else None

    def _process_existing_pod(
        self,
        scores: ScoreMap,
        incoming: PodTerms,
        existing: PodInfo,
        node: NodeInfo,
        pod: Pod,
        ns_labels: Mapping[str, str],
    ) -> None:
        node_labels = node.labels
        if not node_labels:
            return
        # The incoming pod's preferences, matched against the existing pod (namespaces
        # already merged, so no namespace labels needed).
        _process_terms(scores, incoming.preferred_affinity, existing.pod, {}, node_labels, 1)
        _process_terms(scores, incoming.preferred_anti_affinity, existing.pod, {}, node_labels, -1)
        theirs = pod_terms(existing)
        weight = self.args.hard_pod_affinity_weight
        if weight > 0:
            for term in theirs.required_affinity:
                _process_term(scores, term, weight, pod, ns_labels, node_labels, 1)
        _process_terms(scores, theirs.preferred_affinity, pod, ns_labels, node_labels, 1)
        _process_terms(scores, theirs.preferred_anti_affinity, pod, ns_labels, node_labels, -1)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        pre = self._pre_score_state(pod, nodes)
        if pre is None:
            return Status(Code.SKIP)
        state.write(PRE_SCORE_KEY, pre)
        return SUCCESS

    def _score_state(self, state: CycleState, pod: PodInfo) -> PreScoreState | None:
        pre = state.read(PRE_SCORE_KEY)
        if pre is None:  # PreScore did not run
            pre = self._pre_score_state(pod, self.handle.snapshot.nodes)
            if pre is not None:
                state.write(PRE_SCORE_KEY, pre)
        return pre

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        """Sum of the weights of the node's topology domains: positive for affinity,
        negative for anti-affinity; normalized later."""
        pre = self._score_state(state, pod)
        if pre is None:
            return 0, SUCCESS
        labels = node.labels
        total = 0
        for key, values in pre.topology_score.items():
            if key in labels:
                total += values.get(labels[key], 0)
        return total, SUCCESS

    def score_all(
        self, state: CycleState, pod: PodInfo, nodes: NodeColumns, rows: IntArray
    ) -> IntArray | None:
        pre = state.read(PRE_SCORE_KEY)
        if pre is None:
            return None
        total = np.zeros(nodes.n, dtype=np.float64)
        for key, values in pre.topology_score.items():
            total += nodes.label(key).lookup(values)
        if len(total) and np.abs(total).max() >= 2**53:  # beyond exact float64 integers
            return None
        return total[rows].astype(np.int64)

    def normalize_all(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        pre = state.read(PRE_SCORE_KEY)
        if pre is None or not pre.topology_score or not len(scores):
            return scores
        low = int(scores.min())
        spread = int(scores.max()) - low
        if spread <= 0:
            return np.zeros(len(scores), dtype=np.int64)
        return (MAX_NODE_SCORE * ((scores - low) / spread)).astype(np.int64)

    def score_extensions(self) -> InterPodAffinity:
        return self

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[NodeScore]) -> Status:
        """Min-max to 0..MAX_NODE_SCORE; all equal scores become 0."""
        pre = self._score_state(state, pod)
        if pre is None or not pre.topology_score or not scores:
            return SUCCESS
        low = min(s.score for s in scores)
        spread = max(s.score for s in scores) - low
        for s in scores:
            # float64 arithmetic truncated toward zero, as Go's int64(fScore).
            s.score = int(MAX_NODE_SCORE * ((s.score - low) / spread)) if spread > 0 else 0
        return SUCCESS


def _positive(counts: TopologyCounts, key: str) -> list[str]:
    """The values of topology `key` that have a positive count."""
    return [value for (k, value), n in counts.items() if k == key and n > 0]


def _count_incoming_affinity_from_columns(state: PreFilterState, nodes: NodeColumns) -> None:
    """InterPodAffinity._count_incoming_affinity over the columns: pods matching the
    terms per node come from cached count columns, summed per topology domain."""
    terms = state.terms
    if terms.required_affinity:
        all_terms = terms.required_affinity
        key = ("InterPodAffinity.all", repr(all_terms))
        matching = nodes.pod_counts(
            key, _pod_counter(lambda p: _pod_matches_all_terms(all_terms, p, {}))
        )
        for term in all_terms:
            _add_domain_counts(state.affinity_counts, nodes, term.topology_key, matching)
    for term in terms.required_anti_affinity:
        key = ("InterPodAffinity.term", repr(term))
        matching = nodes.pod_counts(key, _pod_counter(_matches_all((term,))))
        _add_domain_counts(state.anti_affinity_counts, nodes, term.topology_key, matching)


def _matches_all(terms: tuple[AffinityTerm, ...]) -> Callable[[Pod], bool]:
    return lambda pod: _pod_matches_all_terms(terms, pod, {})


def _pod_counter(matches: Callable[[Pod], bool]) -> Callable[[NodeInfo], int]:
    return lambda node: sum(1 for p in node.pods.values() if matches(p.pod))


def _add_domain_counts(
    counts: TopologyCounts, nodes: NodeColumns, key: str, matching: IntArray
) -> None:
    rows = np.flatnonzero(nodes.label(key).present() & (matching > 0))
    for value, n in nodes.domain_sums(key, rows, matching).items():
        pair = (key, value)
        counts[pair] = counts.get(pair, 0) + n


def _satisfies_pod_affinity(pre: PreFilterState, labels: Mapping[str, str]) -> bool:
    pods_exist = True
    for term in pre.terms.required_affinity:
        if term.topology_key not in labels:
            return False  # all topology labels must exist on the node
        if pre.affinity_counts.get((term.topology_key, labels[term.topology_key]), 0) <= 0:
            pods_exist = False
    if pods_exist:
        return True
    # The first pod of a group with affinity to itself: no pod anywhere matches the
    # terms yet, but the pod matches its own terms, so do not leave it pending forever.
    return not pre.affinity_counts and _pod_matches_all_terms(
        pre.terms.required_affinity, pre.pod, pre.namespace_labels
    )


def _satisfies_pod_anti_affinity(pre: PreFilterState, labels: Mapping[str, str]) -> bool:
    if not pre.anti_affinity_counts:
        return True
    for term in pre.terms.required_anti_affinity:
        key = term.topology_key
        if key in labels and pre.anti_affinity_counts.get((key, labels[key]), 0) > 0:
            return False
    return True


def _satisfies_existing_pods_anti_affinity(pre: PreFilterState, labels: Mapping[str, str]) -> bool:
    counts = pre.existing_anti_affinity_counts
    return not counts or all(counts.get(pair, 0) <= 0 for pair in labels.items())


def new(args: dict[str, Any], handle: Handle) -> InterPodAffinity:
    return InterPodAffinity(parse_args(args), handle)
