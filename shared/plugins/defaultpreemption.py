"""DefaultPreemption: when a pod fits nowhere, make room by preempting lower-priority pods.

Implements: PostFilterPlugin (and the evaluator's PreemptionPolicy).

Pure: it returns the chosen node and victims in the PostFilterResult; the worker
deletes the victims and nominates the node (docs/preemption.md). Each node's dry
run works on a DryRunNode: by arithmetic where only resources can decide
(shared/framework/resource_dry_run.py), else on clones of the node and the cycle state.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from shared.framework.cycle_state import CycleState
from shared.framework.handle import FilterRunner, Handle
from shared.framework.interface import PostFilterPlugin, PostFilterResult
from shared.framework.plugin_args import arg_error, reject_unknown
from shared.framework.preemption import Budget, Evaluator, importance, random_offset
from shared.framework.resource_dry_run import ResourceDryRun
from shared.framework.status import Code, Status
from shared.framework.types import NodeInfo, PodInfo

NAME = "DefaultPreemption"
MSG_PREFIX = "preemption: "
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
NO_VICTIMS = "No preemption victims found for incoming pod"

DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE = 10
DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE = 100


@dataclass(frozen=True)
class DefaultPreemptionArgs:
    min_candidate_nodes_percentage: int = DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE
    min_candidate_nodes_absolute: int = DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE


def parse_args(args: Mapping[str, Any]) -> DefaultPreemptionArgs:
    """v1 DefaultPreemptionArgs with kube-scheduler's defaults and validation."""
    pct_field, abs_field = "minCandidateNodesPercentage", "minCandidateNodesAbsolute"
    reject_unknown(NAME, args, (pct_field, abs_field))
    pct = _int_arg(args, pct_field, DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE)
    absolute = _int_arg(args, abs_field, DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE)
    if not 0 <= pct <= 100:
        raise arg_error(NAME, pct_field, f"Invalid value: {pct}: not in valid range [0, 100]")
    if absolute < 0:
        raise arg_error(NAME, abs_field, f"Invalid value: {absolute}: not in valid range [0, inf)")
    if pct == 0 and absolute == 0:
        raise arg_error(
            NAME, pct_field, f"Invalid value: 0: cannot be zero at the same time as {abs_field}"
        )
    return DefaultPreemptionArgs(pct, absolute)


def _int_arg(args: Mapping[str, Any], name: str, default: int) -> int:
    value = args.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise arg_error(NAME, name, f"must be an integer, got {value!r}")
    return value


