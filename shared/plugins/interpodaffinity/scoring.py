"""InterPodAffinity's PreScore, Score and NormalizeScore (kube-scheduler's scoring.go):
per topology pair, the weights of the incoming pod's preferred terms matched by the
existing pods, and of the existing pods' terms matched by the incoming pod."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from shared.api.models import Pod
from shared.framework.interface import MAX_NODE_SCORE, NodeScore
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.interpodaffinity.index import ExistingAntiAffinityIndex
from shared.plugins.interpodaffinity.terms import (
    AffinityTerm,
    PodTerms,
    WeightedAffinityTerm,
    merged_weighted,
    namespace_labels,
    pod_terms,
)

if TYPE_CHECKING:
    from shared.plugins.interpodaffinity.plugin import InterPodAffinityArgs

ScoreMap = dict[str, dict[str, int]]  # topology key -> value -> score


@dataclass
class PreScoreState:
    topology_score: ScoreMap


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


def pre_score_state(
    pod: PodInfo,
    nodes: Sequence[NodeInfo],
    snapshot: ClusterSnapshot,
    index: ExistingAntiAffinityIndex,
    args: InterPodAffinityArgs,
) -> PreScoreState | None:
    """The PreScore state, or None when nothing can score (Skip)."""
    if not nodes:
        return None
    parsed = pod_terms(pod)
    has_constraints = bool(parsed.preferred_affinity or parsed.preferred_anti_affinity)
    # Existing pods' terms are ignored only when the pod has no preferences itself.
    if args.ignore_preferred_terms_of_existing_pods and not has_constraints:
        return None
    objects = snapshot.objects
    incoming = PodTerms(
        preferred_affinity=merged_weighted(objects, parsed.preferred_affinity),
        preferred_anti_affinity=merged_weighted(objects, parsed.preferred_anti_affinity),
    )
    ns_labels = namespace_labels(objects, pod.pod.metadata.namespace)
    # Without preferences of its own, only pods whose own terms score others can.
    if has_constraints:
        candidates: Iterable[NodeInfo] = snapshot.node_infos
    else:
        index.sync(snapshot)
        candidates = list(index.scoring_nodes.values())
    weight = args.hard_pod_affinity_weight
    total: ScoreMap = {}
    scored_any = False
    for node in candidates:
        if node.raw_node is None:
            continue
        existing = node.pods.values() if has_constraints else node.pods_with_affinity
        scores: ScoreMap = {}
        for other in existing:
            _process_existing_pod(scores, incoming, other, node, pod.pod, ns_labels, weight)
        if scores:
            scored_any = True
            _add_scores(total, scores)
    return PreScoreState(total) if scored_any else None


def _process_existing_pod(
    scores: ScoreMap,
    incoming: PodTerms,
    existing: PodInfo,
    node: NodeInfo,
    pod: Pod,
    ns_labels: Mapping[str, str],
    hard_pod_affinity_weight: int,
) -> None:
    node_labels = node.labels
    if not node_labels:
        return
    # The incoming pod's preferences, matched against the existing pod (namespaces
    # already merged, so no namespace labels needed).
    _process_terms(scores, incoming.preferred_affinity, existing.pod, {}, node_labels, 1)
    _process_terms(scores, incoming.preferred_anti_affinity, existing.pod, {}, node_labels, -1)
    theirs = pod_terms(existing)
    weight = hard_pod_affinity_weight
    if weight > 0:
        for term in theirs.required_affinity:
            _process_term(scores, term, weight, pod, ns_labels, node_labels, 1)
    _process_terms(scores, theirs.preferred_affinity, pod, ns_labels, node_labels, 1)
    _process_terms(scores, theirs.preferred_anti_affinity, pod, ns_labels, node_labels, -1)


def node_score(pre: PreScoreState, labels: Mapping[str, str]) -> int:
    """Sum of the weights of the node's topology domains: positive for affinity,
    negative for anti-affinity; normalized later."""
    total = 0
    for key, values in pre.topology_score.items():
        if key in labels:
            total += values.get(labels[key], 0)
    return total


def normalize(scores: list[NodeScore]) -> None:
    """Min-max to 0..MAX_NODE_SCORE; all equal scores become 0."""
    low = min(s.score for s in scores)
    spread = max(s.score for s in scores) - low
    for s in scores:
        # float64 arithmetic truncated toward zero, as Go's int64(fScore).
        s.score = int(MAX_NODE_SCORE * ((s.score - low) / spread)) if spread > 0 else 0
