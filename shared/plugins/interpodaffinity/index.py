"""The required anti-affinity of the pods already on nodes, indexed per distinct term
and kept up to date from the snapshot's change log, so that a cycle does not walk every
pod with anti-affinity: PreFilter's existing-anti-affinity counts come from it, and
PreScore's candidate nodes when the incoming pod has no preferences of its own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.api.models import LabelSelector, Pod
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.interpodaffinity.terms import (
    AffinityTerm,
    TopologyCounts,
    TopologyPair,
    pod_terms,
)

TermKey = tuple[Any, ...]
_ANTI_KEYS = "InterPodAffinity.anti_keys"  # PodInfo.derived: the required anti terms with keys


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
