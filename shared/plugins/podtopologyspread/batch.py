"""The batch (columnar) path of PodTopologySpread: PreFilter's domain counts, Filter,
Score and its normalization over the snapshot's columns, in numpy. Each gives what its
per-node form gives (filtering.py, scoring.py) for every node at once."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from shared.framework.columns import BoolArray, FloatArray, IntArray, NodeColumns
from shared.framework.interface import MAX_NODE_SCORE
from shared.framework.types import PodInfo
from shared.plugins.nodeaffinity import required_node_affinity
from shared.plugins.podtopologyspread.common import LABEL_HOSTNAME, Constraint, count_matching
from shared.plugins.tainttoleration import tolerates_hard_taints

if TYPE_CHECKING:
    from shared.plugins.podtopologyspread.filtering import PreFilterState
    from shared.plugins.podtopologyspread.scoring import PreScoreState


def includes_all(constraint: Constraint, pod: PodInfo, nodes: NodeColumns) -> BoolArray:
    """Constraint.includes for every node of the columns."""
    mask = np.ones(nodes.n, dtype=np.bool_)
    if constraint.node_affinity_policy == "Honor":
        mask &= required_node_affinity(pod).matches_all(nodes)
    if constraint.node_taints_policy == "Honor":
        tolerations = pod.pod.spec.tolerations
        mask &= nodes.per_taint_group(lambda t: tolerates_hard_taints(t, tolerations)) != 0
    return mask


def _matching_pods(nodes: NodeColumns, constraint: Constraint, namespace: str) -> IntArray:
    """count_matching for every node, from the columns' cached count column."""
    key = ("PodTopologySpread", namespace, repr(constraint.selector))
    return nodes.pod_counts(key, lambda node: count_matching(node, constraint, namespace))


def domain_counts(
    pod: PodInfo, constraints: list[Constraint], nodes: NodeColumns
) -> list[dict[str, int]]:
    """The per-node counting of filtering.pre_filter_state, over the columns: matching
    pods per node come from a cached count column, summed per domain."""
    namespace = pod.pod.metadata.namespace
    has_all = np.ones(nodes.n, dtype=np.bool_)
    for c in constraints:
        has_all &= nodes.label(c.topology_key).present()
    counts = []
    for c in constraints:
        rows = np.flatnonzero(has_all & includes_all(c, pod, nodes))
        matching = _matching_pods(nodes, c, namespace)
        counts.append(nodes.domain_sums(c.topology_key, rows, matching))
    return counts


def filter_all(s: PreFilterState, pod: PodInfo, nodes: NodeColumns) -> BoolArray:
    """filtering.filter_node for every node: which pass."""
    labels = pod.pod.metadata.labels
    mask = np.ones(nodes.n, dtype=np.bool_)
    for i, c in enumerate(s.constraints):
        col = nodes.label(c.topology_key)
        mask &= col.present()
        # Matching pods per domain, by label code; the extra last entry serves
        # nodes without the label (code -1), already rejected above.
        per_code = [s.counts[i].get(value, 0) for value in col.values]
        counts = np.array([*per_code, 0], dtype=np.int64)[col.codes]
        self_match = 1 if c.matches(labels) else 0
        mask &= counts + self_match - s.min_match(i) <= c.max_skew
    return mask


def score_all(
    s: PreScoreState, pod: PodInfo, nodes: NodeColumns, rows: IntArray
) -> tuple[IntArray, BoolArray]:
    """scoring.node_score for the nodes at `rows` (0 for ignored ones), and which rows
    are ignored (normalize_all needs them and sees no names)."""
    namespace = pod.pod.metadata.namespace
    total = np.zeros(len(rows), dtype=np.float64)
    for i, c in enumerate(s.constraints):
        col = nodes.label(c.topology_key)
        counts: FloatArray
        if c.topology_key == LABEL_HOSTNAME:
            counts = _matching_pods(nodes, c, namespace)[rows].astype(np.float64)
        else:
            counts = col.lookup(s.counts[i])[rows]
        # Added in the per-node order: nodes without the key add nothing (x + 0.0 == x).
        term = counts * s.weights[i] + (c.max_skew - 1)
        total = total + np.where(col.present()[rows], term, 0.0)
    scores = np.floor(total + 0.5).astype(np.int64)  # go_round of a non-negative total
    ignored = np.zeros(len(rows), dtype=np.bool_)
    if s.ignored:
        ignored = nodes.name_mask(s.ignored)[rows]
        scores[ignored] = 0
    return scores, ignored


def normalize_all(scores: IntArray, ignored: BoolArray) -> IntArray:
    """scoring.normalize over the arrays score_all gave."""
    counted = scores[~ignored]
    low = int(counted.min()) if len(counted) else 0
    high = int(counted.max()) if len(counted) else 0
    if high == 0:
        normalized = np.full(len(scores), MAX_NODE_SCORE, dtype=np.int64)
    else:
        normalized = MAX_NODE_SCORE * (high + low - scores) // high
    return np.where(ignored, 0, normalized)
