"""PodTopologySpread: spread matching pods over topology domains (zones, hosts).

DoNotSchedule constraints filter (skew over maxSkew, or a node missing a topology
key); ScheduleAnyway constraints score. Pods without constraints get the
default constraints (System: hostname maxSkew 3 and zone maxSkew 5, both
ScheduleAnyway, with a selector from the Services that select the pod).

Implements: PreFilterPlugin (+ PreFilterExtensions), FilterPlugin, PreScorePlugin,
ScorePlugin (+ NormalizeScore), EnqueueExtensions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from shared.api.models import (
    LabelSelector,
    LabelSelectorRequirement,
    TopologySpreadConstraint,
    describe_validation_error,
)
from shared.framework.cycle_state import CycleState, StateKey
from shared.framework.interface import (
    MAX_NODE_SCORE,
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
from shared.framework.selectors import label_requirement_matches
from shared.framework.snapshot import Handle
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.args import arg_error, reject_unknown
from shared.plugins.nodeaffinity import required_node_affinity_matches
from shared.plugins.tainttoleration import untolerated

NAME = "PodTopologySpread"
ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_ZONE = "topology.kubernetes.io/zone"
SYSTEM_DEFAULT_CONSTRAINTS = (
    TopologySpreadConstraint(
        max_skew=3, topology_key=LABEL_HOSTNAME, when_unsatisfiable="ScheduleAnyway"
    ),
    TopologySpreadConstraint(
        max_skew=5, topology_key=LABEL_ZONE, when_unsatisfiable="ScheduleAnyway"
    ),
)
_PRE_FILTER = StateKey["PreFilterState"]("PreFilter" + NAME)
_PRE_SCORE = StateKey["PreScoreState"]("PreScore" + NAME)


@dataclass(frozen=True)
class Selector:
    """labels.Selector: `nothing` matches no pod; an empty one matches every pod but,
    as upstream's countPodsMatchSelector, counts none."""

    nothing: bool = False
    equals: tuple[tuple[str, str], ...] = ()
    exprs: tuple[LabelSelectorRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.nothing and not self.equals and not self.exprs

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        if any(labels.get(k) != v for k, v in self.equals):
            return False
        return all(label_requirement_matches(e, labels) for e in self.exprs)


def selector_of(sel: LabelSelector | None) -> Selector:
    if sel is None:
        return Selector(nothing=True)
    return Selector(False, tuple(sel.match_labels.items()), tuple(sel.match_expressions))


@dataclass(frozen=True)
class Constraint:
    max_skew: int
    topology_key: str
    selector: Selector
    min_domains: int = 1
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"

    def includes(self, pod: PodInfo, node: NodeInfo) -> bool:
        """matchNodeInclusionPolicies."""
        if self.node_affinity_policy == "Honor" and not required_node_affinity_matches(pod, node):
            return False
        if self.node_taints_policy == "Honor":
            hard = [t for t in node.node.spec.taints if t.effect in ("NoSchedule", "NoExecute")]
            if untolerated(hard, pod.pod.spec.tolerations) is not None:
                return False
        return True


def count_matching(node: NodeInfo, selector: Selector, namespace: str) -> int:
    """countPodsMatchSelector: terminating pods and other namespaces do not count."""
    if selector.empty:
        return 0
    return sum(
        1
        for p in node.pods.values()
        if p.pod.metadata.deletion_timestamp is None
        and p.pod.metadata.namespace == namespace
        and selector.matches(p.pod.metadata.labels)
    )


def has_all_keys(labels: Mapping[str, str], constraints: list[Constraint]) -> bool:
    return all(c.topology_key in labels for c in constraints)


@dataclass
class PreFilterState:
    constraints: list[Constraint] = field(default_factory=list)
    counts: list[dict[str, int]] = field(default_factory=list)  # per constraint: domain -> pods

    def min_match(self, i: int) -> int:
        counts = self.counts[i]
        if len(counts) < self.constraints[i].min_domains or not counts:
            return 0  # fewer eligible domains than minDomains: the global minimum is 0
        return min(counts.values())

    def clone(self) -> PreFilterState:
        return PreFilterState(list(self.constraints), [dict(c) for c in self.counts])


@dataclass
class PreScoreState:
    constraints: list[Constraint] = field(default_factory=list)
    ignored: set[str] = field(default_factory=set)
    counts: list[dict[str, int]] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)


