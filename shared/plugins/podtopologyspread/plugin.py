"""PodTopologySpread: spread matching pods over topology domains (zones, hosts).

DoNotSchedule constraints filter (skew over maxSkew, or a node missing a topology
key); ScheduleAnyway constraints score. Pods without constraints get the
default constraints (System: hostname maxSkew 3 and zone maxSkew 5, both
ScheduleAnyway), with a selector from the Services that select the pod.

Implements: PreFilterPlugin (+ PreFilterExtensions), FilterPlugin, PreScorePlugin,
ScorePlugin (+ NormalizeScore), EnqueueExtensions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
from pydantic import ValidationError

from shared.api.models import (
    LabelSelector,
    LabelSelectorRequirement,
    TopologySpreadConstraint,
    describe_validation_error,
)
from shared.api.validation import qualified_name_errors
from shared.framework.columns import BoolArray, FloatArray, IntArray, NodeColumns
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
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
)
from shared.framework.normalize import go_round
from shared.framework.plugin_args import arg_error, reject_unknown
from shared.framework.selectors import label_selector_matches
from shared.framework.snapshot import Handle
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import LABEL_ZONE, NodeInfo, PodInfo
from shared.plugins.nodeaffinity import required_node_affinity, required_node_affinity_matches
from shared.plugins.tainttoleration import tolerates_hard_taints

NAME = "PodTopologySpread"
ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"
LABEL_HOSTNAME = "kubernetes.io/hostname"
DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"
SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"
SYSTEM_DEFAULT_CONSTRAINTS = (
    TopologySpreadConstraint(
        max_skew=3, topology_key=LABEL_HOSTNAME, when_unsatisfiable=SCHEDULE_ANYWAY
    ),
    TopologySpreadConstraint(
        max_skew=5, topology_key=LABEL_ZONE, when_unsatisfiable=SCHEDULE_ANYWAY
    ),
)
_MAX_INT32 = 2**31 - 1
_PRE_FILTER = StateKey["PreFilterState"]("PreFilter" + NAME)
_PRE_SCORE = StateKey["PreScoreState"]("PreScore" + NAME)
_IGNORED_ROWS = StateKey[BoolArray]("BatchScoreIgnored" + NAME)


# --- constraints ------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Constraint:
    """topologySpreadConstraint: a constraint with its selector resolved.

    `selector` None is labels.Nothing() (a constraint without labelSelector)."""

    max_skew: int
    topology_key: str
    selector: LabelSelector | None
    min_domains: int = 1
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"

    def matches(self, labels: Mapping[str, str]) -> bool:
        return label_selector_matches(self.selector, labels)

    @property
    def selector_empty(self) -> bool:
        """labels.Selector.Empty(): no requirements (Nothing is not empty)."""
        sel = self.selector
        return sel is not None and not sel.match_labels and not sel.match_expressions

    def includes_all(self, pod: PodInfo, nodes: NodeColumns) -> BoolArray:
        """`includes` for every node of the columns."""
        mask = np.ones(nodes.n, dtype=np.bool_)
        if self.node_affinity_policy == "Honor":
            mask &= required_node_affinity(pod).matches_all(nodes)
        if self.node_taints_policy == "Honor":
            tolerations = pod.pod.spec.tolerations
            mask &= nodes.per_taint_group(lambda t: tolerates_hard_taints(t, tolerations)) != 0
        return mask

    def includes(self, pod: PodInfo, node: NodeInfo) -> bool:
        """matchNodeInclusionPolicies: whether the node's domain counts for this pod."""
        if self.node_affinity_policy == "Honor" and not required_node_affinity_matches(pod, node):
            return False
        # DoNotScheduleTaintsFilterFunc: PreferNoSchedule taints never exclude a node.
        return self.node_taints_policy != "Honor" or tolerates_hard_taints(
            node.node.spec.taints, pod.pod.spec.tolerations
        )

    def with_selector(self, selector: LabelSelector) -> Constraint:
        return Constraint(
            self.max_skew,
            self.topology_key,
            selector,
            self.min_domains,
            self.node_affinity_policy,
            self.node_taints_policy,
        )


def _merge_match_label_keys(
    selector: LabelSelector | None, keys: list[str], pod_labels: Mapping[str, str]
) -> LabelSelector | None:
    """mergeLabelSetWithSelector: the pod's values of matchLabelKeys become requirements
    added to the selector (ANDed, so a conflicting matchLabels value matches nothing)."""
    extra = [
        LabelSelectorRequirement(key=k, operator="In", values=[pod_labels[k]])
        for k in keys
        if k in pod_labels
    ]
    if not extra or selector is None:  # Nothing has no requirements to merge into
        return selector
    return LabelSelector(
        match_labels=dict(selector.match_labels),
        match_expressions=[*selector.match_expressions, *extra],
    )