def filter_pods_with_pdb_violation(
    pods: list[PodInfo], budgets: list[Budget]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """(violating, non-violating), order kept: a pod violates when removing it (after the
    pods before it in the list) takes a budget that covers it below zero."""
    if not budgets:
        return [], list(pods)
    allowed = [b.allowed for b in budgets]
    violating: list[PodInfo] = []
    non_violating: list[PodInfo] = []
    for info in pods:
        pod = info.pod
        violated = False
        for i, budget in enumerate(budgets):
            if not budget.pdb.matches(pod):
                continue
            if pod.metadata.name in budget.pdb.status.disrupted_pods:
                continue  # the API server already counted this disruption
            allowed[i] -= 1
            violated = violated or allowed[i] < 0
        (violating if violated else non_violating).append(info)
    return violating, non_violating


class DryRunNode(Protocol):
    """The copy of a node the dry run changes: its pods, and what Filter sees of them."""

    def remove_all(self, victims: Sequence[PodInfo]) -> Status:
        """Take the victims off; the preemptor's Filter status on what is left, with the
        nominated pods Filter counts."""
        ...

    def reprieve(self, victim: PodInfo) -> tuple[bool, Status]:
        """Put `victim` back; keep it (True) if the preemptor still fits."""
        ...


class ClonedNode:
    """The general copy: a clone of the node and the cycle state, updated through the
    PreFilter extensions, every Filter plugin run after each change."""

    def __init__(self, runner: FilterRunner, state: CycleState, pod: PodInfo, node: NodeInfo):
        self.runner = runner
        self.state = state
        self.pod = pod
        self.node = node

    def remove_all(self, victims: Sequence[PodInfo]) -> Status:
        runner, state, pod, node = self.runner, self.state, self.pod, self.node
        for victim in victims:
            node.remove_pod(victim.key)
            status = runner.run_pre_filter_extension_remove_pod(state, pod, victim, node)
            if not status.ok:
                return status
        return runner.run_filter_plugins_with_nominated_pods(state, pod, node)

    def reprieve(self, victim: PodInfo) -> tuple[bool, Status]:
        runner, state, pod, node = self.runner, self.state, self.pod, self.node
        node.add_pod(victim)
        status = runner.run_pre_filter_extension_add_pod(state, pod, victim, node)
        if not status.ok:
            return False, status
        if runner.run_filter_plugins_with_nominated_pods(state, pod, node).ok:
            return True, status
        node.remove_pod(victim.key)
        return False, runner.run_pre_filter_extension_remove_pod(state, pod, victim, node)


class DefaultPreemption(PostFilterPlugin):
    name = NAME
    # The dry run by arithmetic where it gives what the general one gives (tests turn
    # it off to compare the two).
    resource_dry_run = True

    def __init__(
        self, args: DefaultPreemptionArgs, handle: Handle, rng: random.Random | None = None
    ) -> None:
        self.args = args
        self.handle = handle
        self.rng = rng or random.Random()
        self.evaluator = Evaluator(handle, self)
        self._planned: tuple[CycleState, PodInfo, ResourceDryRun | None] | None = None

    def post_filter(
        self, state: CycleState, pod: PodInfo, node_to_status: dict[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        runner = self.handle.runner
        if self.resource_dry_run and runner is not None:
            plan = ResourceDryRun.plan(runner, self.handle.snapshot, state, pod, node_to_status)
            self._planned = (state, pod, plan)
        try:
            result, status = self.evaluator.preempt(state, pod, node_to_status)
        finally:
            self._planned = None  # holds the cycle's state: not past the cycle
        if status.reasons:
            status = Status(status.code, [MSG_PREFIX + status.message()])
        return result, status

    # --- PreemptionPolicy -------------------------------------------------------------

    def calculate_num_candidates(self, num_nodes: int) -> int:
        n = num_nodes * self.args.min_candidate_nodes_percentage // 100
        n = max(n, self.args.min_candidate_nodes_absolute)
        return min(n, num_nodes)

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        return random_offset(self.rng, num_nodes), self.calculate_num_candidates(num_nodes)

    def pod_eligible_to_preempt_others(
        self, pod: PodInfo, nominated_node_status: Status | None
    ) -> tuple[bool, str]:
        if pod.pod.spec.preemption_policy == "Never":
            return False, NOT_ELIGIBLE_NEVER
        nominated = pod.pod.status.nominated_node_name
        if not nominated:
            return True, ""
        if (
            nominated_node_status is not None
            and nominated_node_status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        ):
            return True, ""  # the nominated node cannot work any more: preempt again
        info = self.handle.snapshot.get(nominated)
        if info is not None and any(
            self._preemptible(victim, pod) and victim.key in self.handle.terminating
            for victim in info.pods.values()
        ):
            # Victims of an earlier preemption are still going: wait for them.
            return False, NOT_ELIGIBLE_TERMINATING
        return True, ""

    def select_victims_on_node(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, budgets: list[Budget]
    ) -> tuple[list[PodInfo], int, Status]:
        """The fewest, least important pods of `node` whose removal lets `pod` fit:
        remove every lower-priority pod, check the pod fits, then put back (reprieve) as
        many as possible, PDB-violating ones first, most important first. Works on a
        copy of `node` (and of `state`), made only once there are potential victims."""
        runner = self.handle.runner
        if runner is None:
            return [], 0, Status(Code.ERROR, ["preemption needs the framework's filter runner"])
        potential = sorted(
            (p for p in node.pods.values() if self._preemptible(p, pod)), key=importance
        )
        if not potential:
            return [], 0, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [NO_VICTIMS])
        copy = self._dry_run_node(runner, state, pod, node)
        # Without every lower-priority pod it still does not fit: no use here. (Affinity
        # to a victim is not considered, as upstream.)
        status = copy.remove_all(potential)
        if not status.ok:
            return [], 0, status
        violating, non_violating = filter_pods_with_pdb_violation(potential, budgets)
        victims: list[PodInfo] = []
        violations = 0
        for group, violates in ((violating, 1), (non_violating, 0)):
            for candidate in group:
                fits, status = copy.reprieve(candidate)
                if not status.ok:
                    return [], 0, status
                if not fits:
                    victims.append(candidate)
                    violations += violates
        if violating and non_violating:
            victims.sort(key=importance)
        return victims, violations, Status()

    def _dry_run_node(
        self, runner: FilterRunner, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> DryRunNode:
        """The node's copy: by arithmetic where only resources decide, else cloned."""
        if self.resource_dry_run:
            run = self._resource_dry_run(runner, state, pod)
            copy = run.node(node) if run is not None else None
            if copy is not None:
                return copy
        return ClonedNode(runner, state.clone(), pod, node.clone())

    def _resource_dry_run(
        self, runner: FilterRunner, state: CycleState, pod: PodInfo
    ) -> ResourceDryRun | None:
        """The fast path's per-preemptor part, planned once per PostFilter (the dry run
        asks for it on every node) or, called outside one, per call."""
        memo = self._planned
        if memo is not None and memo[0] is state and memo[1] is pod:
            return memo[2]
        return ResourceDryRun.plan(runner, self.handle.snapshot, state, pod)

    @staticmethod
    def _preemptible(victim: PodInfo, preemptor: PodInfo) -> bool:
        """isPreemptionAllowed: only pods of lower priority."""
        return victim.pod.spec.priority < preemptor.pod.spec.priority


def new(args: dict[str, Any], handle: Handle) -> DefaultPreemption:
    return DefaultPreemption(parse_args(args), handle)