class PodTopologySpread(
    PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions
):
    name = NAME

    def __init__(
        self, handle: Handle, defaults: list[TopologySpreadConstraint], system_defaulted: bool
    ) -> None:
        self.handle = handle
        self.defaults = defaults
        self.system_defaulted = system_defaulted

    # --- constraints ------------------------------------------------------------

    def _filter_constraints(
        self, raw: list[TopologySpreadConstraint], pod: PodInfo, action: str
    ) -> list[Constraint]:
        out = []
        labels = pod.pod.metadata.labels
        for c in raw:
            if c.when_unsatisfiable != action:
                continue
            selector = selector_of(c.label_selector)
            extra = tuple((k, labels[k]) for k in c.match_label_keys if k in labels)
            if extra and not selector.nothing:  # a nil selector stays Nothing, as upstream
                selector = Selector(False, selector.equals + extra, selector.exprs)
            out.append(
                Constraint(
                    c.max_skew,
                    c.topology_key,
                    selector,
                    c.min_domains or 1,
                    c.node_affinity_policy or "Honor",
                    c.node_taints_policy or "Ignore",
                )
            )
        return out

    def _constraints(self, pod: PodInfo, action: str) -> list[Constraint]:
        if pod.pod.spec.topology_spread_constraints:
            return self._filter_constraints(pod.pod.spec.topology_spread_constraints, pod, action)
        constraints = self._filter_constraints(self.defaults, pod, action)
        if not constraints:
            return []
        selector = self._default_selector(pod)
        if selector.empty:
            return []
        return [
            Constraint(
                c.max_skew,
                c.topology_key,
                selector,
                c.min_domains,
                c.node_affinity_policy,
                c.node_taints_policy,
            )
            for c in constraints
        ]

    def _default_selector(self, pod: PodInfo) -> Selector:
        """helper.DefaultSelector: the union of the selectors of Services selecting the pod."""
        merged: dict[str, str] = {}
        labels = pod.pod.metadata.labels
        for svc in self.handle.snapshot.objects.services:
            meta = svc.get("metadata") or {}
            if (meta.get("namespace") or "default") != pod.pod.metadata.namespace:
                continue
            sel = (svc.get("spec") or {}).get("selector")
            if sel is None:
                continue  # a Service without a selector selects nothing
            if all(labels.get(k) == v for k, v in sel.items()):
                merged.update(sel)
        return Selector(False, tuple(merged.items()), ())

    # --- PreFilter / Filter -----------------------------------------------------

    def _pre_filter_state(self, pod: PodInfo) -> PreFilterState:
        constraints = self._constraints(pod, "DoNotSchedule")
        state = PreFilterState(constraints, [{} for _ in constraints])
        if not constraints:
            return state
        namespace = pod.pod.metadata.namespace
        for node in self.handle.snapshot.nodes:
            if not has_all_keys(node.labels, constraints):
                continue
            for i, c in enumerate(constraints):
                if not c.includes(pod, node):
                    continue
                value = node.labels[c.topology_key]
                state.counts[i][value] = state.counts[i].get(value, 0) + count_matching(
                    node, c.selector, namespace
                )
        return state

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        s = self._pre_filter_state(pod)
        if not s.constraints:
            return None, Status(Code.SKIP)
        state.write(_PRE_FILTER, s)
        return None, SUCCESS

    def pre_filter_extensions(self) -> PodTopologySpread:
        return self

    def add_pod(
        self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node: NodeInfo
    ) -> Status:
        return self._update(state, pod, pod_to_add, node, 1)

    def remove_pod(
        self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node: NodeInfo
    ) -> Status:
        return self._update(state, pod, pod_to_remove, node, -1)

    def _update(
        self, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo, delta: int
    ) -> Status:
        s = state.read(_PRE_FILTER)
        if s is None or other.pod.metadata.namespace != pod.pod.metadata.namespace:
            return SUCCESS
        if node.raw_node is None or not has_all_keys(node.labels, s.constraints):
            return SUCCESS
        for i, c in enumerate(s.constraints):
            if not c.selector.matches(other.pod.metadata.labels) or not c.includes(pod, node):
                continue
            value = node.labels[c.topology_key]
            s.counts[i][value] = s.counts[i].get(value, 0) + delta
        return SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        s = state.read(_PRE_FILTER)
        if s is None:
            s = self._pre_filter_state(pod)
        labels = pod.pod.metadata.labels
        for i, c in enumerate(s.constraints):
            value = node.labels.get(c.topology_key)
            if value is None:
                return Status(
                    Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [ERR_REASON_NODE_LABEL_NOT_MATCH]
                )
            self_match = 1 if c.selector.matches(labels) else 0
            skew = s.counts[i].get(value, 0) + self_match - s.min_match(i)
            if skew > c.max_skew:
                return Status(Code.UNSCHEDULABLE, [ERR_REASON_CONSTRAINTS_NOT_MATCH])
        return SUCCESS

    # --- PreScore / Score -------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> Status:
        all_nodes = self.handle.snapshot.nodes
        if not nodes or not all_nodes:
            return SUCCESS
        s = self._pre_score_state(pod, nodes)
        if not s.constraints:
            return Status(Code.SKIP)
        namespace = pod.pod.metadata.namespace
        require_all = bool(pod.pod.spec.topology_spread_constraints) or not self.system_defaulted
        for node in all_nodes:
            if require_all and not has_all_keys(node.labels, s.constraints):
                continue
            for i, c in enumerate(s.constraints):
                if not c.includes(pod, node):
                    continue
                value = node.labels.get(c.topology_key, "")
                if value not in s.counts[i]:
                    continue  # a domain of no candidate node, or a per-node (hostname) count
                s.counts[i][value] += count_matching(node, c.selector, namespace)
        state.write(_PRE_SCORE, s)
        return SUCCESS

    def _pre_score_state(self, pod: PodInfo, nodes: list[NodeInfo]) -> PreScoreState:
        s = PreScoreState(self._constraints(pod, "ScheduleAnyway"))
        if not s.constraints:
            return s
        require_all = bool(pod.pod.spec.topology_spread_constraints) or not self.system_defaulted
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
        if s is None or node.name in s.ignored:
            return 0, SUCCESS
        total = 0.0
        namespace = pod.pod.metadata.namespace
        for i, c in enumerate(s.constraints):
            value = node.labels.get(c.topology_key)
            if value is None:
                continue
            if c.topology_key == LABEL_HOSTNAME:
                count = count_matching(node, c.selector, namespace)
            else:
                count = s.counts[i].get(value, 0)
            total += count * s.weights[i] + (c.max_skew - 1)
        return go_round(total), SUCCESS

    def score_extensions(self) -> PodTopologySpread:
        return self

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[NodeScore]) -> Status:
        s = state.read(_PRE_SCORE)
        if s is None:
            return SUCCESS
        counted = [x.score for x in scores if x.name not in s.ignored]
        low = min(counted, default=0)
        high = max(counted, default=0)
        for x in scores:
            if x.name in s.ignored:
                x.score = 0
            elif high == 0:
                x.score = MAX_NODE_SCORE
            else:
                x.score = MAX_NODE_SCORE * (high + low - x.score) // high
        return SUCCESS

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent("Pod", "Add")),
            ClusterEventWithHint(ClusterEvent("Pod", "UpdatePodLabel")),
            ClusterEventWithHint(ClusterEvent("Pod", "Delete")),
            ClusterEventWithHint(ClusterEvent("Node", "Add")),
            ClusterEventWithHint(ClusterEvent("Node", "Delete")),
            ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeLabel")),
            ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeTaint")),
        ]