def filter_constraints(
    raw: list[TopologySpreadConstraint], pod_labels: Mapping[str, str], action: str
) -> list[Constraint]:
    """filterTopologySpreadConstraints: the constraints of one whenUnsatisfiable action."""
    return [
        Constraint(
            c.max_skew,
            c.topology_key,
            _merge_match_label_keys(c.label_selector, c.match_label_keys, pod_labels),
            c.min_domains or 1,
            c.node_affinity_policy or "Honor",
            c.node_taints_policy or "Ignore",
        )
        for c in raw
        if c.when_unsatisfiable == action
    ]


def default_selector(pod: PodInfo, services: list[dict[str, Any]]) -> LabelSelector:
    """helper.DefaultSelector over Services: the merged selectors of the Services in the
    pod's namespace that select it (a Service with a nil selector selects nothing)."""
    merged: dict[str, str] = {}
    labels = pod.pod.metadata.labels
    for svc in services:
        meta = svc.get("metadata") or {}
        if (meta.get("namespace") or "default") != pod.pod.metadata.namespace:
            continue
        selector = (svc.get("spec") or {}).get("selector")
        if selector is None:
            continue
        if all(labels.get(k) == v for k, v in selector.items()):
            merged.update(selector)
    return LabelSelector(match_labels=merged)


def has_all_keys(labels: Mapping[str, str], constraints: list[Constraint]) -> bool:
    """nodeLabelsMatchSpreadConstraints."""
    return all(c.topology_key in labels for c in constraints)


def _matching_pods(nodes: NodeColumns, constraint: Constraint, namespace: str) -> IntArray:
    """count_matching for every node, from the columns' cached count column."""
    key = ("PodTopologySpread", namespace, repr(constraint.selector))
    return nodes.pod_counts(key, lambda node: count_matching(node, constraint, namespace))


def count_matching(node: NodeInfo, constraint: Constraint, namespace: str) -> int:
    """countPodsMatchSelector: an empty selector counts nothing; terminating pods and
    pods of other namespaces do not count."""
    if constraint.selector_empty:
        return 0
    return sum(
        1
        for p in node.pods.values()
        if p.pod.metadata.deletion_timestamp is None
        and p.pod.metadata.namespace == namespace
        and constraint.matches(p.pod.metadata.labels)
    )


# --- PreFilter state ----------------------------------------------------------------


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


@dataclass
class PreScoreState:
    constraints: list[Constraint] = field(default_factory=list)
    ignored: set[str] = field(default_factory=set)  # nodes missing a topology key
    # Per constraint: domain of a scored node -> matching pods (none for hostname).
    counts: list[dict[str, int]] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)  # topologyNormalizingWeight


# --- plugin -------------------------------------------------------------------------


