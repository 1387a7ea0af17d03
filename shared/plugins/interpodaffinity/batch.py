"""The batch (columnar) path of InterPodAffinity: PreFilter's counts of pods matching
the incoming pod's terms, Filter, Score and its normalization over the snapshot's
columns, in numpy. Each gives what its per-node form gives (filtering.py, scoring.py)
for every node at once, or None where only the per-node path is exact."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from shared.api.models import Pod
from shared.framework.columns import BoolArray, IntArray, NodeColumns
from shared.framework.interface import MAX_NODE_SCORE
from shared.framework.types import NodeInfo
from shared.plugins.interpodaffinity.terms import (
    AffinityTerm,
    TopologyCounts,
    pod_matches_all_terms,
)

if TYPE_CHECKING:
    from shared.plugins.interpodaffinity.filtering import PreFilterState
    from shared.plugins.interpodaffinity.scoring import PreScoreState


def filter_all(pre: PreFilterState, nodes: NodeColumns) -> BoolArray:
    """filtering.filter_node for every node: which pass."""
    mask = np.ones(nodes.n, dtype=np.bool_)
    terms = pre.terms.required_affinity
    if terms:  # _satisfies_pod_affinity
        pods_exist = np.ones(nodes.n, dtype=np.bool_)
        for term in terms:
            col = nodes.label(term.topology_key)
            mask &= col.present()
            pods_exist &= col.equals_any(_positive(pre.affinity_counts, term.topology_key))
        if pre.affinity_counts or not pod_matches_all_terms(terms, pre.pod, pre.namespace_labels):
            mask &= pods_exist
    if pre.anti_affinity_counts:  # _satisfies_pod_anti_affinity
        for term in pre.terms.required_anti_affinity:
            key = term.topology_key
            mask &= ~nodes.label(key).equals_any(_positive(pre.anti_affinity_counts, key))
    existing = pre.existing_anti_affinity_counts
    for key in dict.fromkeys(k for k, _ in existing):  # _satisfies_existing_pods_anti_affinity
        mask &= ~nodes.label(key).equals_any(_positive(existing, key))
    return mask


def score_all(pre: PreScoreState, nodes: NodeColumns, rows: IntArray) -> IntArray | None:
    """scoring.node_score for the nodes at `rows`."""
    total = np.zeros(nodes.n, dtype=np.float64)
    for key, values in pre.topology_score.items():
        total += nodes.label(key).lookup(values)
    if len(total) and np.abs(total).max() >= 2**53:  # beyond exact float64 integers
        return None
    return total[rows].astype(np.int64)


def normalize_all(scores: IntArray) -> IntArray:
    """scoring.normalize over an array."""
    low = int(scores.min())
    spread = int(scores.max()) - low
    if spread <= 0:
        return np.zeros(len(scores), dtype=np.int64)
    return (MAX_NODE_SCORE * ((scores - low) / spread)).astype(np.int64)


def _positive(counts: TopologyCounts, key: str) -> list[str]:
    """The values of topology `key` that have a positive count."""
    return [value for (k, value), n in counts.items() if k == key and n > 0]


def count_incoming_affinity_from_columns(state: PreFilterState, nodes: NodeColumns) -> None:
    """filtering._count_incoming_affinity over the columns: pods matching the
    terms per node come from cached count columns, summed per topology domain."""
    terms = state.terms
    if terms.required_affinity:
        all_terms = terms.required_affinity
        key = ("InterPodAffinity.all", repr(all_terms))
        matching = nodes.pod_counts(
            key, _pod_counter(lambda p: pod_matches_all_terms(all_terms, p, {}))
        )
        for term in all_terms:
            _add_domain_counts(state.affinity_counts, nodes, term.topology_key, matching)
    for term in terms.required_anti_affinity:
        key = ("InterPodAffinity.term", repr(term))
        matching = nodes.pod_counts(key, _pod_counter(_matches_all((term,))))
        _add_domain_counts(state.anti_affinity_counts, nodes, term.topology_key, matching)


def _matches_all(terms: tuple[AffinityTerm, ...]) -> Callable[[Pod], bool]:
    return lambda pod: pod_matches_all_terms(terms, pod, {})


def _pod_counter(matches: Callable[[Pod], bool]) -> Callable[[NodeInfo], int]:
    return lambda node: sum(1 for p in node.pods.values() if matches(p.pod))


def _add_domain_counts(
    counts: TopologyCounts, nodes: NodeColumns, key: str, matching: IntArray
) -> None:
    rows = np.flatnonzero(nodes.label(key).present() & (matching > 0))
    for value, n in nodes.domain_sums(key, rows, matching).items():
        pair = (key, value)
        counts[pair] = counts.get(pair, 0) + n
