"""The batch path of a framework: its Filter and Score plugins run over the snapshot's
columns (NodeColumns) at once, through the plugins' batch forms (filter_all, score_all,
normalize_all, filter_statuses). Any plugin may answer None for a pod; the per-node
path (runtime.py) is then used, and it stays the reference: both give the same result
(tests/unit/test_batch_paths.py).

In a cycle sampled for plugin metrics, a plugin's batch form is recorded as one call at
its extension point (Filter, Score, ScoreExtensionNormalize) that covers every node,
where the per-node path records one call per node."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np

from shared.framework.columns import BoolArray, IntArray, NodeColumns
from shared.framework.cycle_state import CycleState
from shared.framework.instrument import FILTER, SCORE, SCORE_EXTENSION_NORMALIZE, observe_plugin
from shared.framework.interface import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    BatchFilterPlugin,
    BatchScorePlugin,
    FilterPlugin,
    ScorePlugin,
)
from shared.framework.resource_dry_run import ResourceDryRun
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import NodeInfo, PodInfo

if TYPE_CHECKING:
    from shared.framework.runtime import Framework


@dataclass
class BatchFilterResult:
    """Filter over all rows of the columns: who passes, and for the others the index
    (into Framework.filters) of the first plugin that rejected them."""

    feasible: BoolArray
    first_rejecter: IntArray  # -1 where feasible or decided with nominated pods
    # Rows with nominated pods, filtered node by node: their status.
    statuses: dict[int, Status] = field(default_factory=dict)


FEW_ROWS = 16  # up to this many rows to score, node by node is cheaper


class RawScores:
    """Raw scores (before NormalizeScore and weights) per Score plugin and row, kept from
    one pod to the next of the same signature (opportunistic_batch.py): a row's raw score
    reads only its node and the pod, so it stands until that node changes."""

    def __init__(self, n: int) -> None:
        self.n = n
        self._scores: dict[str, tuple[IntArray, BoolArray]] = {}

    def get(
        self,
        name: str,
        rows: IntArray,
        score_all: Callable[[IntArray], IntArray | None],
        score: Callable[[int], int | None],
    ) -> IntArray | None:
        """The raw scores of `rows`, asking only for the rows not known yet: node by node
        if they are few (a plugin's score_all costs about the same for one row as for
        all), else at once. None if a plugin could not say."""
        known = self._scores.get(name)
        if known is None:
            known = self._scores[name] = (
                np.zeros(self.n, dtype=np.int64),
                np.zeros(self.n, dtype=np.bool_),
            )
        values, have = known
        need = rows[~have[rows]]
        if len(need):
            got = self._ask(need, score_all, score)
            if got is None:
                return None
            values[need] = got
            have[need] = True
        return values[rows]

    @staticmethod
    def _ask(
        need: IntArray,
        score_all: Callable[[IntArray], IntArray | None],
        score: Callable[[int], int | None],
    ) -> IntArray | None:
        if len(need) > FEW_ROWS:
            return score_all(need)
        got = [score(row) for row in need.tolist()]
        return None if None in got else np.array(got, dtype=np.int64)

    def forget(self, rows: IntArray) -> None:
        """Rows whose node changed: scored again when next asked."""
        for _, have in self._scores.values():
            have[rows] = False


class BatchRunner:
    """Runs one framework's Filter and Score plugins over the columns."""

    def __init__(self, fw: Framework) -> None:
        self.fw = fw
        # Which plugins have the batch forms (checked once: isinstance on a Protocol is slow).
        self.batch_filter = [isinstance(p, BatchFilterPlugin) for p in fw.filters]
        self.batch_score = [isinstance(p, BatchScorePlugin) for p in fw.scores]

    def run_filter_plugins(
        self, state: CycleState, pod: PodInfo, nodes: NodeColumns
    ) -> BatchFilterResult | None:
        """Every Filter over every row at once; None when a plugin needs the per-node path
        for this pod (or fails: the per-node path then reports its error)."""
        feasible = nodes.everyone.copy()
        first = np.full(nodes.n, -1, dtype=np.int64)
        everyone = nodes.everyone
        for k, plugin in enumerate(self.fw.filters):
            if plugin.name in state.skip_filter_plugins:
                continue
            if not self.batch_filter[k]:
                return None
            mask = self._filter_all(cast(BatchFilterPlugin, plugin), state, pod, nodes)
            if mask is None:
                return None
            if mask is everyone:  # rejects no node
                continue
            rejected = feasible & ~mask
            if rejected.any():
                first[rejected] = k
                feasible &= mask
        return self._with_nominated_pods(state, pod, nodes, BatchFilterResult(feasible, first))

    def _filter_all(
        self, plugin: BatchFilterPlugin, state: CycleState, pod: PodInfo, nodes: NodeColumns
    ) -> BoolArray | None:
        """One plugin's mask over every row (None: use the per-node path), timed in a
        sampled cycle as one Filter call that succeeded (the rows it rejects are not
        its status)."""
        rec = self.fw.plugin_recorder(state)
        start = time.perf_counter() if rec is not None else 0.0
        try:
            mask = plugin.filter_all(state, pod, nodes)
        except Exception:
            return None
        if mask is not None and rec is not None:
            observe_plugin(rec, FILTER, cast(FilterPlugin, plugin).name, None, start)
        return mask

    def _with_nominated_pods(
        self, state: CycleState, pod: PodInfo, nodes: NodeColumns, result: BatchFilterResult
    ) -> BatchFilterResult | None:
        """The rows of nodes with nominated pods, filtered again with those pods added
        (RunFilterPluginsWithNominatedPods); None if one of them errs."""
        feasible, first = result.feasible, result.first_rejecter
        rows = [
            (row, nominated)
            for name in self.fw.handle.nominated
            if (row := nodes.index.get(name)) is not None
            and (nominated := self.fw.nominated_pods_for(pod, name))
        ]
        by_amounts = self._nominated_by_amounts(state, pod) if rows else None
        for row, nominated in rows:
            info = nodes.infos[row]
            status = (
                by_amounts(info, int(first[row]), nominated) if by_amounts is not None else None
            )
            if status is None:
                status = self.fw.run_filter_plugins_with_nominated_pods(state, pod, info)
                if status.code == Code.ERROR:
                    return None  # the per-node path reports it if it gets to this node
            elif status.ok:
                continue  # the nominated pods change nothing: the batch verdict stands
            feasible[row] = status.ok
            first[row] = -1
            result.statuses[row] = status
        return result

    def _nominated_by_amounts(
        self, state: CycleState, pod: PodInfo
    ) -> Callable[[NodeInfo, int, list[PodInfo]], Status | None] | None:
        """RunFilterPluginsWithNominatedPods by arithmetic, for a cycle whose Filter
        plugins read no pods except NodeResourcesFit (preemption's ResourceDryRun plan):
        the node-only plugins decide as in the batch, so only NodeResourcesFit with the
        nominated pods' amounts added can change a row. For a node it gives that
        rejection, SUCCESS where the batch verdict stands, or None (run it node by node).
        Without this, every node with a nominated pod ran the filters twice per cycle."""
        if not self.fw.nominated_by_amounts:
            return None
        plan = ResourceDryRun.plan(self.fw, self.fw.handle.snapshot, state, pod)
        if plan is None:
            return None
        fit_index = self.fw.filters.index(plan.fit)

        def status_of(info: NodeInfo, rejecter: int, nominated: list[PodInfo]) -> Status | None:
            if 0 <= rejecter < fit_index:
                return SUCCESS  # a node-only plugin before NodeResourcesFit rejects it anyway
            node = plan.node(info, nominated)
            return None if node is None else node.fit_status()

        return status_of

    def filter_statuses(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeColumns,
        rows: IntArray,
        first_rejecter: IntArray,
    ) -> dict[int, Status]:
        """Statuses of rejected rows from the plugins that can give them for many nodes at
        once (`filter_statuses`), grouped by the plugin that rejected each row; rows not
        covered are left to `filter_status`."""
        found: dict[int, Status] = {}
        rejecters = first_rejecter[rows]
        for k in np.unique(rejecters).tolist():
            plugin = self.fw.filters[k] if k >= 0 else None
            batch = getattr(plugin, "filter_statuses", None)
            if batch is None:
                continue
            group = rows[rejecters == k]
            try:
                statuses = batch(state, pod, nodes, group)
            except Exception:
                statuses = None
            if statuses is not None:
                found.update(zip(group.tolist(), statuses, strict=True))
        return found

    def filter_status(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, first_rejecter: int
    ) -> Status:
        """The per-node status of a node the batch rejected: what `run_filter_plugins` gives,
        found by asking only the plugin that rejected it (those before it passed)."""
        plugin = self.fw.filters[first_rejecter]
        try:
            status = plugin.filter(state, pod, node)
        except Exception:
            status = SUCCESS
        if status.ok:  # the two paths disagree: trust the whole per-node run
            return self.fw.run_filter_plugins(state, pod, node)
        status.plugin = plugin.name
        if not status.rejected:
            return Status(Code.ERROR, status.reasons, plugin=plugin.name)
        return status

    def run_score_plugins(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeColumns,
        rows: IntArray,
        memo: RawScores | None = None,
    ) -> tuple[IntArray, dict[str, IntArray], Status]:
        """Weighted scores of the nodes at `rows`: the total and each plugin's. Plugins with
        the batch form score all rows at once (their raw scores kept in `memo`, if given,
        and taken from it), the others node by node."""
        totals = np.zeros(len(rows), dtype=np.int64)
        per_plugin: dict[str, IntArray] = {}
        infos: list[NodeInfo] | None = None
        for k, plugin in enumerate(self.fw.scores):
            if plugin.name in state.skip_score_plugins:
                continue
            scores: IntArray | None = None
            if self.batch_score[k]:
                scores, status = self._score_batch(
                    cast(BatchScorePlugin, plugin), state, pod, nodes, rows, memo
                )
                if not status.ok:
                    return totals, {}, status
            if scores is None:
                if infos is None:
                    infos = [nodes.infos[r] for r in rows.tolist()]
                listed, status = self.fw.run_score_plugin(plugin, state, pod, infos)
                if not status.ok:
                    return totals, {}, status
                scores = np.fromiter((ns.score for ns in listed), np.int64, count=len(listed))
            weight = self.fw.weights.get(plugin.name, 1)
            weighted = scores * weight if weight != 1 else scores
            per_plugin[plugin.name] = weighted
            totals += weighted
        return totals, per_plugin, SUCCESS

    def _score_batch(
        self,
        plugin: BatchScorePlugin,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeColumns,
        rows: IntArray,
        memo: RawScores | None = None,
    ) -> tuple[IntArray | None, Status]:
        rec = self.fw.plugin_recorder(state)
        name = cast(ScorePlugin, plugin).name
        try:
            start = time.perf_counter() if rec is not None else 0.0
            if memo is None:
                scores = plugin.score_all(state, pod, nodes, rows)
            else:
                scores = memo.get(
                    name,
                    rows,
                    lambda r: plugin.score_all(state, pod, nodes, r),
                    lambda row: _raw_score(cast(ScorePlugin, plugin), state, pod, nodes.infos[row]),
                )
            if scores is None:
                return None, SUCCESS
            if rec is not None:
                observe_plugin(rec, SCORE, name, None, start)
            ext = cast(ScorePlugin, plugin).score_extensions()
            if ext is not None:
                normalize_all = getattr(ext, "normalize_all", None)
                if normalize_all is None:
                    return None, SUCCESS
                start = time.perf_counter() if rec is not None else 0.0
                scores = normalize_all(state, pod, scores)
                if rec is not None:
                    observe_plugin(rec, SCORE_EXTENSION_NORMALIZE, name, None, start)
        except Exception:
            return None, SUCCESS  # the per-node path reports the error
        if len(scores) and not _in_score_range(scores):
            return None, SUCCESS
        return scores, SUCCESS


def _raw_score(plugin: ScorePlugin, state: CycleState, pod: PodInfo, node: NodeInfo) -> int | None:
    """One node's raw score by the per-node form (None: not a success; the per-node
    path then reports it)."""
    value, status = plugin.score(state, pod, node)
    return value if status.ok else None


def _in_score_range(scores: IntArray) -> bool:
    if MIN_NODE_SCORE == 0 and scores.dtype == np.int64:
        # negative scores read as unsigned are huge: one reduction instead of two
        return int(scores.view(np.uint64).max()) <= MAX_NODE_SCORE
    return bool(scores.min() >= MIN_NODE_SCORE and scores.max() <= MAX_NODE_SCORE)
