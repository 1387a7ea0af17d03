"""The snapshot plugins see during a cycle (kube-scheduler's cache.Snapshot / SharedLister)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from shared.framework.columns import NodeColumns
from shared.framework.interface import ClusterObjects
from shared.framework.status import Status
from shared.framework.types import ImageStateSummary, NodeInfo, PodInfo


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
        # Columns of `nodes`, passed in when the caller keeps them up to date across
        # snapshots (the worker), else built on first use.
        if columns is not None and (
            len(columns.infos) != len(self._nodes)
            or any(a is not b for a, b in zip(columns.infos, self._nodes, strict=True))
        ):
            raise ValueError("columns do not describe this snapshot's nodes")
        self._columns = columns
        self.objects = objects or ClusterObjects()
        self._index_affinity_pods()

    def _index_affinity_pods(self) -> None:
        self.have_pods_with_affinity = [n for n in self.node_infos if n.pods_with_affinity]
        self.have_pods_with_required_anti_affinity = [
            n for n in self.node_infos if n.pods_with_required_anti_affinity
        ]

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
        if pod.has_affinity:
            self._index_affinity_pods()

    def node_changed(self, name: str) -> None:
        """A NodeInfo of this snapshot was changed in place: refresh its columns row."""
        if self._columns is not None:
            self._columns.update(name)

    def fill_image_states(self) -> None:
        """Per node: image name -> (size on that node, number of nodes having it)."""
        count: dict[str, int] = {}
        for info in self.nodes:
            for name in _image_names(info):
                count[name] = count.get(name, 0) + 1
        for info in self.nodes:
            info.image_states = {}
            for image in info.node.status.images:
                for name in image.names:
                    info.image_states[name] = ImageStateSummary(image.size_bytes, count[name])


def _image_names(info: NodeInfo) -> set[str]:
    return {name for image in info.node.status.images for name in image.names}


BindFn = Callable[[PodInfo, str], Awaitable[Status]]


class Handle:
    """What a plugin may reach beyond its arguments (kube-scheduler's framework.Handle).

    `snapshot` is the cycle's snapshot (set by the framework before each cycle);
    `bind_pod` writes a binding (set by the binder service; DefaultBinder uses it).
    """

    def __init__(self, snapshot: ClusterSnapshot | None = None) -> None:
        self.snapshot = snapshot or ClusterSnapshot([])
        self.bind_pod: BindFn | None = None
