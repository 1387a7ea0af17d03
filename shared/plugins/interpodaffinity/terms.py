"""Pod (anti-)affinity terms as InterPodAffinity reads them: framework.AffinityTerm and
the parsed terms of a pod (kube-scheduler's framework/types.go), cached per PodInfo,
and the topology pairs (key, value) they count pods in."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from shared.api.models import (
    DEFAULT_NAMESPACE,
    LabelSelector,
    LabelSelectorRequirement,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    WeightedPodAffinityTerm,
)
from shared.framework.interface import ClusterObjects
from shared.framework.selectors import label_selector_matches
from shared.framework.types import PodInfo

_DERIVED_KEY = "InterPodAffinity"  # PodInfo.derived: the pod's parsed terms

TopologyPair = tuple[str, str]  # (topology key, value)
TopologyCounts = dict[TopologyPair, int]


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


def pod_matches_all_terms(
    terms: tuple[AffinityTerm, ...], pod: Pod, ns_labels: Mapping[str, str]
) -> bool:
    return bool(terms) and all(t.matches(pod, ns_labels) for t in terms)


def namespace_labels(objects: ClusterObjects, namespace: str) -> dict[str, str]:
    # GetNamespaceLabelsSnapshot: an unknown namespace has no labels.
    return dict(objects.namespace_labels.get(namespace) or {})


def merged(objects: ClusterObjects, terms: Iterable[AffinityTerm]) -> tuple[AffinityTerm, ...]:
    """The terms with their namespaceSelector unrolled into namespaces (merge_namespaces)."""
    labels = objects.namespace_labels
    return tuple(t.merge_namespaces(labels) for t in terms)


def merged_weighted(
    objects: ClusterObjects, terms: Iterable[WeightedAffinityTerm]
) -> tuple[WeightedAffinityTerm, ...]:
    labels = objects.namespace_labels
    return tuple(replace(t, term=t.term.merge_namespaces(labels)) for t in terms)
