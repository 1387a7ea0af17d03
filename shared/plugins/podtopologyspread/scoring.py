"""PodTopologySpread's PreScore, Score and NormalizeScore (kube-scheduler's
scoring.go): for each ScheduleAnyway constraint, matching pods per domain of the scored
nodes, weighted by the log of the number of domains; fewer matching pods score higher."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from shared.framework.interface import MAX_NODE_SCORE, NodeScore
from shared.framework.normalize import go_round
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.podtopologyspread.common import (
    LABEL_HOSTNAME,
    Constraint,
    count_matching,
    has_all_keys,
)


@dataclass
class PreScoreState:
    constraints: list[Constraint] = field(default_factory=list)
    ignored: set[str] = field(default_factory=set)  # nodes missing a topology key
    # Per constraint: domain of a scored node -> matching pods (none for hostname).
    counts: list[dict[str, int]] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)  # topologyNormalizingWeight


def pre_score_state(
    pod: PodInfo,
    constraints: list[Constraint],
    nodes: Sequence[NodeInfo],
    all_nodes: Sequence[NodeInfo],
    require_all: bool,
) -> PreScoreState:
    """The PreScore state of the nodes to score; no constraints: nothing to score."""
    s = _init_pre_score_state(constraints, nodes, require_all)
    if not s.constraints:
        return s
    namespace = pod.pod.metadata.namespace
    for node in all_nodes:  # filtered-out nodes count toward their domains too
        if require_all and not has_all_keys(node.labels, s.constraints):
            continue
        for i, c in enumerate(s.constraints):
            if not c.includes(pod, node):
                continue
            value = node.labels.get(c.topology_key, "")
            # Domains of no scored node are skipped; hostname counts come in Score.
            if value in s.counts[i]:
                s.counts[i][value] += count_matching(node, c, namespace)
    return s


def _init_pre_score_state(
    constraints: list[Constraint], nodes: Sequence[NodeInfo], require_all: bool
) -> PreScoreState:
    """initPreScoreState: ignored nodes, scored domains and their weights."""
    s = PreScoreState(constraints)
    if not s.constraints:
        return s
    s.counts = [{} for _ in s.constraints]
    for node in nodes:
        if require_all and not has_all_keys(node.labels, s.constraints):
            s.ignored.add(node.name)
            continue
        for i, c in enumerate(s.constraints):
            if c.topology_key != LABEL_HOSTNAME:
                s.counts[i].setdefault(node.labels.get(c.topology_key, ""), 0)
    for i, c in enumerate(s.constraints):
        size = len(s.counts[i])
        if c.topology_key == LABEL_HOSTNAME:
            size = len(nodes) - len(s.ignored)
        s.weights.append(math.log(size + 2))
    return s


def node_score(s: PreScoreState, pod: PodInfo, node: NodeInfo) -> int:
    """Score of a node not ignored: per constraint, the matching pods of its domain
    weighted, plus maxSkew - 1 (scoreForCount)."""
    total = 0.0
    namespace = pod.pod.metadata.namespace
    for i, c in enumerate(s.constraints):
        value = node.labels.get(c.topology_key)
        if value is None:
            continue
        if c.topology_key == LABEL_HOSTNAME:
            count = count_matching(node, c, namespace)
        else:
            count = s.counts[i].get(value, 0)
        total += count * s.weights[i] + (c.max_skew - 1)  # scoreForCount
    return go_round(total)


def normalize(s: PreScoreState, scores: list[NodeScore]) -> None:
    """Fewer matching pods score higher: MaxNodeScore*(max+min-s)/max; ignored nodes 0."""
    counted = [x.score for x in scores if x.name not in s.ignored]
    low, high = min(counted, default=0), max(counted, default=0)
    for x in scores:
        if x.name in s.ignored:
            x.score = 0
        elif high == 0:
            x.score = MAX_NODE_SCORE
        else:
            x.score = MAX_NODE_SCORE * (high + low - x.score) // high
