"""A worker's local snapshot of the cache, refreshed incrementally from Redis.

The cache stamps each changed NodeInfo with a new generation; a refresh reads
only the nodes whose generation moved since the last one (the seeds'
headNode/generation idea), in one Redis round trip. Generations count within one
incarnation of the cache's state (runtime/watermark.py): when the incarnation
changes (a new leader, a state rebuilt after Redis lost it), the refresh reads
every node instead, and drops those the new state does not have. While Redis holds
no cache state at all, the snapshot stays as it is.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

import redis.asyncio as aioredis

from shared import keys
from shared.framework.columns import NodeColumns
from shared.framework.interface import ClusterObjects
from shared.framework.node_tree import node_tree_order
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.types import NodeInfo, PodInfo
from shared.wire import unpack

# A committed pod shows in its node's record within one refresh; an assumption left
# longer (its pod bound and deleted in between, say) is dropped rather than kept forever.
PENDING_TTL = 10.0

_NOT_YET = float("inf")


@dataclass
class _Pending:
    """A local assumption; `committed_at` is the node generation that holds it at the
    cache, once the cache said so."""

    pod: PodInfo
    node: str
    since: float
    committed_at: float = _NOT_YET
    acked: bool = False  # the cache committed it


_DELTA_LUA = files("shared.lua").joinpath("snapshot_delta.lua").read_text()


class Snapshot:
    """The worker's NodeInfos, their node-tree order, the ClusterSnapshot and the columns
    over it, all kept in step: a changed node replaces its entry in place; adding or
    removing a node (or a node object appearing or vanishing under lingering pods)
    rebuilds the order and the ClusterSnapshot, and reshapes the columns (rows copied)."""

    def __init__(self, redis: aioredis.Redis, objects: ClusterObjects | None = None) -> None:
        self._script = redis.register_script(_DELTA_LUA)
        # What plugins read besides nodes and pods; the owner keeps it current.
        self.objects = objects or ClusterObjects()
        self.nodes: dict[str, NodeInfo] = {}
        self.generation = 0
        self.incarnation = 0  # of the cache's state the generation counts in
        self._list: list[NodeInfo] | None = None
        self._position: dict[str, int] = {}
        self._columns: NodeColumns | None = None
        self._reshape = False  # the columns describe an older set of nodes
        self._cluster: ClusterSnapshot | None = None
        # Pods assumed here and not yet seen in the cache's records: key -> pending. A
        # refresh racing another lane's commit must not drop them.
        self._pending: dict[str, _Pending] = {}
        self._pod_groups: dict[str, dict[str, Any]] = {}
        self._pod_groups_version: bytes | str | None = None
        self._refreshing = asyncio.Lock()
        # How many refreshes found room freed (a pod gone from a node, a node new): a
        # worker compares it across a batch to tell whether a pod it turned away was
        # judged against room the cache had already freed.
        self.freed = 0

    async def pod_groups(self, redis: aioredis.Redis) -> dict[str, dict[str, Any]]:
        """The pod groups the cache tracks ("ns/name" -> record), re-read only when the
        cache changed them."""
        version = await redis.get(keys.CACHE_PODGROUPS_VERSION)
        if version != self._pod_groups_version:
            raw = await redis.hgetall(keys.CACHE_PODGROUPS)
            self._pod_groups = {
                (k.decode() if isinstance(k, bytes) else k): unpack(v) for k, v in raw.items()
            }
            self._pod_groups_version = version
        return self._pod_groups

    async def refresh(self) -> int:
        """Apply every change since the last refresh; returns how many nodes changed.
        One at a time: a lane asking while another lane's refresh is out would read the
        same changes again (at start, every node twice)."""
        async with self._refreshing:
            flat = await self._script(
                keys=[keys.CACHE_GENERATIONS, keys.CACHE_NODEINFO, keys.state_key("cache")],
                args=[self.generation, self.incarnation],
            )
            incarnation = int(flat[0] or 0)
            if not incarnation:
                return 0  # Redis lost the cache's state; it is being written again
            changed = []
            generations = [self.generation]
            for i in range(1, len(flat), 3):
                changed.append((flat[i].decode(), flat[i + 2]))
                generations.append(int(float(flat[i + 1])))
            if incarnation != self.incarnation:
                self._start_over(incarnation, changed)
                generations[0] = 0
            self.generation = max(generations)
            self._apply(changed)
            return len(changed)

    def _start_over(self, incarnation: int, changed: list[tuple[str, bytes | str | None]]) -> None:
        """A new incarnation of the cache's state: `changed` is every node it has; the
        others are gone, and commits acknowledged in an older incarnation are known by
        their pods only (their generations do not compare)."""
        listed = {name for name, _ in changed}
        changed += [(name, None) for name in self.nodes if name not in listed]
        for p in self._pending.values():
            p.committed_at = _NOT_YET
        self.incarnation = incarnation

    async def reload(self, redis: aioredis.Redis, names: set[str]) -> None:
        """Re-read `names` as committed (a local assumption on them was refused)."""
        ordered = sorted(names)
        records = await redis.hmget(keys.CACHE_NODEINFO, ordered)
        self._apply(list(zip(ordered, records, strict=True)))

    def _apply(self, changed: list[tuple[str, bytes | str | None]]) -> None:
        rebuild = False
        freed = False
        replaced = []
        for name, record in changed:
            old = self.nodes.get(name)
            if not record:
                self.nodes.pop(name, None)
                rebuild = rebuild or old is not None
                continue
            info = self._decode(name, record, old)
            self.nodes[name] = info
            if old is None or not old.pods.keys() <= info.pods.keys():
                freed = True
            if (
                old is None
                or (old.raw_node is None) != (info.raw_node is None)
                or old.zone != info.zone  # moves in the node tree
            ):
                rebuild = True
            else:
                replaced.append(info)
        if not changed:
            return
        self.freed += freed
        if rebuild or self._list is None:
            self._list = None
            self._cluster = None
            self._reshape = self._columns is not None  # their rows are reused
        else:
            for info in replaced:
                self._list[self._position[info.name]] = info
                if self._cluster is not None:
                    if not self._cluster.replace_node(info):  # its columns are ours
                        self._cluster = self._columns = None
                elif self._columns is not None:
                    self._columns.replace(info)
        self._reapply_pending({name for name, _ in changed})

    def _reapply_pending(self, changed: set[str]) -> None:
        """A node read from Redis lacks the pods this worker assumed on it but the cache
        has not committed yet (another lane's batch in flight): put them back, so that
        the lane's next pods still see them. A pod the record shows is committed."""
        now = time.monotonic()
        for key, p in list(self._pending.items()):
            info = self.nodes.get(p.node)
            if info is None or now - p.since > PENDING_TTL:
                del self._pending[key]
            elif p.node not in changed:
                continue
            elif key in info.pods or info.generation >= p.committed_at:
                # committed, and the record is at least as new as the commit: whatever
                # it shows now (the pod, or not any more: deleted since) is the truth
                del self._pending[key]
            else:
                self._add_local(p.pod, p.node)

    def _decode(self, name: str, record: bytes | str, old: NodeInfo | None) -> NodeInfo:
        return NodeInfo.from_record(unpack(record), old)

    def node_list(self) -> list[NodeInfo]:
        if self._list is None:
            self._list = node_tree_order(self.nodes.values())
            self._position = {n.name: i for i, n in enumerate(self._list)}
        return self._list

    def cluster(self) -> ClusterSnapshot:
        """The plugins' view of this snapshot (rebuilt only after a change)."""
        if self._cluster is None:
            nodes = self.node_list()
            if self._columns is not None and self._reshape:
                present = [n for n in nodes if n.raw_node is not None]
                self._columns = self._columns.reshaped(present)
            self._reshape = False
            self._cluster = ClusterSnapshot(nodes, self.objects, columns=self._columns)
            self._cluster.fill_image_states()
            self._columns = self._cluster.columns
        return self._cluster

    def assume(self, pod: PodInfo, node_name: str) -> None:
        """Count `pod` on the node locally, so that later pods (of this batch and of the
        other lanes) see it, until the cache's record of the node shows it or `forget`."""
        self._pending[pod.key] = _Pending(pod, node_name, time.monotonic())
        self._add_local(pod, node_name)

    def committed(self, key: str, generation: int | None) -> None:
        """The cache committed the assumption of `key`; its node's record carries it from
        `generation` on (None: a cache that does not say; then the TTL ends it)."""
        p = self._pending.get(key)
        if p is None:
            return
        p.acked = True
        if generation is not None:
            p.committed_at = generation

    def uncommitted(self) -> frozenset[str]:
        """Keys of pods assumed here whose commit to the cache is still out."""
        return frozenset(k for k, p in self._pending.items() if not p.acked)

    def _add_local(self, pod: PodInfo, node_name: str) -> None:
        if self._cluster is not None:
            self._cluster.add_pod(pod, node_name)
            return
        self.nodes[node_name].add_pod(pod)
        if self._columns is not None:
            self._columns.update(node_name)

    def forget(self, pod: PodInfo, node_name: str) -> None:
        """Drop a local assumption the cache refused (or that will not bind)."""
        self._pending.pop(pod.key, None)
        node = self.nodes.get(node_name)
        if node is None or not node.remove_pod(pod.key):
            return
        if self._cluster is not None:
            self._cluster.node_changed(node_name)
        elif self._columns is not None:
            self._columns.update(node_name)
