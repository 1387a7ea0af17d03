"""The snapshot plugins see during a cycle (kube-scheduler's cache.Snapshot / SharedLister)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from shared.framework.interface import ClusterObjects
from shared.framework.status import Status
from shared.framework.types import ImageStateSummary, NodeInfo, PodInfo


class ClusterSnapshot:
    """All NodeInfos of one cycle, plus lists plugins scan often."""

    def __init__(
        self, node_infos: Iterable[NodeInfo], objects: ClusterObjects | None = None
    ) -> None:
        self.node_infos: list[NodeInfo] = list(node_infos)
        self.by_name = {n.name: n for n in self.node_infos}
        self.objects = objects or ClusterObjects()
        self.have_pods_with_affinity = [n for n in self.node_infos if n.pods_with_affinity]
        self.have_pods_with_required_anti_affinity = [
            n for n in self.node_infos if n.pods_with_required_anti_affinity
        ]

    def get(self, name: str) -> NodeInfo | None:
        return self.by_name.get(name)

    @property
    def nodes(self) -> list[NodeInfo]:
        """NodeInfos that have a node (a removed node's pods may linger without one)."""
        return [n for n in self.node_infos if n.raw_node is not None]

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
