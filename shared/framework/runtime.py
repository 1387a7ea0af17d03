"""The framework of one profile: runs each extension point's plugins (framework/runtime)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from shared.config import Profile
from shared.framework.batch import BatchFilterResult, BatchRunner, RawScores
from shared.framework.columns import IntArray, NodeColumns
from shared.framework.cycle_state import CycleState
from shared.framework.handle import Handle
from shared.framework.instrument import (
    FILTER,
    POST_FILTER,
    PRE_ENQUEUE,
    PRE_FILTER,
    PRE_FILTER_EXTENSION_ADD_POD,
    PRE_FILTER_EXTENSION_REMOVE_POD,
    PRE_SCORE,
    SCORE,
    SCORE_EXTENSION_NORMALIZE,
    MetricsRecorder,
    observe_plugin,
    sampled,
    timed,
)
from shared.framework.interface import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    BindPlugin,
    FilterPlugin,
    NodeScore,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
)
from shared.framework.profile import PluginFactory, ProfilePlugins, build_profile
from shared.framework.reserve_bind import ReserveBindRunner
from shared.framework.signature import Signer
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import SUCCESS, Code, Status, plugin_error
from shared.framework.types import NodeInfo, PodInfo


@dataclass
class PluginScores:
    """One node's scores: per plugin (weighted) and in total."""

    name: str
    scores: dict[str, int]
    total: int