class PodTopologySpread(
    PreFilterPlugin,
    FilterPlugin,
    BatchFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    BatchScorePlugin,
    EnqueueExtensions,
):
    name = NAME

    def __init__(
        self, handle: Handle, defaults: list[TopologySpreadConstraint], system_defaulted: bool
    ) -> None:
        self.handle = handle
        self.defaults = defaults
        self.system_defaulted = system_defaulted

    def _constraints(self, pod: PodInfo, action: str) -> list[Constraint]:
        """The pod's own constraints, else buildDefaultConstraints (only with a non-empty
        default selector)."""
        labels = pod.pod.metadata.labels
        if pod.pod.spec.topology_spread_constraints:
            return filter_constraints(pod.pod.spec.topology_spread_constraints, labels, action)
        services = self.handle.snapshot.objects.services
        if not self.defaults or not services:
            return []
        # the selector first: without a Service selecting the pod, no default applies
        selector = default_selector(pod, services)
        if not selector.match_labels:
            return []
        constraints = filter_constraints(self.defaults, labels, action)
        return [c.with_selector(selector) for c in constraints]

    # --- PreFilter / Filter ---------------------------------------------------------

    def _pre_filter_state(self, pod: PodInfo, nodes: list[NodeInfo]) -> PreFilterState:
        """calPreFilterState: matching pods per domain over nodes having every key."""
        constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        s = PreFilterState(constraints, [{} for _ in constraints])
        if not constraints:
            return s
        namespace = pod.pod.metadata.namespace
        columns = self.handle.snapshot.built_columns
        if columns is not None and nodes is self.handle.snapshot.nodes:
            s.counts = self._domain_counts(pod, constraints, columns)
            nodes = []  # counted from the columns
        for node in nodes:
            if not has_all_keys(node.labels, constraints):
                continue
            for i, c in enumerate(constraints):
                if c.includes(pod, node):
                    value = node.labels[c.topology_key]
                    s.counts[i][value] = s.counts[i].get(value, 0) + count_matching(
                        node, c, namespace
                    )
        for counts in s.counts:
            paths = CriticalPaths()
            for value, num in counts.items():
                paths.update(value, num)
            s.paths.append(paths)
        return s

    @staticmethod
    def _domain_counts(
        pod: PodInfo, constraints: list[Constraint], nodes: NodeColumns
    ) -> list[dict[str, int]]:
        """The per-node counting of `_pre_filter_state`, over the columns: matching pods
        per node come from a cached count column, summed per domain."""
        namespace = pod.pod.metadata.namespace
        has_all = np.ones(nodes.n, dtype=np.bool_)
        for c in constraints:
            has_all &= nodes.label(c.topology_key).present()
        counts = []
        for c in constraints:
            rows = np.flatnonzero(has_all & c.includes_all(pod, nodes))
            matching = _matching_pods(nodes, c, namespace)
            counts.append(nodes.domain_sums(c.topology_key, rows, matching))
        return counts

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        s = self._pre_filter_state(pod, nodes)
        if not s.constraints:
            return None, Status(Code.SKIP)
        state.write(_PRE_FILTER, s)
        return None, SUCCESS

    def pre_filter_extensions(self) -> PodTopologySpread:
        return self

    def add_pod(
        self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node: NodeInfo
    ) -> Status:
        return self._update_with_pod(state, pod, pod_to_add, node, 1)

    def remove_pod(
        self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node: NodeInfo
    ) -> Status:
        return self._update_with_pod(state, pod, pod_to_remove, node, -1)

    def _update_with_pod(
        self, state: CycleState, pod: PodInfo, updated: PodInfo, node: NodeInfo, delta: int
    ) -> Status:
        s = state.read(_PRE_FILTER)
        if s is None:
            return Status(Code.ERROR, [f'reading "PreFilter{NAME}" from cycleState: not found'])
        if updated.pod.metadata.namespace != pod.pod.metadata.namespace:
            return SUCCESS
        if node.raw_node is None or not has_all_keys(node.labels, s.constraints):
            return SUCCESS
        labels = updated.pod.metadata.labels
        for i, c in enumerate(s.constraints):
            if c.matches(labels) and c.includes(pod, node):
                s.add(i, node.labels[c.topology_key], delta)
        return SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        s = state.read(_PRE_FILTER)
        if s is None:  # PreFilter did not run: compute what it would have
            s = self._pre_filter_state(pod, self.handle.snapshot.nodes)
        labels = pod.pod.metadata.labels
        for i, c in enumerate(s.constraints):
            value = node.labels.get(c.topology_key)
            if value is None:
                return Status(
                    Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_NODE_LABEL_NOT_MATCH]
                )
            self_match = 1 if c.matches(labels) else 0
            skew = s.counts[i].get(value, 0) + self_match - s.min_match(i)
            if skew > c.max_skew:
                return Status(Code.UNSCHEDULABLE, [ERR_REASON_CONSTRAINTS_NOT_MATCH])
        return SUCCESS

    def filter_all(self, state: CycleState, pod: PodInfo, nodes: NodeColumns) -> BoolArray | None:
        s = state.read(_PRE_FILTER)
        if s is None:
            return None
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

    # --- PreScore / Score -----------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        all_nodes = self.handle.snapshot.nodes
        if not all_nodes:
            return Status(Code.SKIP)
        # Only non-system-default spreading requires every topology key on a node, so
        # that nodes without a zone label still get hostname spreading.
        require_all = bool(pod.pod.spec.topology_spread_constraints) or not self.system_defaulted
        s = self._init_pre_score_state(pod, nodes, require_all)
        if not s.constraints:
            return Status(Code.SKIP)
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
        state.write(_PRE_SCORE, s)
        return SUCCESS

    def _init_pre_score_state(
        self, pod: PodInfo, nodes: Sequence[NodeInfo], require_all: bool
    ) -> PreScoreState:
        """initPreScoreState: ignored nodes, scored domains and their weights."""
        s = PreScoreState(self._constraints(pod, SCHEDULE_ANYWAY))
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

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        s = state.read(_PRE_SCORE)
        if s is None:
            return 0, _missing_pre_score_state()
        if node.name in s.ignored:
            return 0, SUCCESS
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
        return go_round(total), SUCCESS

    def score_all(
        self, state: CycleState, pod: PodInfo, nodes: NodeColumns, rows: IntArray
    ) -> IntArray | None:
        s = state.read(_PRE_SCORE)
        if s is None:
            return None  # the per-node path reports the missing state
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
        state.write(_IGNORED_ROWS, ignored)  # for normalize_all, which sees no names
        return scores

    def normalize_all(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        """normalize_score over the array score_all gave."""
        ignored = state.read(_IGNORED_ROWS)
        if ignored is None:
            raise LookupError(_missing_pre_score_state().message())
        counted = scores[~ignored]
        low = int(counted.min()) if len(counted) else 0
        high = int(counted.max()) if len(counted) else 0
        if high == 0:
            normalized = np.full(len(scores), MAX_NODE_SCORE, dtype=np.int64)
        else:
            normalized = MAX_NODE_SCORE * (high + low - scores) // high
        return np.where(ignored, 0, normalized)

    def score_extensions(self) -> PodTopologySpread:
        return self

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[NodeScore]) -> Status:
        """Fewer matching pods score higher: MaxNodeScore*(max+min-s)/max; ignored nodes 0."""
        s = state.read(_PRE_SCORE)
        if s is None:
            return _missing_pre_score_state()
        counted = [x.score for x in scores if x.name not in s.ignored]
        low, high = min(counted, default=0), max(counted, default=0)
        for x in scores:
            if x.name in s.ignored:
                x.score = 0
            elif high == 0:
                x.score = MAX_NODE_SCORE
            else:
                x.score = MAX_NODE_SCORE * (high + low - x.score) // high
        return SUCCESS

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # Assigned pods appearing, relabelled or leaving change domain counts; a new
        # toleration matters with nodeTaintsPolicy Honor; nodes added, removed,
        # relabelled or retainted change the domains.
        return [
            ClusterEventWithHint(ClusterEvent("Pod", "Add"), self.is_schedulable_after_pod_change),
            ClusterEventWithHint(
                ClusterEvent("Pod", "UpdatePodLabel"), self.is_schedulable_after_pod_change
            ),
            ClusterEventWithHint(
                ClusterEvent("Pod", "UpdatePodToleration"), self.is_schedulable_after_pod_change
            ),
            ClusterEventWithHint(
                ClusterEvent("Pod", "Delete"), self.is_schedulable_after_pod_change
            ),
            ClusterEventWithHint(
                ClusterEvent("Node", "Add"), self.is_schedulable_after_node_change
            ),
            ClusterEventWithHint(
                ClusterEvent("Node", "Delete"), self.is_schedulable_after_node_change
            ),
            ClusterEventWithHint(
                ClusterEvent("Node", "UpdateNodeLabel"), self.is_schedulable_after_node_change
            ),
            ClusterEventWithHint(
                ClusterEvent("Node", "UpdateNodeTaint"), self.is_schedulable_after_node_change
            ),
        ]

    def is_schedulable_after_pod_change(
        self, pod: PodInfo, old: PodInfo | None, new: PodInfo | None
    ) -> bool:
        """Queue when an assigned pod of the namespace that matches (or stopped
        matching) a hard constraint's selector came, changed labels or left; or the pod
        itself got a toleration that a nodeTaintsPolicy: Honor constraint cares about."""
        uid, namespace = pod.pod.metadata.uid, pod.pod.metadata.namespace

        def involved(other: PodInfo) -> bool:
            meta = other.pod.metadata
            return meta.uid == uid or bool(other.pod.spec.node_name and meta.namespace == namespace)

        if any(p is not None and not involved(p) for p in (old, new)):
            return False
        constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        if old is not None and new is not None:
            if (
                new.pod.metadata.uid == uid
                and new.pod.spec.tolerations != old.pod.spec.tolerations
                and any(c.node_taints_policy == "Honor" for c in constraints)
            ):
                return True
            before, after = old.pod.metadata.labels, new.pod.metadata.labels
            return before != after and any(
                c.matches(before) != c.matches(after) for c in constraints
            )
        other = new if new is not None else old
        if other is None:
            return True  # an unknown freed pod may help
        return any(c.matches(other.pod.metadata.labels) for c in constraints)

    def is_schedulable_after_node_change(
        self, pod: PodInfo, old: NodeInfo | None, new: NodeInfo | None
    ) -> bool:
        """Queue when a node with every topology key came or left, a node gained or lost
        a key, or such a node changed a key's value or its taints."""
        constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        old_matching = old is not None and has_all_keys(old.labels, constraints)
        new_matching = new is not None and has_all_keys(new.labels, constraints)
        if old is None or new is None:
            return new_matching or old_matching
        if old_matching != new_matching:
            return True
        keys_changed = any(
            old.labels.get(c.topology_key) != new.labels.get(c.topology_key) for c in constraints
        )
        taints_changed = old.node.spec.taints != new.node.spec.taints
        return new_matching and (keys_changed or taints_changed)


