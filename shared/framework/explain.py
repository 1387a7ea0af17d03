"""One scheduling decision explained per node and per plugin (pure), like
kube-scheduler-simulator's annotations: every Filter plugin's verdict on every node
(not only the first rejecter's, as the cycle stops at), and each Score plugin's raw and
normalized score on the feasible nodes.

`ksched simulate` runs it against a file, `ksched describe pod` against the cluster
stream, and the worker's what-if (whatif.py) against its committed snapshot. Where a
plugin has the batch forms (batch.py) it judges all nodes at once and only the nodes it
rejects are asked for their reason, so that 5000 nodes cost a fraction of a second.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from shared.framework.columns import IntArray, NodeColumns, NodeRows
from shared.framework.cycle_state import CycleState
from shared.framework.interface import (
    BatchFilterPlugin,
    BatchScorePlugin,
    FilterPlugin,
    NodeScore,
    ScorePlugin,
)
from shared.framework.runtime import Framework
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import Code, Status
from shared.framework.types import NodeInfo, PodInfo

STATUS_NAMES = {
    Code.SUCCESS: "passed",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.ERROR: "Error",
    Code.SKIP: "skipped",
}
PASSED = "passed"
SKIPPED = "skipped"
NOT_A_CANDIDATE = "not a candidate"
# The pseudo-plugin under which a node's verdict with nominated pods shows, when the
# pods nominated there (equal or higher priority) are what keeps the pod off it.
NOMINATED_PODS = "NominatedPods"


def verdict_of(status: Status) -> str:
    """A Filter status as the report shows it: "passed" or "<Code>: <message>"."""
    if status.ok:
        return PASSED
    return f"{STATUS_NAMES.get(status.code, status.code.name)}: {status.message()}"


@dataclass
class PluginScoreList:
    raw: list[int]
    normalized: list[int]
    weight: int


@dataclass
class Explanation:
    """What `explain` found; `report()` is its JSON form (simulate's `-o json`). Only
    what is not "passed" is kept per node: at 5000 nodes most verdicts are."""

    pod: str
    profile: str
    pre_filter: Status
    nodes: list[str]  # every node, in the snapshot's order
    filters: list[str]  # the Filter plugins that ran, in order
    skipped: list[str] = field(default_factory=list)  # their PreFilter said Skip
    not_candidates: set[str] = field(default_factory=set)  # left out by PreFilter
    failed: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> plugin -> verdict
    # node -> the status the cycle records for it (its first rejecter's): preemption's input
    node_to_status: dict[str, Status] = field(default_factory=dict)
    feasible: list[str] = field(default_factory=list)
    # plugin -> its raw and normalized scores of the feasible nodes (in their order)
    scores: dict[str, PluginScoreList] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)  # feasible node -> weighted sum
    _index: dict[str, int] | None = field(default=None, init=False, repr=False)

    @property
    def best(self) -> list[str]:
        """The feasible nodes with the highest total: selectHost draws among them."""
        if not self.totals:
            return list(self.feasible)
        top = max(self.totals.values())
        return [n for n, t in self.totals.items() if t == top]

    def verdicts(self, node: str) -> dict[str, str]:
        """Every Filter plugin's verdict on `node`, in the order they run."""
        if not self.pre_filter.ok or node in self.not_candidates:
            return {"PreFilter": NOT_A_CANDIDATE}
        failed = self.failed.get(node, {})
        out = {p: SKIPPED if p in self.skipped else failed.get(p, PASSED) for p in self.filters}
        if NOMINATED_PODS in failed:
            out[NOMINATED_PODS] = failed[NOMINATED_PODS]
        return out

    def node_scores(self, node: str) -> dict[str, dict[str, int]]:
        """plugin -> {"raw", "normalized", "weight", "weighted"} on a feasible node."""
        if not self.scores:
            return {}
        i = self._feasible_index()[node]
        return {
            plugin: {
                "raw": s.raw[i],
                "normalized": s.normalized[i],
                "weight": s.weight,
                "weighted": s.normalized[i] * s.weight,
            }
            for plugin, s in self.scores.items()
        }

    def _feasible_index(self) -> dict[str, int]:
        if self._index is None:
            self._index = {n: i for i, n in enumerate(self.feasible)}
        return self._index

    def node_report(self, node: str) -> dict[str, Any]:
        entry: dict[str, Any] = {"filter": self.verdicts(node)}
        if node in self.totals:
            entry["score"] = self.node_scores(node)
            entry["total"] = self.totals[node]
        return entry

    def report(self, chosen: str | None) -> dict[str, Any]:
        pre = self.pre_filter
        return {
            "pod": self.pod,
            "profile": self.profile,
            "preFilter": {
                "status": STATUS_NAMES.get(pre.code, pre.code.name),
                "reasons": pre.reasons,
                "plugin": pre.plugin,
            },
            "nodes": {name: self.node_report(name) for name in self.nodes},
            "chosen": chosen,
        }


def explain(fw: Framework, pod: PodInfo, snapshot: ClusterSnapshot) -> Explanation:
    """PreFilter, then every Filter plugin on every candidate node, then PreScore and
    every Score plugin on the feasible ones. Reads the snapshot only."""
    fw.set_snapshot(snapshot)
    state = CycleState()
    nodes = snapshot.nodes
    result, pre = fw.run_pre_filter_plugins(state, pod, nodes)
    names = [n.name for n in nodes]
    ex = Explanation(pod.key, fw.profile, pre, names, [p.name for p in fw.filters])
    if not pre.ok:
        ex.node_to_status = dict.fromkeys(ex.nodes, pre)
        return ex
    named = result.node_names if result is not None else None
    candidates = nodes
    if named is not None:
        # left out of node_to_status, as the cycle leaves them (not evaluated)
        candidates = [n for n in nodes if n.name in named]
        ex.not_candidates = {n.name for n in nodes if n.name not in named}
    ex.skipped = [p.name for p in fw.filters if p.name in state.skip_filter_plugins]
    _filter(fw, state, pod, snapshot, candidates, ex)
    if ex.feasible:
        _score(fw, state, pod, snapshot, ex)
    return ex


# --- Filter -----------------------------------------------------------------------------


def _filter(
    fw: Framework,
    state: CycleState,
    pod: PodInfo,
    snapshot: ClusterSnapshot,
    candidates: list[NodeInfo],
    ex: Explanation,
) -> None:
    columns = snapshot.columns if len(candidates) == len(snapshot.nodes) else None
    for plugin in fw.filters:
        if plugin.name in state.skip_filter_plugins:
            continue
        passing = _passing_rows(plugin, state, pod, columns)
        asked = (
            candidates
            if passing is None
            else [candidates[i] for i in np.flatnonzero(~passing).tolist()]
        )
        for node in asked:
            status = fw.run_filter_plugin(plugin, state, pod, node)
            if not status.ok:
                ex.failed.setdefault(node.name, {})[plugin.name] = verdict_of(status)
                ex.node_to_status.setdefault(node.name, status)
    for node in candidates:
        if node.name in ex.node_to_status:
            continue
        if fw.nominated_pods_for(pod, node.name):
            # As the cycle runs Filter: with the pods nominated there that come first
            status = fw.run_filter_plugins_with_nominated_pods(state, pod, node)
            if not status.ok:
                ex.failed.setdefault(node.name, {})[NOMINATED_PODS] = verdict_of(status)
                ex.node_to_status[node.name] = status
                continue
        ex.feasible.append(node.name)


def _passing_rows(
    plugin: FilterPlugin, state: CycleState, pod: PodInfo, columns: NodeColumns | None
) -> np.ndarray[Any, np.dtype[np.bool_]] | None:
    """The plugin's verdict on every node at once, where it can give one (the per-node
    path then asks only the nodes it rejects for their reason)."""
    if columns is None or not isinstance(plugin, BatchFilterPlugin):
        return None
    try:
        return cast(BatchFilterPlugin, plugin).filter_all(state, pod, columns)
    except Exception:  # the per-node run reports it
        return None


# --- Score ------------------------------------------------------------------------------


def _score(
    fw: Framework, state: CycleState, pod: PodInfo, snapshot: ClusterSnapshot, ex: Explanation
) -> None:
    columns = snapshot.columns
    rows = np.fromiter((columns.index[n] for n in ex.feasible), np.int64, len(ex.feasible))
    infos = [columns.infos[r] for r in rows.tolist()]
    status = fw.run_pre_score_plugins(state, pod, NodeRows(columns, rows))
    if not status.ok:
        return
    totals = np.zeros(len(rows), dtype=np.int64)
    for plugin in fw.scores:
        if plugin.name in state.skip_score_plugins:
            continue
        found = _scores_batch(plugin, state, pod, columns, rows)
        if found is None:
            found = _scores_per_node(plugin, state, pod, infos)
        if found is None:
            continue  # the plugin failed: the cycle would report its error
        raw, normalized = found
        weight = fw.weights.get(plugin.name, 1)
        ex.scores[plugin.name] = PluginScoreList(raw, normalized, weight)
        totals += np.asarray(normalized, dtype=np.int64) * weight
    ex.totals = dict(zip(ex.feasible, totals.tolist(), strict=True))


def _scores_batch(
    plugin: ScorePlugin, state: CycleState, pod: PodInfo, columns: NodeColumns, rows: IntArray
) -> tuple[list[int], list[int]] | None:
    if not isinstance(plugin, BatchScorePlugin):
        return None
    try:
        raw = cast(BatchScorePlugin, plugin).score_all(state, pod, columns, rows)
        if raw is None:
            return None
        normalized = raw
        ext = plugin.score_extensions()
        if ext is not None:
            normalize_all = getattr(ext, "normalize_all", None)
            if normalize_all is None:
                return None
            normalized = normalize_all(state, pod, raw.copy())
    except Exception:
        return None
    return raw.tolist(), normalized.tolist()


def _scores_per_node(
    plugin: ScorePlugin, state: CycleState, pod: PodInfo, infos: list[NodeInfo]
) -> tuple[list[int], list[int]] | None:
    raw: list[NodeScore] = []
    for node in infos:
        value, status = plugin.score(state, pod, node)
        if not status.ok:
            return None
        raw.append(NodeScore(node.name, value))
    normalized = [NodeScore(s.name, s.score) for s in raw]
    ext = plugin.score_extensions()
    if ext is not None and not ext.normalize_score(state, pod, normalized).ok:
        return None
    return [s.score for s in raw], [s.score for s in normalized]