def new(args: dict[str, Any], handle: Handle) -> PodTopologySpread:
    reject_unknown(NAME, args, ("defaultConstraints", "defaultingType"))
    defaulting = args.get("defaultingType") or "System"
    if defaulting not in ("System", "List"):
        raise arg_error(NAME, "defaultingType", f"must be System or List, got {defaulting!r}")
    raw = args.get("defaultConstraints") or []
    if defaulting == "System":
        if raw:
            raise arg_error(
                NAME, "defaultConstraints", "must be empty when defaultingType is System"
            )
        return PodTopologySpread(handle, list(SYSTEM_DEFAULT_CONSTRAINTS), True)
    return PodTopologySpread(handle, _parse_defaults(raw), False)


def _parse_defaults(raw: Any) -> list[TopologySpreadConstraint]:
    if not isinstance(raw, list):
        raise arg_error(NAME, "defaultConstraints", "must be a list")
    out: list[TopologySpreadConstraint] = []
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(raw):
        where = f"defaultConstraints[{i}]"
        if isinstance(item, dict) and item.get("labelSelector") is not None:
            raise arg_error(
                NAME,
                f"{where}.labelSelector",
                "constraint must not define a selector, as they deduced for each pod",
            )
        try:
            c = TopologySpreadConstraint.model_validate(item)
        except ValidationError as err:
            raise arg_error(NAME, where, describe_validation_error(err)) from None
        if not c.topology_key:
            raise arg_error(NAME, f"{where}.topologyKey", "must not be empty")
        pair = (c.topology_key, c.when_unsatisfiable)
        if pair in seen:
            raise arg_error(NAME, where, f"duplicate {{{c.topology_key}, {c.when_unsatisfiable}}}")
        seen.add(pair)
        out.append(c)
    return out
