"""The snapshot plugins see during a cycle (kube-scheduler's cache.Snapshot / SharedLister)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from shared.framework.columns import NodeColumns
from shared.framework.interface import ClusterObjects, FilterPlugin
from shared.framework.status import Status
from shared.framework.types import ImageStateSummary, NodeInfo, PodInfo
from shared.framework.waiting_pods import PermitSignal

if TYPE_CHECKING:
    from shared.api.pdb import PodDisruptionBudget
    from shared.framework.cycle_state import CycleState


CHANGE_LOG_MAX = 100_000


class ClusterSnapshot:
    """All NodeInfos of one cycle, plus lists plugins scan often."""

    def __init__(
        self,
        node_infos: Iterable[NodeInfo],
        objects: ClusterObjects | None = None,
        columns: NodeColumns | None = None,
    ) -> None:
        self.node_infos: list[NodeInfo] = list(node_infos)
        self.by_name = {n.name: n for n in self.node_infos}
        self._nodes = [n for n in self.node_infos if n.raw_node is not None]
        self._positions = {n.name: i for i, n in enumerate(self.node_infos)}
        self._node_positions = {n.name: i for i, n in enumerate(self._nodes)}
        self._images_filled = False
        # Columns of `nodes`, passed in when the caller keeps them up to date across
        # snapshots (the worker), else built on first use.
        if columns is not None and (
            len(columns.infos) != len(self._nodes)
            or any(a is not b for a, b in zip(columns.infos, self._nodes, strict=True))
        ):
            raise ValueError("columns do not describe this snapshot's nodes")
        self._columns = columns
        self.objects = objects or ClusterObjects()
        # Nodes holding pods with (anti-)affinity, by name, kept up to date per node.
        self._with_affinity: dict[str, NodeInfo] = {}
        self._with_anti_affinity: dict[str, NodeInfo] = {}
        # Names of the nodes changed in place, in order, for plugins that keep their own
        # per-node indexes up to date (`changes_since`); trimmed now and then.
        self._change_log: list[str] = []
        self._log_start = 0  # position (since this snapshot was built) of _change_log[0]
        for info in self.node_infos:
            if info.affinity_pods:  # most nodes hold none: skip the call
                self._index_affinity_pods(info)

    def _index_affinity_pods(self, info: NodeInfo) -> None:
        for index, holds in (
            (self._with_affinity, info.affinity_pods),
            (self._with_anti_affinity, info.anti_affinity_pods),
        ):
            if holds:
                index[info.name] = info
            else:
                index.pop(info.name, None)

    @property
    def have_pods_with_affinity(self) -> list[NodeInfo]:
        return list(self._with_affinity.values())

    @property
    def have_pods_with_required_anti_affinity(self) -> list[NodeInfo]:
        return list(self._with_anti_affinity.values())

    @property
    def has_pods_with_required_anti_affinity(self) -> bool:
        return bool(self._with_anti_affinity)

    def get(self, name: str) -> NodeInfo | None:
        return self.by_name.get(name)

    @property
    def nodes(self) -> list[NodeInfo]:
        """NodeInfos that have a node (a removed node's pods may linger without one)."""
        return self._nodes

    @property
    def columns(self) -> NodeColumns:
        if self._columns is None:
            self._columns = NodeColumns(self._nodes)
        return self._columns

    @property
    def built_columns(self) -> NodeColumns | None:
        """The columns if something already built them: a plugin may use them to speed
        up a PreFilter, but a one-off check (the cache's validation) must not pay for them."""
        return self._columns

    def add_pod(self, pod: PodInfo, node_name: str) -> None:
        """Count `pod` on a node of this snapshot (a later pod of the batch sees it)."""
        self.by_name[node_name].add_pod(pod)
        self.node_changed(node_name)

    @property
    def log_position(self) -> int:
        """The change log's position now: changes_since(it) will list what comes next."""
        return self._log_start + len(self._change_log)

    def changes_since(self, position: int) -> tuple[list[str], int] | None:
        """The nodes changed since `position` of the change log and the log's position
        now; None when those changes were trimmed away (the caller starts over)."""
        if position < self._log_start:
            return None
        end = self._log_start + len(self._change_log)
        return self._change_log[position - self._log_start :], end

    def _log_change(self, name: str) -> None:
        if len(self._change_log) >= CHANGE_LOG_MAX:
            self._log_start += len(self._change_log)
            self._change_log = []
        self._change_log.append(name)

    def node_changed(self, name: str) -> None:
        """A NodeInfo of this snapshot was changed in place (its pods, or a new version
        of a node that stays a node): refresh what the snapshot derives from it."""
        info = self.by_name.get(name)
        if info is None:
            return
        self._log_change(name)
        self._index_affinity_pods(info)
        if self._columns is not None:
            self._columns.update(name)

    def replace_node(self, info: NodeInfo) -> bool:
        """Put a new NodeInfo object in place of the one of the same name; False (and
        nothing changed) when the set of nodes would change: rebuild instead."""
        old = self.by_name.get(info.name)
        if old is None or (old.raw_node is None) != (info.raw_node is None):
            return False
        self.node_infos[self._positions[info.name]] = info
        if info.raw_node is not None:
            self._nodes[self._node_positions[info.name]] = info
        self.by_name[info.name] = info
        if old.raw_node is info.raw_node or old.image_sizes == info.image_sizes:
            info.image_states = old.image_states
        elif self._images_filled:
            self.fill_image_states()  # an image appeared or went: counts across nodes move
        self._log_change(info.name)
        self._index_affinity_pods(info)
        if self._columns is not None:
            self._columns.replace(info)
        return True

    def fill_image_states(self) -> None:
        """Per node: image name -> (size on that node, number of nodes having it)."""
        self._images_filled = True
        sizes = [info.image_sizes for info in self.nodes]
        count = Counter(name for per_node in sizes for name in per_node)
        for info, per_node in zip(self.nodes, sizes, strict=True):
            info.image_states = (
                {name: ImageStateSummary(size, count[name]) for name, size in per_node.items()}
                if per_node
                else {}
            )


BindFn = Callable[[PodInfo, str], Awaitable[Status]]


class FilterRunner(Protocol):
    """What the framework lets a PostFilter plugin run (part of kube's framework.Handle)."""

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> Status: ...

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node: NodeInfo
    ) -> Status: ...

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node: NodeInfo
    ) -> Status: ...

    def run_filter_plugin(
        self, plugin: FilterPlugin, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> Status: ...

    def active_filters(self, state: CycleState) -> list[FilterPlugin]: ...

    def runs_pre_filter_extensions(self, state: CycleState) -> bool: ...

    def nominated_pods_for(self, pod: PodInfo, node_name: str) -> list[PodInfo]: ...


class Handle:
    """What a plugin may reach beyond its arguments (kube-scheduler's framework.Handle).

    `snapshot` is the cycle's snapshot (set by the framework before each cycle);
    `bind_pod` writes a binding (set by the binder service; DefaultBinder uses it);
    `nominated` holds the pods nominated to each node (kube's PodNominator, fed by
    the queue), which Filter counts as if they were there. For preemption:
    `runner` is the profile's framework (set by it), `pdbs` the PodDisruptionBudgets
    (kept by the worker), and `terminating` the pods this process deleted as victims
    that its snapshot still shows (pod key -> node), kube's terminating pods.
    `pod_groups` holds the
    PodGroups the cache tracks ("ns/name" -> record, see shared/podgroups.py), and
    `uncommitted` the keys of pods the snapshot shows that are assumed only locally (by
    another lane, its commit to the cache still out): Permit counts what the cache holds.

    Plugins reach pods waiting at Permit, which may wait in any binder, through
    `allow_waiting_pods` / `reject_waiting_pods`: the signals collect here and the
    service that runs the plugin ships them (kube's IterateOverWaitingPods).
    """

    def __init__(self, snapshot: ClusterSnapshot | None = None) -> None:
        self.snapshot = snapshot or ClusterSnapshot([])
        self.bind_pod: BindFn | None = None
        self.nominated: dict[str, list[PodInfo]] = {}
        self.runner: FilterRunner | None = None
        self.pdbs: list[PodDisruptionBudget] = []
        self.terminating: dict[str, str] = {}
        self.pod_groups: dict[str, dict[str, Any]] = {}
        self.uncommitted: frozenset[str] = frozenset()
        self.permit_signals: list[PermitSignal] = []

    def allow_waiting_pods(self, plugin: str, namespace: str, selector: dict[str, str]) -> None:
        self.permit_signals.append(
            PermitSignal("allow", plugin, namespace, tuple(sorted(selector.items())))
        )

    def reject_waiting_pods(
        self, plugin: str, namespace: str, selector: dict[str, str], message: str
    ) -> None:
        self.permit_signals.append(
            PermitSignal("reject", plugin, namespace, tuple(sorted(selector.items())), message)
        )

    def take_permit_signals(self) -> list[PermitSignal]:
        signals, self.permit_signals = self.permit_signals, []
        return signals
