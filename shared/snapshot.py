"""A worker's local snapshot of the cache, refreshed incrementally from Redis.

The cache stamps each changed NodeInfo with a new generation; a refresh reads
only the nodes whose generation moved since the last one (the seeds'
headNode/generation idea), in one Redis round trip.
"""

from __future__ import annotations

from importlib.resources import files

import redis.asyncio as aioredis

from shared import keys
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.types import NodeInfo, PodInfo
from shared.wire import unpack

_DELTA_LUA = files("shared.lua").joinpath("snapshot_delta.lua").read_text()


class Snapshot:
    def __init__(self, redis: aioredis.Redis) -> None:
        self._script = redis.register_script(_DELTA_LUA)
        self.nodes: dict[str, NodeInfo] = {}
        self.generation = 0
        self._list: list[NodeInfo] | None = None
        self._cluster: ClusterSnapshot | None = None

    async def refresh(self) -> int:
        """Apply every change since the last refresh; returns how many nodes changed."""
        flat = await self._script(
            keys=[keys.CACHE_GENERATIONS, keys.CACHE_NODEINFO], args=[self.generation]
        )
        for i in range(0, len(flat), 3):
            name = flat[i].decode()
            generation = int(float(flat[i + 1]))
            record = flat[i + 2]
            if record:
                self.nodes[name] = self._decode(name, record)
            else:
                self.nodes.pop(name, None)
            self.generation = max(self.generation, generation)
        if flat:
            self._invalidate()
        return len(flat) // 3

    def _decode(self, name: str, record: bytes | str) -> NodeInfo:
        old = self.nodes.get(name)
        return NodeInfo.from_record(unpack(record), old.pods if old is not None else None)

    def _invalidate(self) -> None:
        self._list = None
        self._cluster = None

    def cluster(self) -> ClusterSnapshot:
        """The plugins' view of this snapshot (rebuilt only after a change)."""
        if self._cluster is None:
            self._cluster = ClusterSnapshot(self.node_list())
            self._cluster.fill_image_states()
        return self._cluster

    def assume(self, pod: PodInfo, node_name: str) -> None:
        """Count `pod` on the node locally, so that later pods of the batch see it."""
        self.nodes[node_name].add_pod(pod)
        if pod.has_affinity:
            self._cluster = None  # the lists of nodes with affinity pods changed

    def forget(self, pod: PodInfo, node_name: str) -> None:
        node = self.nodes.get(node_name)
        if node is not None and node.remove_pod(pod.key) and pod.has_affinity:
            self._cluster = None

    def node_list(self) -> list[NodeInfo]:
        if self._list is None:
            self._list = sorted(self.nodes.values(), key=lambda n: n.name)
        return self._list

    async def reload(self, redis: aioredis.Redis, names: set[str]) -> None:
        """Re-read `names` as committed (a local assumption on them was refused)."""
        ordered = sorted(names)
        records = await redis.hmget(keys.CACHE_NODEINFO, ordered)
        for name, record in zip(ordered, records, strict=True):
            if record:
                self.nodes[name] = self._decode(name, record)
            else:
                self.nodes.pop(name, None)
        self._invalidate()
