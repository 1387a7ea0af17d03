"""PodTopologySpread's PreFilter and Filter (kube-scheduler's filtering.go): matching
pods per topology domain for each DoNotSchedule constraint, with the two emptiest
domains kept up to date; a node passes when placing the pod there keeps every skew
within maxSkew."""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.podtopologyspread.batch import domain_counts
from shared.plugins.podtopologyspread.common import Constraint, count_matching, has_all_keys

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"
_MAX_INT32 = 2**31 - 1


class CriticalPaths:
    """criticalPaths: the two domains with the fewest matching pods; [0] holds the global
    minimum. Exact when, as in preemption, AddPod/RemovePod touch a single node."""

    __slots__ = ("nums", "values")

    def __init__(self) -> None:
        self.values = ["", ""]
        self.nums = [_MAX_INT32, _MAX_INT32]

    def update(self, value: str, num: int) -> None:
        if value in (self.values[0], self.values[1]):
            i = 0 if value == self.values[0] else 1
            self.nums[i] = num
            if self.nums[0] > self.nums[1]:
                self.values.reverse()
                self.nums.reverse()
        elif num < self.nums[0]:
            self.values = [value, self.values[0]]
            self.nums = [num, self.nums[0]]
        elif num < self.nums[1]:
            self.values[1], self.nums[1] = value, num

    def clone(self) -> CriticalPaths:
        copy = CriticalPaths()
        copy.values, copy.nums = list(self.values), list(self.nums)
        return copy


@dataclass
class PreFilterState:
    constraints: list[Constraint] = field(default_factory=list)
    # Per constraint: domain (topology value) -> matching pods (TpValueToMatchNum).
    counts: list[dict[str, int]] = field(default_factory=list)
    paths: list[CriticalPaths] = field(default_factory=list)

    def min_match(self, i: int) -> int:
        """minMatchNum: fewer eligible domains than minDomains make the global minimum 0."""
        if len(self.counts[i]) < self.constraints[i].min_domains:
            return 0
        return self.paths[i].nums[0]

    def add(self, i: int, value: str, delta: int) -> None:
        self.counts[i][value] = self.counts[i].get(value, 0) + delta
        self.paths[i].update(value, self.counts[i][value])

    def clone(self) -> PreFilterState:
        return PreFilterState(
            self.constraints, [dict(c) for c in self.counts], [p.clone() for p in self.paths]
        )


def pre_filter_state(
    pod: PodInfo, constraints: list[Constraint], nodes: list[NodeInfo], snapshot: ClusterSnapshot
) -> PreFilterState:
    """calPreFilterState: matching pods per domain over nodes having every key."""
    s = PreFilterState(constraints, [{} for _ in constraints])
    if not constraints:
        return s
    namespace = pod.pod.metadata.namespace
    columns = snapshot.built_columns
    if columns is not None and nodes is snapshot.nodes:
        s.counts = domain_counts(pod, constraints, columns)
        nodes = []  # counted from the columns
    for node in nodes:
        if not has_all_keys(node.labels, constraints):
            continue
        for i, c in enumerate(constraints):
            if c.includes(pod, node):
                value = node.labels[c.topology_key]
                s.counts[i][value] = s.counts[i].get(value, 0) + count_matching(node, c, namespace)
    for counts in s.counts:
        paths = CriticalPaths()
        for value, num in counts.items():
            paths.update(value, num)
        s.paths.append(paths)
    return s


def update_with_pod(
    s: PreFilterState, pod: PodInfo, updated: PodInfo, node: NodeInfo, delta: int
) -> None:
    """AddPod/RemovePod: `updated` appeared on (delta 1) or left (-1) the node."""
    if updated.pod.metadata.namespace != pod.pod.metadata.namespace:
        return
    if node.raw_node is None or not has_all_keys(node.labels, s.constraints):
        return
    labels = updated.pod.metadata.labels
    for i, c in enumerate(s.constraints):
        if c.matches(labels) and c.includes(pod, node):
            s.add(i, node.labels[c.topology_key], delta)


def filter_node(s: PreFilterState, pod: PodInfo, node: NodeInfo) -> Status:
    """Filter: the node must have every topology key, and each skew stay within maxSkew."""
    labels = pod.pod.metadata.labels
    for i, c in enumerate(s.constraints):
        value = node.labels.get(c.topology_key)
        if value is None:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_NODE_LABEL_NOT_MATCH])
        self_match = 1 if c.matches(labels) else 0
        skew = s.counts[i].get(value, 0) + self_match - s.min_match(i)
        if skew > c.max_skew:
            return Status(Code.UNSCHEDULABLE, [ERR_REASON_CONSTRAINTS_NOT_MATCH])
    return SUCCESS
