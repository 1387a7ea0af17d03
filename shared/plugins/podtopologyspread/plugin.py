"""PodTopologySpread: spread matching pods over topology domains (zones, hosts).

DoNotSchedule constraints filter (skew over maxSkew, or a node missing a topology
key); ScheduleAnyway constraints score. Pods without constraints get the
default constraints (System: hostname maxSkew 3 and zone maxSkew 5, both
ScheduleAnyway), with a selector from the Services that select the pod and from its
controller (helper.DefaultSelector).
kube-scheduler's pkg/scheduler/framework/plugins/podtopologyspread/plugin.go; the
phases' work is in filtering.py and scoring.py, what they share in common.py, the
columnar forms in batch.py.

Implements: PreFilterPlugin (+ PreFilterExtensions), FilterPlugin, PreScorePlugin,
ScorePlugin (+ NormalizeScore), EnqueueExtensions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from shared.api.models import TopologySpreadConstraint, describe_validation_error
from shared.api.validation import qualified_name_errors
from shared.framework.columns import BoolArray, IntArray, NodeColumns
from shared.framework.cycle_state import CycleState, StateKey
from shared.framework.events import (
    ADD,
    DELETE,
    NODE,
    POD,
    UPDATE_NODE_LABEL,
    UPDATE_NODE_TAINT,
    UPDATE_POD_LABEL,
    UPDATE_POD_TOLERATION,
)
from shared.framework.handle import Handle
from shared.framework.interface import (
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
    SignFragment,
    SignPlugin,
)
from shared.framework.plugin_args import arg_error, reject_unknown
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import LABEL_ZONE, NodeInfo, PodInfo
from shared.plugins.helper import default_selector
from shared.plugins.podtopologyspread import batch, filtering, scoring
from shared.plugins.podtopologyspread.common import (
    DO_NOT_SCHEDULE,
    LABEL_HOSTNAME,
    SCHEDULE_ANYWAY,
    Constraint,
    filter_constraints,
    has_all_keys,
)
from shared.plugins.podtopologyspread.filtering import PreFilterState
from shared.plugins.podtopologyspread.scoring import PreScoreState

NAME = "PodTopologySpread"
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
_PRE_FILTER = StateKey[PreFilterState]("PreFilter" + NAME)
_PRE_SCORE = StateKey[PreScoreState]("PreScore" + NAME)
_IGNORED_ROWS = StateKey[BoolArray]("BatchScoreIgnored" + NAME)


class PodTopologySpread(
    PreFilterPlugin,
    FilterPlugin,
    BatchFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    BatchScorePlugin,
    EnqueueExtensions,
    SignPlugin,
):
    name = NAME

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | None:
        # Spreading counts pods over other nodes: a pod with constraints, its own or
        # defaulted, is refused. Upstream refuses every pod once default constraints are
        # configured; here only pods they apply to (a Service or controller selects the
        # pod), as for the others the plugin skips (PreFilter and PreScore say Skip) and
        # reads nothing more of the pod.
        if self._constraints(pod, DO_NOT_SCHEDULE) or self._constraints(pod, SCHEDULE_ANYWAY):
            return None
        return []

    def __init__(
        self, handle: Handle, defaults: list[TopologySpreadConstraint], system_defaulted: bool
    ) -> None:
        self.handle = handle
        self.defaults = defaults
        self.system_defaulted = system_defaulted
        # Whether Filter may judge a pod without constraints of its own (List defaults
        # with DoNotSchedule; the system defaults only score).
        self.filters_by_default = any(c.when_unsatisfiable == DO_NOT_SCHEDULE for c in defaults)

    def _constraints(self, pod: PodInfo, action: str) -> list[Constraint]:
        """The pod's own constraints, else buildDefaultConstraints."""
        labels = pod.pod.metadata.labels
        if pod.pod.spec.topology_spread_constraints:
            return filter_constraints(pod.pod.spec.topology_spread_constraints, labels, action)
        objects = self.handle.snapshot.objects
        if not self.defaults or not objects.selecting:  # no selector could come: skip
            return []
        constraints = filter_constraints(self.defaults, labels, action)
        if not constraints:
            return []
        # from the pod's Services and controller; an empty one means no default applies
        selector = default_selector(pod, objects)
        if not selector.match_labels and not selector.match_expressions:
            return []
        return [c.with_selector(selector) for c in constraints]

    # --- PreFilter / Filter ---------------------------------------------------------

    def _pre_filter_state(self, pod: PodInfo, nodes: list[NodeInfo]) -> PreFilterState:
        constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        return filtering.pre_filter_state(pod, constraints, nodes, self.handle.snapshot)

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
        filtering.update_with_pod(s, pod, updated, node, delta)
        return SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        s = state.read(_PRE_FILTER)
        if s is None:  # PreFilter did not run: compute what it would have
            s = self._pre_filter_state(pod, self.handle.snapshot.nodes)
        return filtering.filter_node(s, pod, node)

    def filter_all(self, state: CycleState, pod: PodInfo, nodes: NodeColumns) -> BoolArray | None:
        s = state.read(_PRE_FILTER)
        if s is None:
            return None
        return batch.filter_all(s, pod, nodes)

    # --- PreScore / Score -----------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Status:
        all_nodes = self.handle.snapshot.nodes
        if not all_nodes:
            return Status(Code.SKIP)
        # Only non-system-default spreading requires every topology key on a node, so
        # that nodes without a zone label still get hostname spreading.
        require_all = bool(pod.pod.spec.topology_spread_constraints) or not self.system_defaulted
        constraints = self._constraints(pod, SCHEDULE_ANYWAY)
        s = scoring.pre_score_state(pod, constraints, nodes, all_nodes, require_all)
        if not s.constraints:
            return Status(Code.SKIP)
        state.write(_PRE_SCORE, s)
        return SUCCESS

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        s = state.read(_PRE_SCORE)
        if s is None:
            return 0, _missing_pre_score_state()
        if node.name in s.ignored:
            return 0, SUCCESS
        return scoring.node_score(s, pod, node), SUCCESS

    def score_all(
        self, state: CycleState, pod: PodInfo, nodes: NodeColumns, rows: IntArray
    ) -> IntArray | None:
        s = state.read(_PRE_SCORE)
        if s is None:
            return None  # the per-node path reports the missing state
        scores, ignored = batch.score_all(s, pod, nodes, rows)
        state.write(_IGNORED_ROWS, ignored)  # for normalize_all, which sees no names
        return scores

    def normalize_all(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        """normalize_score over the array score_all gave."""
        ignored = state.read(_IGNORED_ROWS)
        if ignored is None:
            raise LookupError(_missing_pre_score_state().message())
        return batch.normalize_all(scores, ignored)

    def score_extensions(self) -> PodTopologySpread:
        return self

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[NodeScore]) -> Status:
        s = state.read(_PRE_SCORE)
        if s is None:
            return _missing_pre_score_state()
        scoring.normalize(s, scores)
        return SUCCESS

    # --- enqueue --------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # Assigned pods appearing, relabelled or leaving change domain counts; a new
        # toleration matters with nodeTaintsPolicy Honor; nodes added, removed,
        # relabelled or retainted change the domains.
        return [
            ClusterEventWithHint(ClusterEvent(POD, ADD), self.is_schedulable_after_pod_change),
            ClusterEventWithHint(
                ClusterEvent(POD, UPDATE_POD_LABEL), self.is_schedulable_after_pod_change
            ),
            ClusterEventWithHint(
                ClusterEvent(POD, UPDATE_POD_TOLERATION), self.is_schedulable_after_pod_change
            ),
            ClusterEventWithHint(ClusterEvent(POD, DELETE), self.is_schedulable_after_pod_change),
            ClusterEventWithHint(ClusterEvent(NODE, ADD), self.is_schedulable_after_node_change),
            ClusterEventWithHint(ClusterEvent(NODE, DELETE), self.is_schedulable_after_node_change),
            ClusterEventWithHint(
                ClusterEvent(NODE, UPDATE_NODE_LABEL), self.is_schedulable_after_node_change
            ),
            ClusterEventWithHint(
                ClusterEvent(NODE, UPDATE_NODE_TAINT), self.is_schedulable_after_node_change
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