class Framework(ReserveBindRunner):
    def __init__(self, plugins: ProfilePlugins, handle: Handle) -> None:
        self.profile_name = plugins.scheduler_name
        self.handle = handle
        self.plugins = plugins
        points = plugins.by_point
        self.queue_sort = cast(QueueSortPlugin, points["queueSort"][0])
        self.pre_enqueue = cast(list[PreEnqueuePlugin], points["preEnqueue"])
        self.pre_filters = cast(list[PreFilterPlugin], points["preFilter"])
        self.filters = cast(list[FilterPlugin], points["filter"])
        self.post_filters = cast(list[PostFilterPlugin], points["postFilter"])
        self.pre_scores = cast(list[PreScorePlugin], points["preScore"])
        self.scores = cast(list[ScorePlugin], points["score"])
        self.reserves = cast(list[ReservePlugin], points["reserve"])
        self.permits = cast(list[PermitPlugin], points["permit"])
        self.pre_binds = cast(list[PreBindPlugin], points["preBind"])
        self.binds = cast(list[BindPlugin], points["bind"])
        self.post_binds = cast(list[PostBindPlugin], points["postBind"])
        self.weights = plugins.weights
        self.filter_names = frozenset(p.name for p in [*self.pre_filters, *self.filters])
        handle.runner = self  # PostFilter plugins run Filter through it
        # Nominated pods counted by arithmetic where only resources decide, in the batch
        # path (tests turn it off to compare with the node-by-node path).
        self.nominated_by_amounts = True
        self.batch = BatchRunner(self)  # Filter and Score over the columns
        # SignPod (KEP-5598): from the plugins of the points whose results a pod may reuse
        self.signer = Signer(
            self.profile_name, [*self.pre_filters, *self.filters, *self.pre_scores, *self.scores]
        )
        # Told how long extension points and (sampled) plugins take; None: nothing timed.
        self.recorder: MetricsRecorder | None = None
        self._rng = random.Random()

    @classmethod
    def from_profile(
        cls,
        profile: Profile,
        registry: Mapping[str, PluginFactory],
        handle: Handle | None = None,
    ) -> Framework:
        """kube's NewFramework: the profile's plugins, built from the registry handed in
        (the framework knows no plugin by name), sharing one Handle."""
        handle = handle or Handle()
        return cls(build_profile(profile, registry, handle), handle)

    @property
    def profile(self) -> str:
        return self.profile_name

    def set_snapshot(self, snapshot: ClusterSnapshot) -> None:
        self.handle.snapshot = snapshot

    def new_cycle_state(self) -> CycleState:
        """A cycle's state, sampled for plugin metrics as kube's scheduleOne samples it."""
        state = CycleState()
        state.record_plugin_metrics = self.recorder is not None and sampled(self._rng)
        return state

    # --- PreEnqueue -----------------------------------------------------------

    @timed(PRE_ENQUEUE)
    def run_pre_enqueue_plugins(self, pod: PodInfo) -> Status:
        """RunPreEnqueuePlugins: the plugins in order until the first that does not
        succeed, whose status names it (the plugin that gates the pod). A rejection
        stays one; anything else, an exception included, is an Error. The queue samples
        plugin metrics per run, there being no cycle yet."""
        rec = self.recorder if self.recorder is not None and sampled(self._rng) else None
        for plugin in self.pre_enqueue:
            start = time.perf_counter() if rec is not None else 0.0
            try:
                status = plugin.pre_enqueue(pod)
            except Exception as err:
                return plugin_error(plugin.name, "PreEnqueue", err)
            if rec is not None:
                observe_plugin(rec, PRE_ENQUEUE, plugin.name, status, start)
            if status.ok:
                continue
            if not status.rejected:
                return Status(Code.ERROR, status.reasons, plugin=plugin.name)
            status.plugin = plugin.name
            return status
        return SUCCESS

    # --- PreFilter / Filter ---------------------------------------------------

    @timed(PRE_FILTER)
    def run_pre_filter_plugins(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        result: PreFilterResult | None = None
        rec = self.plugin_recorder(state)
        for plugin in self.pre_filters:
            start = time.perf_counter() if rec is not None else 0.0
            try:
                r, status = plugin.pre_filter(state, pod, nodes)
            except Exception as err:
                return None, plugin_error(plugin.name, "PreFilter", err)
            if rec is not None:
                observe_plugin(rec, PRE_FILTER, plugin.name, status, start)
            if status.code == Code.SKIP:
                state.skip_filter_plugins.add(plugin.name)
                continue
            if not status.ok:
                status.plugin = plugin.name
                return None, status
            if r is not None:
                result = r.merge(result) if result is not None else r
                if result.node_names is not None and not result.node_names:
                    return result, Status(
                        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                        [f"node(s) didn't satisfy plugin(s) [{plugin.name}] simultaneously"],
                        plugin=plugin.name,
                    )
        return result, SUCCESS

    def run_filter_plugins(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        for plugin in self.filters:
            if plugin.name in state.skip_filter_plugins:
                continue
            status = self.run_filter_plugin(plugin, state, pod, node)
            if not status.ok:
                return status
        return SUCCESS

    def run_filter_plugin(
        self, plugin: FilterPlugin, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> Status:
        """One Filter plugin as run_filter_plugins runs it: a rejection names the plugin;
        an exception or any other failure is an Error."""
        # Run once per node: only an attribute read unless the cycle is sampled.
        start = time.perf_counter() if state.record_plugin_metrics else 0.0
        try:
            status = plugin.filter(state, pod, node)
        except Exception as err:
            return plugin_error(plugin.name, "Filter", err)
        if start and self.recorder is not None:
            observe_plugin(self.recorder, FILTER, plugin.name, status, start)
        if status.ok:
            return status
        status.plugin = plugin.name
        if not status.rejected:
            return Status(Code.ERROR, status.reasons, plugin=plugin.name)
        return status

    def active_filters(self, state: CycleState) -> list[FilterPlugin]:
        """The Filter plugins that run in this cycle (their PreFilter did not Skip), in order."""
        return [p for p in self.filters if p.name not in state.skip_filter_plugins]

    def runs_pre_filter_extensions(self, state: CycleState) -> bool:
        """Whether AddPod/RemovePod reach any plugin in this cycle; if not, they can
        neither fail nor change the cycle state."""
        return any(
            p.name not in state.skip_filter_plugins and p.pre_filter_extensions() is not None
            for p in self.pre_filters
        )

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> Status:
        """RunFilterPluginsWithNominatedPods: with nominated pods of equal or higher
        priority added to the node the pod must fit (those pods will take the room),
        and without them too (affinity to a nominated pod must not be what makes it
        fit: the nominated pod may never come)."""
        added = self._add_nominated_pods(state, pod, node)
        if added is None:
            return self.run_filter_plugins(state, pod, node)
        if isinstance(added, Status):
            return added
        status = self.run_filter_plugins(added[0], pod, added[1])
        if not status.ok:
            return status
        return self.run_filter_plugins(state, pod, node)

    def nominated_pods_for(self, pod: PodInfo, node_name: str) -> list[PodInfo]:
        """The pods nominated to the node that Filter counts there for `pod`: those of
        equal or higher priority, other than `pod` itself — except, when `pod` is
        nominated to this node too, the pods of its own priority it goes before.

        That exception is ksched's, for a state kube's one scheduling loop never
        reaches: two workers preempting at once can nominate two pods of one priority
        to a node with room for one (each dry run ran before it heard of the other's
        nomination). Counted against each other, neither would ever fit there and each
        would wait for the other (seen in PreemptionBasic: 262 preemptors, two or three
        to a node, none bound). So co-nominees of one priority take the room in one
        fixed order (`nomination_order`), the same in every worker and in the cache's
        assume; the one that goes after finds the room taken and preempts again, as it
        would have if it had heard of the first nomination in time."""
        nominated = self.handle.nominated.get(node_name)
        if not nominated:
            return []
        priority, uid = pod.pod.spec.priority, pod.pod.metadata.uid
        co_nominee = pod.pod.status.nominated_node_name == node_name or any(
            p.pod.metadata.uid == uid for p in nominated
        )
        order = nomination_order(pod)
        return [
            p
            for p in nominated
            if p.pod.metadata.uid != uid
            and (
                p.pod.spec.priority > priority
                or (
                    p.pod.spec.priority == priority
                    and not (co_nominee and nomination_order(p) > order)
                )
            )
        ]

    def _add_nominated_pods(
        self, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> tuple[CycleState, NodeInfo] | Status | None:
        """addGENominatedPods: a cloned state and node with the nominated pods of equal or
        higher priority added (PreFilterExtensions.AddPod run for each); None if none."""
        nominated = self.nominated_pods_for(pod, node.name)
        if not nominated:
            return None
        state_out, node_out = state.clone(), node.clone()
        for other in nominated:
            node_out.add_pod(other)
            status = self.run_pre_filter_extension_add_pod(state_out, pod, other, node_out)
            if not status.ok:
                return status
        return state_out, node_out

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node: NodeInfo
    ) -> Status:
        """PreFilterExtensions.AddPod of every PreFilter plugin that ran: `pod_to_add` is
        now on `node` (already added to it), their cycle state follows."""
        return self._run_extensions(state, pod, pod_to_add, node, add=True)

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node: NodeInfo
    ) -> Status:
        """PreFilterExtensions.RemovePod, the inverse (the pod is already off the node)."""
        return self._run_extensions(state, pod, pod_to_remove, node, add=False)

    def _run_extensions(
        self, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo, *, add: bool
    ) -> Status:
        rec = self.plugin_recorder(state)
        point = PRE_FILTER_EXTENSION_ADD_POD if add else PRE_FILTER_EXTENSION_REMOVE_POD
        for plugin in self.pre_filters:
            ext = plugin.pre_filter_extensions()
            if ext is None or plugin.name in state.skip_filter_plugins:
                continue
            start = time.perf_counter() if rec is not None else 0.0
            try:
                if add:
                    status = ext.add_pod(state, pod, other, node)
                else:
                    status = ext.remove_pod(state, pod, other, node)
            except Exception as err:
                return plugin_error(plugin.name, "AddPod" if add else "RemovePod", err)
            if rec is not None:
                observe_plugin(rec, point, plugin.name, status, start)
            if not status.ok:
                return Status(Code.ERROR, status.reasons, plugin=plugin.name)
        return SUCCESS

    @timed(POST_FILTER)
    def run_post_filter_plugins(
        self, state: CycleState, pod: PodInfo, node_to_status: dict[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        """RunPostFilterPlugins: the first success wins; an unresolvable status or an
        error stops; else the rejections' reasons, with the last result that asked to
        change the nomination (a None result leaves it as it is)."""
        reasons: list[str] = []
        kept: PostFilterResult | None = None
        rejector = ""
        rec = self.plugin_recorder(state)
        for plugin in self.post_filters:
            start = time.perf_counter() if rec is not None else 0.0
            try:
                result, status = plugin.post_filter(state, pod, node_to_status)
            except Exception as err:
                return None, plugin_error(plugin.name, "PostFilter", err)
            if rec is not None:
                observe_plugin(rec, POST_FILTER, plugin.name, status, start)
            status.plugin = plugin.name
            if status.ok or status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return result, status
            if status.code != Code.UNSCHEDULABLE:
                return None, Status(Code.ERROR, status.reasons, plugin=plugin.name)
            if result is not None:
                kept = result
            reasons += status.reasons
            rejector = rejector or plugin.name
        return kept, Status(Code.UNSCHEDULABLE, reasons, plugin=rejector)

    # --- PreScore / Score -----------------------------------------------------

    @timed(PRE_SCORE)
    def run_pre_score_plugins(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> Status:
        rec = self.plugin_recorder(state)
        for plugin in self.pre_scores:
            start = time.perf_counter() if rec is not None else 0.0
            try:
                status = plugin.pre_score(state, pod, nodes)
            except Exception as err:
                return plugin_error(plugin.name, "PreScore", err)
            if rec is not None:
                observe_plugin(rec, PRE_SCORE, plugin.name, status, start)
            if status.code == Code.SKIP:
                state.skip_score_plugins.add(plugin.name)
            elif not status.ok:
                status.plugin = plugin.name
                return status
        return SUCCESS

    @timed(SCORE)
    def run_score_plugins(
        self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[list[PluginScores], Status]:
        totals = [PluginScores(n.name, {}, 0) for n in nodes]
        for plugin in self.scores:
            if plugin.name in state.skip_score_plugins:
                continue
            scores, status = self.run_score_plugin(plugin, state, pod, nodes)
            if not status.ok:
                return [], status
            weight = self.weights.get(plugin.name, 1)
            for entry, ns in zip(totals, scores, strict=True):
                entry.scores[plugin.name] = ns.score * weight
                entry.total += ns.score * weight
        return totals, SUCCESS

    def run_score_plugin(
        self, plugin: ScorePlugin, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]
    ) -> tuple[list[NodeScore], Status]:
        """One Score plugin over `nodes` as run_score_plugins runs it: normalized (not
        weighted), each score checked to be in range, a failure naming the plugin."""
        scores = []
        rec = self.plugin_recorder(state)
        try:
            for node in nodes:
                start = time.perf_counter() if rec is not None else 0.0
                value, status = plugin.score(state, pod, node)
                if rec is not None:
                    observe_plugin(rec, SCORE, plugin.name, status, start)
                if not status.ok:
                    status.plugin = plugin.name
                    return [], status
                scores.append(NodeScore(node.name, value))
            ext = plugin.score_extensions()
            if ext is not None:
                start = time.perf_counter() if rec is not None else 0.0
                status = ext.normalize_score(state, pod, scores)
                if rec is not None:
                    observe_plugin(rec, SCORE_EXTENSION_NORMALIZE, plugin.name, status, start)
                if not status.ok:
                    status.plugin = plugin.name
                    return [], status
        except Exception as err:
            return [], plugin_error(plugin.name, "Score", err)
        for ns in scores:
            if not MIN_NODE_SCORE <= ns.score <= MAX_NODE_SCORE:
                return [], plugin_error(
                    plugin.name,
                    "Score",
                    ValueError(f"score {ns.score} of node {ns.name} is out of range"),
                )
        return scores, SUCCESS

    # --- Filter / Score over the columns (the batch path, batch.py) -------------

    def run_filter_plugins_batch(
        self, state: CycleState, pod: PodInfo, nodes: NodeColumns
    ) -> BatchFilterResult | None:
        """Every Filter over every row of the columns at once (batch.py); None when a
        plugin needs the per-node path for this pod."""
        return self.batch.run_filter_plugins(state, pod, nodes)

    def filter_statuses(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeColumns,
        rows: IntArray,
        first_rejecter: IntArray,
    ) -> dict[int, Status]:
        """Statuses of rows the batch rejected, from plugins that give many at once
        (batch.py); rows not covered are left to `filter_status`."""
        return self.batch.filter_statuses(state, pod, nodes, rows, first_rejecter)

    def filter_status(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, first_rejecter: int
    ) -> Status:
        """The per-node status of a node the batch rejected (batch.py)."""
        return self.batch.filter_status(state, pod, node, first_rejecter)

    @timed(SCORE)
    def run_score_plugins_batch(
        self,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeColumns,
        rows: IntArray,
        memo: RawScores | None = None,
    ) -> tuple[IntArray, dict[str, IntArray], Status]:
        """Weighted scores of the nodes at `rows`, the total and each plugin's (batch.py);
        raw scores kept in and taken from `memo` (opportunistic batching)."""
        return self.batch.run_score_plugins(state, pod, nodes, rows, memo)

    def less(self, a: Any, b: Any) -> bool:
        return self.queue_sort.less(a, b)


def select_host(scores: list[PluginScores], rng: random.Random) -> str:
    """Highest total; ties broken uniformly at random."""
    top = max(s.total for s in scores)
    return scores[_pick([i for i, s in enumerate(scores) if s.total == top], rng)].name


def select_row(totals: IntArray, rng: random.Random) -> int:
    """select_host over an array of totals: the position of the chosen one. Both draw the
    same way, so that the batch and per-node paths choose the same node."""
    return _pick(np.flatnonzero(totals == totals.max()).tolist(), rng)


def _pick(ties: list[int], rng: random.Random) -> int:
    # kube-scheduler samples the ties as it goes; one uniform draw over them is the same
    # distribution for one random call instead of one per tie.
    return ties[rng.randrange(len(ties))] if len(ties) > 1 else ties[0]


FrameworkFactory = Callable[[Profile], Framework]


def nomination_order(pod: PodInfo) -> tuple[str, str]:
    """Which of two pods nominated to one node at one priority takes the room first:
    the older (creationTimestamp), then the smaller UID. Stable while both wait, and
    the same wherever it is computed (unlike a stream sequence, which moves with each
    status write)."""
    meta = pod.pod.metadata
    return (str(meta.creation_timestamp or ""), meta.uid)
