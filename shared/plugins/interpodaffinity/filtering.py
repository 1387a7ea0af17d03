"""InterPodAffinity's PreFilter and Filter (kube-scheduler's filtering.go): per topology
pair, the existing pods whose required anti-affinity matches the incoming pod, and the
existing pods matching its required affinity and anti-affinity terms; a node passes
when its pairs satisfy all three."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from shared.api.models import Pod
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import SUCCESS, Status, unschedulable
from shared.framework.types import PodInfo
from shared.plugins.interpodaffinity.batch import count_incoming_affinity_from_columns
from shared.plugins.interpodaffinity.index import ExistingAntiAffinityIndex
from shared.plugins.interpodaffinity.terms import (
    AffinityTerm,
    PodTerms,
    TopologyCounts,
    merged,
    namespace_labels,
    pod_matches_all_terms,
    pod_terms,
)

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = (
    "node(s) didn't satisfy existing pods anti-affinity rules"
)
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"


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


def _update_with_affinity_terms(
    counts: TopologyCounts,
    terms: tuple[AffinityTerm, ...],
    pod: Pod,
    ns_labels: Mapping[str, str],
    node_labels: Mapping[str, str],
    value: int,
) -> None:
    """Counts the node's topology domains only if `pod` matches ALL the terms."""
    if pod_matches_all_terms(terms, pod, ns_labels):
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


def pre_filter_state(
    pod: PodInfo, snapshot: ClusterSnapshot, index: ExistingAntiAffinityIndex
) -> PreFilterState | None:
    """The PreFilter state, or None when there is nothing to check (Skip)."""
    parsed = pod_terms(pod)
    objects = snapshot.objects
    terms = PodTerms(
        required_affinity=merged(objects, parsed.required_affinity),
        required_anti_affinity=merged(objects, parsed.required_anti_affinity),
    )
    state = PreFilterState(pod.pod, terms, namespace_labels(objects, pod.pod.metadata.namespace))
    index.sync(snapshot)
    index.add_to(state.existing_anti_affinity_counts, state.pod, state.namespace_labels)
    _count_incoming_affinity(state, snapshot)
    if not (
        state.existing_anti_affinity_counts
        or terms.required_affinity
        or terms.required_anti_affinity
    ):
        return None
    return state


def _count_incoming_affinity(state: PreFilterState, snapshot: ClusterSnapshot) -> None:
    terms = state.terms
    if not terms.required_affinity and not terms.required_anti_affinity:
        return
    columns = snapshot.built_columns
    if columns is not None:
        count_incoming_affinity_from_columns(state, columns)
        return
    for node in snapshot.node_infos:
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


def filter_node(pre: PreFilterState, labels: Mapping[str, str]) -> Status:
    """Filter on a node with these labels."""
    if not _satisfies_pod_affinity(pre, labels):
        return unschedulable(ERR_REASON_AFFINITY_RULES_NOT_MATCH, resolvable=False)
    if not _satisfies_pod_anti_affinity(pre, labels):
        return unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
    if not _satisfies_existing_pods_anti_affinity(pre, labels):
        return unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)
    return SUCCESS


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
    return not pre.affinity_counts and pod_matches_all_terms(
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