def _missing_pre_score_state() -> Status:
    return Status(Code.ERROR, [f'error reading "PreScore{NAME}" from cycleState: not found'])


# --- args ---------------------------------------------------------------------------

_CONSTRAINT_FIELDS = (
    "maxSkew",
    "topologyKey",
    "whenUnsatisfiable",
    "labelSelector",
    "minDomains",
    "nodeAffinityPolicy",
    "nodeTaintsPolicy",
    "matchLabelKeys",
)


def new(args: dict[str, Any], handle: Handle) -> PodTopologySpread:
    reject_unknown(NAME, args, ("defaultConstraints", "defaultingType"))
    defaulting = args.get("defaultingType") or SYSTEM_DEFAULTING  # SetDefaults
    raw = args.get("defaultConstraints")
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise arg_error(NAME, "defaultConstraints", "must be a list")
    if defaulting not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
        raise arg_error(
            NAME,
            "defaultingType",
            f'Unsupported value: "{defaulting}": supported values: "System", "List"',
        )
    if defaulting == SYSTEM_DEFAULTING and raw:
        raise arg_error(
            NAME,
            "defaultingType",
            'Invalid value: "System": when .defaultConstraints are not empty',
        )
    constraints = [_parse_default_constraint(raw, i) for i in range(len(raw))]
    if defaulting == SYSTEM_DEFAULTING:
        return PodTopologySpread(handle, list(SYSTEM_DEFAULT_CONSTRAINTS), True)
    return PodTopologySpread(handle, constraints, False)


