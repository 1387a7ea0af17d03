"""schedulePod for one profile: find feasible nodes, score them, pick one (pure).

The worker calls it per pod with its snapshot; `ksched simulate` calls it to
explain a decision.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from shared.framework.batch import BatchFilterResult, RawScores
from shared.framework.columns import IntArray, NodeColumns, NodeRows
from shared.framework.cycle_state import CycleState
from shared.framework.diagnosis import Diagnosis, FitError
from shared.framework.interface import PostFilterResult
from shared.framework.opportunistic_batch import POD_FAILED, OpportunisticBatch
from shared.framework.runtime import Framework, select_host, select_row
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


class Scheduler:
    """Per-profile scheduling algorithm state: the rotating start index and the RNG.

    `batch` runs Filter and Score over the snapshot's columns for all nodes at once
    where every plugin involved can (the default plugins can for most pods); the
    per-node path gives the same answers and is kept for the rest, and for tests.
    `opportunistic` (the OpportunisticBatching gate) lets a pod start from the results
    of the previous pod of its signature on that path (opportunistic_batch.py): the
    same decisions, for less work.
    """

    def __init__(
        self,
        framework: Framework,
        *,
        percentage_of_nodes_to_score: int | None = None,
        rng: random.Random | None = None,
        batch: bool = True,
        opportunistic: OpportunisticBatch | None = None,
    ) -> None:
        self.fw = framework
        self.percentage = percentage_of_nodes_to_score
        self.next_start_node_index = 0
        self.rng = rng or random.Random()
        self.batch = batch
        self.opportunistic = opportunistic

    def schedule_pod(
        self, state: CycleState, pod: PodInfo, snapshot: ClusterSnapshot
    ) -> ScheduleResult:
        self.fw.set_snapshot(snapshot)
        all_nodes = snapshot.nodes
        if not all_nodes:
            raise FitError(pod.key, 0, Diagnosis())
        diagnosis = Diagnosis()
        nodes = self._pre_filter(state, pod, all_nodes, diagnosis)
        if nodes and self._fits_nominated_node(state, pod, snapshot):
            # Preemption made room there in an earlier cycle: likely the only node that fits.
            return ScheduleResult(pod.pod.status.nominated_node_name, 1, 1)
        if nodes is all_nodes and self.batch:
            # Every node is a candidate: Filter them all at once if the plugins can.
            result = self._schedule_all(state, pod, snapshot)
            if result is not None:
                return result
        feasible = self._filter(state, pod, nodes, diagnosis) if nodes else []
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
        return ScheduleResult(select_host(scores, self.rng), evaluated, len(feasible))

    def _fits_nominated_node(
        self, state: CycleState, pod: PodInfo, snapshot: ClusterSnapshot
    ) -> bool:
        """evaluateNominatedNode: whether the pod passes Filter on its nominated node."""
        name = pod.pod.status.nominated_node_name
        node = snapshot.get(name) if name else None
        if node is None or node.raw_node is None:
            return False
        status = self.fw.run_filter_plugins_with_nominated_pods(state, pod, node)
        if status.code == Code.ERROR:
            raise SchedulingError(status)
        return status.ok

    def run_post_filter(
        self, state: CycleState, pod: PodInfo, err: FitError
    ) -> PostFilterResult | None:
        """The PostFilter plugins (preemption) for a pod that fits nowhere. Their message
        joins the FitError's; the result says what becomes of the pod's nomination (None:
        it stays as it is)."""
        if not self.fw.post_filters or err.num_all_nodes == 0:
            return None
        result, status = self.fw.run_post_filter_plugins(state, pod, err.diagnosis.node_to_status)
        err.diagnosis.post_filter_msg = status.message()
        return result

    def find_nodes_that_fit(
        self, state: CycleState, pod: PodInfo, all_nodes: list[NodeInfo]
    ) -> tuple[list[NodeInfo], Diagnosis]:
        """PreFilter, then Filter node by node (the per-node path)."""
        diagnosis = Diagnosis()
        nodes = self._pre_filter(state, pod, all_nodes, diagnosis)
        return (self._filter(state, pod, nodes, diagnosis) if nodes else []), diagnosis

    def _pre_filter(
        self, state: CycleState, pod: PodInfo, all_nodes: list[NodeInfo], diagnosis: Diagnosis
    ) -> list[NodeInfo]:
        """The nodes Filter must look at: `all_nodes` itself, fewer if a PreFilter named
        them, none if a PreFilter rejected the pod (recorded in `diagnosis`)."""
        result, status = self.fw.run_pre_filter_plugins(state, pod, all_nodes)
        if not status.ok:
            if status.code == Code.ERROR:
                raise SchedulingError(status)
            # Every node failed the same way: the message is the PreFilter's reason.
            diagnosis.pre_filter_msg = status.message()
            diagnosis.unschedulable_plugins.add(status.plugin)
            for node in all_nodes:
                diagnosis.node_to_status[node.name] = status
            return []
        if result is not None and result.node_names is not None:
            return [n for n in all_nodes if n.name in result.node_names]
        return all_nodes

    # --- the batch path ---------------------------------------------------------------

    def _schedule_all(
        self, state: CycleState, pod: PodInfo, snapshot: ClusterSnapshot
    ) -> ScheduleResult | None:
        """The batch path, from the previous pod's results if it had the same signature
        (GetNodeHint), its own kept for the next pod (StoreScheduleResults); None when
        a plugin needs the per-node path."""
        ob = self.opportunistic
        signature = ob.sign(pod) if ob is not None else None
        reused = ob.reuse(state, pod, snapshot, signature) if ob is not None else None
        batch: BatchFilterResult | None
        raw: RawScores | None
        if reused is not None:
            batch, raw = reused
        else:
            batch = self.fw.run_filter_plugins_batch(state, pod, snapshot.columns)
            raw = RawScores(snapshot.columns.n) if signature is not None else None
        if batch is None:
            return None
        try:
            result = self._schedule_batch(state, pod, snapshot.columns, batch, raw)
        except (FitError, SchedulingError):
            if ob is not None:
                ob.flush(POD_FAILED)
            raise
        if ob is not None:
            ob.store(signature, snapshot, batch, raw)
        return result

    def _schedule_batch(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeColumns,
        batch: BatchFilterResult,
        raw: RawScores | None = None,
    ) -> ScheduleResult:
        rows, processed = self._sample(batch, nodes.n)
        if len(rows) == 0:
            raise FitError(pod.key, nodes.n, self._diagnose(state, pod, nodes, batch))
        if len(rows) == 1:
            return ScheduleResult(nodes.infos[int(rows[0])].name, processed, 1)
        status = self.fw.run_pre_score_plugins(state, pod, NodeRows(nodes, rows))
        if not status.ok:
            raise SchedulingError(status)
        totals, _, status = self.fw.run_score_plugins_batch(state, pod, nodes, rows, raw)
        if not status.ok:
            raise SchedulingError(status)
        host = nodes.infos[int(rows[select_row(totals, self.rng)])].name
        return ScheduleResult(host, processed, len(rows))

    def _sample(self, batch: BatchFilterResult, n: int) -> tuple[IntArray, int]:
        """The feasible rows the per-node search would find: from the rotating start
        index, up to numFeasibleNodesToFind; and how many nodes that search processed."""
        want = num_feasible_nodes_to_find(self.percentage, n)
        start = self.next_start_node_index % n
        feasible = np.flatnonzero(batch.feasible)
        k = int(np.searchsorted(feasible, start))  # the first feasible row from start on
        if len(feasible) < want:
            rows, processed = np.concatenate((feasible[k:], feasible[:k])), n
        else:
            after = len(feasible) - k
            rows = (
                feasible[k : k + want]
                if after >= want
                else np.concatenate((feasible[k:], feasible[: want - after]))
            )
            processed = (int(rows[-1]) - start) % n + 1  # up to the want-th feasible row
        self.next_start_node_index = (start + processed) % n
        return rows, processed

    def _diagnose(
        self, state: CycleState, pod: PodInfo, nodes: NodeColumns, batch: BatchFilterResult
    ) -> Diagnosis:
        """Every node was rejected: the per-node statuses the FitError message needs."""
        diagnosis = Diagnosis()
        rejected = np.flatnonzero(~batch.feasible)
        known = self.fw.filter_statuses(state, pod, nodes, rejected, batch.first_rejecter)
        for row in rejected.tolist():
            info = nodes.infos[row]
            if row in batch.statuses:
                status = batch.statuses[row]
            elif row in known:
                status = known[row]
            else:
                status = self.fw.filter_status(state, pod, info, int(batch.first_rejecter[row]))
            if status.code == Code.ERROR:
                raise SchedulingError(status)
            diagnosis.node_to_status[info.name] = status
            diagnosis.unschedulable_plugins.add(status.plugin)
        return diagnosis

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
            status = self.fw.run_filter_plugins_with_nominated_pods(state, pod, node)
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
