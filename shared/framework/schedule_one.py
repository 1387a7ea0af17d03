"""schedulePod for one profile: find feasible nodes, score them, pick one (pure).

The worker calls it per pod with its snapshot; `ksched simulate` calls it to
explain a decision.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from shared.framework.cycle_state import CycleState
from shared.framework.diagnosis import Diagnosis, FitError
from shared.framework.runtime import Framework, PluginScores, select_host
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import Code, Status
from shared.framework.types import NodeInfo, PodInfo

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
BASE_PERCENTAGE_OF_NODES_TO_SCORE = 50


class SchedulingError(Exception):
    """A plugin failed with an Error status: the pod goes to backoff."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """kube-scheduler's adaptive sample size: 50% - nodes/125, at least 5% and 100 nodes."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    adaptive = percentage or 0
    if adaptive <= 0:
        adaptive = BASE_PERCENTAGE_OF_NODES_TO_SCORE - num_all_nodes // 125
        adaptive = max(adaptive, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    if adaptive >= 100:
        return num_all_nodes
    return max(num_all_nodes * adaptive // 100, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass
class ScheduleResult:
    suggested_host: str
    evaluated_nodes: int
    feasible_nodes: int
    scores: list[PluginScores] = field(default_factory=list)


class Scheduler:
    """Per-profile scheduling algorithm state: the rotating start index and the RNG."""

    def __init__(
        self,
        framework: Framework,
        *,
        percentage_of_nodes_to_score: int | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.fw = framework
        self.percentage = percentage_of_nodes_to_score
        self.next_start_node_index = 0
        self.rng = rng or random.Random()

    def schedule_pod(
        self, state: CycleState, pod: PodInfo, snapshot: ClusterSnapshot
    ) -> ScheduleResult:
        self.fw.set_snapshot(snapshot)
        all_nodes = snapshot.nodes
        if not all_nodes:
            raise FitError(pod.key, 0, Diagnosis())
        feasible, diagnosis = self.find_nodes_that_fit(state, pod, all_nodes)
        if not feasible:
            raise FitError(pod.key, len(all_nodes), diagnosis)
        evaluated = len(feasible) + len(diagnosis.node_to_status)
        if len(feasible) == 1:
            return ScheduleResult(feasible[0].name, evaluated, 1)
        status = self.fw.run_pre_score_plugins(state, pod, feasible)
        if not status.ok:
            raise SchedulingError(status)
        scores, status = self.fw.run_score_plugins(state, pod, feasible)
        if not status.ok:
            raise SchedulingError(status)
        return ScheduleResult(select_host(scores, self.rng), evaluated, len(feasible), scores)

    def find_nodes_that_fit(
        self, state: CycleState, pod: PodInfo, all_nodes: list[NodeInfo]
    ) -> tuple[list[NodeInfo], Diagnosis]:
        diagnosis = Diagnosis()
        result, status = self.fw.run_pre_filter_plugins(state, pod, all_nodes)
        if not status.ok:
            if status.code == Code.ERROR:
                raise SchedulingError(status)
            # Every node failed the same way: the message is the PreFilter's reason.
            diagnosis.pre_filter_msg = status.message()
            diagnosis.unschedulable_plugins.add(status.plugin)
            for node in all_nodes:
                diagnosis.node_to_status[node.name] = status
            return [], diagnosis
        nodes = all_nodes
        if result is not None and result.node_names is not None:
            nodes = [n for n in all_nodes if n.name in result.node_names]
        return self._filter(state, pod, nodes, diagnosis), diagnosis

    def _filter(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo], diagnosis: Diagnosis
    ) -> list[NodeInfo]:
        want = num_feasible_nodes_to_find(self.percentage, len(nodes))
        feasible: list[NodeInfo] = []
        processed = 0
        start = self.next_start_node_index % len(nodes) if nodes else 0
        for i in range(len(nodes)):
            node = nodes[(start + i) % len(nodes)]
            processed += 1
            status = self.fw.run_filter_plugins(state, pod, node)
            if status.ok:
                feasible.append(node)
                if len(feasible) >= want:
                    break
            elif status.code == Code.ERROR:
                raise SchedulingError(status)
            else:
                diagnosis.node_to_status[node.name] = status
                diagnosis.unschedulable_plugins.add(status.plugin)
        if nodes:
            self.next_start_node_index = (start + processed) % len(nodes)
        return feasible
