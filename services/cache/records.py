"""The NodeInfo records the cache writes to Redis (NodeInfo.to_record, packed: what
workers read), assembled from parts kept packed rather than packed whole each time.

A node's record lists every pod on it; it is written again whenever a pod is assumed
there, bound or gone, so packing it whole made each assume cost in proportion to the
pods already on the node. Here each pod's entry ([key, version, packed slim pod]) is
packed once per PodInfo and the node object once per object, and a record is their
concatenation under the record's map: byte for byte what packing to_record() gives.
A pod assumed on a node comes last in its pods, so a record only appends its entry
to the node's last one; any other change lists the node's entries again.
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
        # node name -> its pods as last written and their entries joined: a pod assumed
        # on a node comes last in its dict, so the next record only appends its entry
        self._lists: dict[str, tuple[list[PodInfo], bytes]] = {}
        self._packer = msgpack.Packer(use_bin_type=True)

    def record(self, info: NodeInfo) -> bytes:
        """pack(info.to_record())."""
        pods = [*info.pods.values()]
        known, joined = self._lists.get(info.name, ((), b""))
        if pods[: len(known)] != known:  # compared by identity: PodInfo has no __eq__
            known, joined = [], b""
        if len(pods) > len(known):
            joined += b"".join([self._entry(pod) for pod in pods[len(known) :]])
        self._lists[info.name] = (pods, joined)
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
                self._packer.pack_array_header(len(pods)),
                joined,
            )
        )

    def node(self, info: NodeInfo) -> bytes:
        """The node object packed, once per object."""
        known = self._nodes.get(info.name)
        if known is None or known[0] is not info.raw_node:
            known = self._nodes[info.name] = (info.raw_node, pack(info.raw_node))
        return known[1]

    def _entry(self, pod: PodInfo) -> bytes:
        key = pod.key
        known = self._pods.get(key)
        if known is None or known[0] is not pod:
            known = self._pods[key] = (pod, pack([key, pod.version, pod.slim_bytes]))
        return known[1]

    def forget_pod(self, key: str) -> None:
        self._pods.pop(key, None)

    def forget_node(self, name: str) -> None:
        self._nodes.pop(name, None)
        self._lists.pop(name, None)

    def clear(self) -> None:
        self._pods.clear()
        self._nodes.clear()
        self._lists.clear()