def _parse_default_constraint(raw: list[Any], i: int) -> TopologySpreadConstraint:
    """ValidatePodTopologySpreadArgs for defaultConstraints[i]."""
    where = f"defaultConstraints[{i}]"
    item = raw[i]
    if not isinstance(item, dict):
        raise arg_error(NAME, where, "must be a mapping")
    for key in item:
        if key not in _CONSTRAINT_FIELDS:
            raise arg_error(NAME, f"{where}.{key}", "unknown field")
    max_skew = item.get("maxSkew", 0)
    if not isinstance(max_skew, int) or isinstance(max_skew, bool) or max_skew <= 0:
        raise arg_error(
            NAME, f"{where}.maxSkew", f"Invalid value: {max_skew}: not in valid range (0, inf)"
        )
    _validate_topology_key(f"{where}.topologyKey", item.get("topologyKey"))
    action = item.get("whenUnsatisfiable") or ""
    if not action:
        raise arg_error(NAME, f"{where}.whenUnsatisfiable", "Required value: can not be empty")
    if action not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise arg_error(
            NAME,
            f"{where}.whenUnsatisfiable",
            f'Unsupported value: "{action}": supported values: "DoNotSchedule", "ScheduleAnyway"',
        )
    if item.get("labelSelector") is not None:
        raise arg_error(
            NAME,
            f"{where}.labelSelector",
            "Forbidden: constraint must not define a selector, as they deduced for each pod",
        )
    for other in raw[:i]:
        if (
            isinstance(other, dict)
            and other.get("topologyKey") == item["topologyKey"]
            and other.get("whenUnsatisfiable") == action
        ):
            raise arg_error(NAME, where, f'Duplicate value: "{{{item["topologyKey"]}, {action}}}"')
    try:
        return TopologySpreadConstraint.model_validate(item)
    except ValidationError as err:
        raise arg_error(NAME, where, describe_validation_error(err)) from None


def _validate_topology_key(path: str, key: Any) -> None:
    """validateTopologyKey: required, and a qualified label name ([prefix/]name)."""
    if not key:
        raise arg_error(NAME, path, "Required value: can not be empty")
    if not isinstance(key, str):
        raise arg_error(NAME, path, f"Invalid value: {key!r}: must be a string")
    if qualified_name_errors(key):
        raise arg_error(
            NAME, path, f'Invalid value: "{key}": must be a valid label key ([prefix/]name)'
        )
