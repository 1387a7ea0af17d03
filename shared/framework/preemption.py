"""Preemption's evaluator (kube-scheduler's framework/preemption), pure.

For a pod that fits nowhere: find the nodes where removing lower-priority pods
would let it fit (candidates, dry-run on copies of the node and cycle state),
pick one node with pickOneNodeForPreemption, and say which pods go (victims).
The caller deletes them and nominates the node (the act phase is I/O and lives
in the worker). The plugin supplies the policy parts (`PreemptionPolicy`):
eligibility, sampling, and the victims of one node.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from shared.api.pdb import PodDisruptionBudget
from shared.framework.cycle_state import CycleState
from shared.framework.diagnosis import Diagnosis, FitError
from shared.framework.handle import Handle
from shared.framework.interface import PostFilterResult
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import Code, Status
from shared.framework.types import NodeInfo, PodInfo

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_CANDIDATE = "no candidate node for preemption"
_INT32_SPAN = 2**31  # MaxInt32 + 1: shifts priorities to >= 0 before summing


@dataclass
class Budget:
    """A PodDisruptionBudget with the disruptions it allows now."""

    pdb: PodDisruptionBudget
    allowed: int


@dataclass
class Victims:
    pods: list[PodInfo]  # most important first
    num_pdb_violations: int = 0


@dataclass
class Candidate:
    name: str
    victims: Victims


class PreemptionPolicy(Protocol):
    """The plugin's part of preemption (kube's preemption.Interface)."""

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]: ...

    def pod_eligible_to_preempt_others(
        self, pod: PodInfo, nominated_node_status: Status | None
    ) -> tuple[bool, str]: ...

    def select_victims_on_node(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, budgets: list[Budget]
    ) -> tuple[list[PodInfo], int, Status]:
        """Leaves `state` and `node` as they are: a dry run works on copies of both."""
        ...


# --- pod ordering ---------------------------------------------------------------

# PodInfo.derived is shared by the versions of one slim pod, which holds startTime.
_START_TIME_KEY = "preemption/startTime"


def start_time(pod: PodInfo) -> float:
    """GetPodStartTime: status.startTime; a pod without one (no kubelet reported it)
    counts as starting now, i.e. later than any recorded time. Kept with the pod: every
    dry run sorts the pods of hundreds of nodes by it."""
    cached = pod.derived.get(_START_TIME_KEY)
    if cached is None:
        cached = pod.derived[_START_TIME_KEY] = _parse_start_time(pod.pod.status.start_time)
    return cached


def _parse_start_time(raw: str | None) -> float:
    if not raw:
        return math.inf
    try:
        return dt.datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return math.inf


def importance(pod: PodInfo) -> tuple[int, float]:
    """Sort key, most important first: higher priority, then earlier start (MoreImportantPod)."""
    return (-pod.pod.spec.priority, start_time(pod))


def earliest_start_time(victims: Victims) -> float:
    """GetEarliestPodStartTime: the earliest start among the highest-priority victims."""
    top = max(p.pod.spec.priority for p in victims.pods)
    return min(start_time(p) for p in victims.pods if p.pod.spec.priority == top)


# --- choosing the node ------------------------------------------------------------


def _sum_of_priorities(victims: Victims) -> int:
    return sum(p.pod.spec.priority + _INT32_SPAN for p in victims.pods)


# pickOneNodeForPreemption's criteria, each a score where higher is better.
_SCORES: tuple[Callable[[Victims], float], ...] = (
    lambda v: -v.num_pdb_violations,  # fewest PDB violations
    lambda v: -v.pods[0].pod.spec.priority,  # lowest highest-priority victim
    lambda v: -_sum_of_priorities(v),
    lambda v: -len(v.pods),  # fewest victims
    earliest_start_time,  # latest start of the top victims
)


def pick_one_node_for_preemption(candidates: Sequence[Candidate]) -> str:
    """Keep the best-scoring nodes criterion by criterion until one is left; if several
    tie on all of them, the first (kube's map order makes that arbitrary; ours is the
    order the dry run found them in)."""
    if not candidates:
        return ""
    left = list(candidates)
    for score in _SCORES:
        scores = [score(c.victims) for c in left]
        best = max(scores)
        left = [c for c, s in zip(left, scores, strict=True) if s == best]
        if len(left) == 1:
            break
    return left[0].name


def select_candidate(candidates: Sequence[Candidate]) -> Candidate | None:
    if not candidates:
        return None
    if len(candidates) == 1:
        return candidates[0]
    chosen = pick_one_node_for_preemption(candidates)
    return next(c for c in candidates if c.name == chosen)


# --- the evaluator ------------------------------------------------------------------


class AllowedDisruptions:
    """Each PDB's disruptionsAllowed, kept while the snapshot and the PDBs stay the same:
    a PDB without a status counts the placed pods it covers, a walk over every pod that
    would otherwise be made again for every preemptor. The snapshot's change log says
    when its pods changed."""

    def __init__(self) -> None:
        self._snapshot: weakref.ref[ClusterSnapshot] | None = None
        self._position = 0
        self._pdbs: list[PodDisruptionBudget] = []
        self._allowed: list[int] = []

    def of(self, snapshot: ClusterSnapshot, pdbs: list[PodDisruptionBudget]) -> list[int]:
        if not self._fresh(snapshot, pdbs):
            placed = []
            if any(pdb.status.disruptions_allowed is None for pdb in pdbs):
                placed = [p.pod for n in snapshot.node_infos for p in n.pods.values()]
            self._allowed = [pdb.disruptions_allowed(placed) for pdb in pdbs]
            self._snapshot, self._position = weakref.ref(snapshot), snapshot.log_position
            self._pdbs = list(pdbs)
        return self._allowed

    def _fresh(self, snapshot: ClusterSnapshot, pdbs: list[PodDisruptionBudget]) -> bool:
        return (
            self._snapshot is not None
            and self._snapshot() is snapshot
            and self._position == snapshot.log_position
            and len(self._pdbs) == len(pdbs)
            and all(a is b for a, b in zip(self._pdbs, pdbs, strict=True))
        )


class Evaluator:
    def __init__(self, handle: Handle, policy: PreemptionPolicy) -> None:
        self.handle = handle
        self.policy = policy
        self._allowed = AllowedDisruptions()

    def preempt(
        self, state: CycleState, pod: PodInfo, node_to_status: dict[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        """Preempt: None keeps the pod's nomination as it is (not eligible, or an error);
        a result with "" clears it (preemption cannot help); else the chosen node."""
        nominated = pod.pod.status.nominated_node_name
        ok, msg = self.policy.pod_eligible_to_preempt_others(pod, node_to_status.get(nominated))
        if not ok:
            return None, Status(Code.UNSCHEDULABLE, [msg])
        all_nodes = self.handle.snapshot.nodes
        if not all_nodes:
            return None, Status(Code.ERROR, ["no nodes available"])
        candidates, statuses, errors = self.find_candidates(state, pod, node_to_status)
        if errors and not candidates:
            return None, Status(Code.ERROR, [_aggregate(errors)])
        if not candidates:
            not_helpful = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [NOT_HELPFUL])
            for node in all_nodes:
                statuses.setdefault(node.name, not_helpful)
            fit = FitError(pod.key, len(all_nodes), Diagnosis(node_to_status=statuses))
            return PostFilterResult(""), Status(Code.UNSCHEDULABLE, [fit.message()])
        best = select_candidate(candidates)
        if best is None or not best.name:
            return None, Status(Code.UNSCHEDULABLE, [NO_CANDIDATE])
        return self._result(pod, best), Status()

    def find_candidates(
        self, state: CycleState, pod: PodInfo, node_to_status: dict[str, Status]
    ) -> tuple[list[Candidate], dict[str, Status], list[str]]:
        """Candidates among the nodes whose Filter status is Unschedulable (removing pods
        may help there; UnschedulableAndUnresolvable says it would not)."""
        potential = [
            n
            for n in self.handle.snapshot.nodes
            if (s := node_to_status.get(n.name)) is not None and s.code == Code.UNSCHEDULABLE
        ]
        if not potential:
            return [], {}, []
        offset, num_candidates = self.policy.get_offset_and_num_candidates(len(potential))
        return self.dry_run_preemption(
            state, pod, potential, self.budgets(), offset, num_candidates
        )

    def budgets(self) -> list[Budget]:
        pdbs = self.handle.pdbs
        if not pdbs:
            return []
        allowed = self._allowed.of(self.handle.snapshot, pdbs)
        return [Budget(pdb, n) for pdb, n in zip(pdbs, allowed, strict=True)]

    def dry_run_preemption(
        self,
        state: CycleState,
        pod: PodInfo,
        potential: list[NodeInfo],
        budgets: list[Budget],
        offset: int,
        num_candidates: int,
    ) -> tuple[list[Candidate], dict[str, Status], list[str]]:
        """DryRunPreemption, node by node from `offset` (kube runs it in parallel): stop
        once there is a non-violating candidate and `num_candidates` in all. Candidates
        that violate no PDB come first."""
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        statuses: dict[str, Status] = {}
        errors: list[str] = []
        for i in range(len(potential)):
            node = potential[(offset + i) % len(potential)]
            pods, violations, status = self.policy.select_victims_on_node(state, pod, node, budgets)
            if status.ok and pods:
                group = violating if violations else non_violating
                group.append(Candidate(node.name, Victims(pods, violations)))
                if non_violating and len(non_violating) + len(violating) >= num_candidates:
                    break
                continue
            if status.ok:
                status = Status(
                    Code.ERROR, [f"expected at least one victim pod on node {node.name}"]
                )
            if status.code == Code.ERROR:
                errors.append(status.message())
            statuses[node.name] = status
        candidates = non_violating[:num_candidates] + violating[:num_candidates]
        return candidates, statuses, errors

    def _result(self, pod: PodInfo, best: Candidate) -> PostFilterResult:
        """The chosen node, its victims, and the lower-priority pods nominated there
        (getLowerPriorityNominatedPods), whose nomination the caller clears."""
        priority = pod.pod.spec.priority
        lower = [
            p
            for p in self.handle.nominated.get(best.name, [])
            if p.pod.spec.priority < priority and p.pod.metadata.uid != pod.pod.metadata.uid
        ]
        return PostFilterResult(best.name, list(best.victims.pods), lower)


def _aggregate(errors: list[str]) -> str:
    """utilerrors.NewAggregate's message."""
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"


def random_offset(rng: random.Random, num_nodes: int) -> int:
    return rng.randrange(num_nodes) if num_nodes > 0 else 0
