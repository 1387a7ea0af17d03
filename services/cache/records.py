"""The NodeInfo records the cache writes to Redis (NodeInfo.to_record, packed: what
workers read), assembled from parts kept packed rather than packed whole each time.

A node's record lists every pod on it; it is written again whenever a pod is assumed
there, bound or gone, so packing it whole made each assume cost in proportion to the
pods already on the node. Here each pod's entry ([key, version, packed slim pod]) is
packed once per PodInfo and the node object once per object, and a record is their
concatenation under the record's map: byte for byte what packing to_record() gives.
"""

from __future__ import annotations

from typing import Any

import msgpack

from shared.framework.types import NodeInfo, PodInfo
from shared.wire import pack

_HEAD = msgpack.Packer(use_bin_type=True).pack_map_header(4)
_NAME, _NODE, _GENERATION, _PODS = (pack(k) for k in ("name", "node", "generation", "pods"))


class NodeRecords:
    """Packed node objects and pod entries, for the nodes and pods the cache holds."""

    def __init__(self) -> None:
        self._pods: dict[str, tuple[PodInfo, bytes]] = {}  # pod key -> (PodInfo, entry)
        self._nodes: dict[str, tuple[dict[str, Any] | None, bytes]] = {}
        self._packer = msgpack.Packer(use_bin_type=True)

    def record(self, info: NodeInfo) -> bytes:
        """pack(info.to_record())."""
        entries = [self._entry(key, pod) for key, pod in info.pods.items()]
        return b"".join(
            (
                _HEAD,
                _NAME,
                pack(info.name),
                _NODE,
                self.node(info),
                _GENERATION,
                pack(info.generation),
                _PODS,
                self._packer.pack_array_header(len(entries)),
                *entries,
            )
        )

    def node(self, info: NodeInfo) -> bytes:
        """The node object packed, once per object."""
        known = self._nodes.get(info.name)
        if known is None or known[0] is not info.raw_node:
            known = self._nodes[info.name] = (info.raw_node, pack(info.raw_node))
        return known[1]

    def _entry(self, key: str, pod: PodInfo) -> bytes:
        known = self._pods.get(key)
        if known is None or known[0] is not pod:
            known = self._pods[key] = (pod, pack([pod.key, pod.version, pod.slim_bytes]))
        return known[1]

    def forget_pod(self, key: str) -> None:
        self._pods.pop(key, None)

    def forget_node(self, name: str) -> None:
        self._nodes.pop(name, None)

    def clear(self) -> None:
        self._pods.clear()
        self._nodes.clear()
