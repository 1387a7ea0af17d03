"""The snapshot plugins see during a cycle (kube-scheduler's cache.Snapshot / SharedLister)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from shared.framework.columns import NodeColumns
from shared.framework.interface import ClusterObjects
from shared.framework.types import ImageStateSummary, NodeInfo, PodInfo

if TYPE_CHECKING:
    pass


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
    def affinity_node_names(self) -> frozenset[str]:
        """Nodes holding pods with (anti-)affinity terms: a change of their pods may move
        other nodes' verdicts (opportunistic batching re-checks everything then)."""
        if not self._with_affinity and not self._with_anti_affinity:
            return frozenset()
        return frozenset(self._with_affinity) | frozenset(self._with_anti_affinity)

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

    def node_changed(self, name: str, *, columns: bool = True) -> None:
        """A NodeInfo of this snapshot was changed in place (its pods, or a new version
        of a node that stays a node): refresh what the snapshot derives from it.
        `columns=False`: all but its columns row, which the caller refreshes later with
        `columns_changed` (for many nodes at once), before anything reads the columns."""
        info = self.by_name.get(name)
        if info is None:
            return
        self._log_change(name)
        self._index_affinity_pods(info)
        if columns and self._columns is not None:
            self._columns.update(name)

    def columns_changed(self, names: Iterable[str]) -> None:
        """The columns rows of nodes changed with `node_changed(..., columns=False)`:
        one write per column for all of them."""
        if self._columns is not None:
            self._columns.update_pods(names)

    def pods_changed(self, touched: dict[str, bool]) -> None:
        """NodeInfos whose pods a refresh changed in place (name -> whether what they
        count moved; False: only pods' versions did, a binding seen, and nothing the
        snapshot derives from their sums changed: only the change log records them)."""
        moved = []
        for name, counted in touched.items():
            info = self.by_name.get(name)
            if info is None:
                continue
            self._log_change(name)
            if counted:
                self._index_affinity_pods(info)
                moved.append(name)
        if moved and self._columns is not None:
            self._columns.update_pods(moved)

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
