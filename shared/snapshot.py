"""A worker's local snapshot of the cache, refreshed incrementally.

The cache stamps each changed NodeInfo with a new generation; a refresh reads
only the nodes whose generation moved since the last one (the seeds'
headNode/generation idea), in one Redis round trip, or a page of `REFRESH_PAGE` nodes
per round trip when more changed (a worker's first refresh: `_Pages`). Generations
count within one incarnation of the cache's state (runtime/watermark.py): when the
incarnation changes (a new leader, a state rebuilt after Redis lost it), the refresh
reads every node instead, and drops those the new state does not have. While Redis
holds no cache state at all, the snapshot stays as it is.

Most changes come without reading Redis: the cache publishes each write's node
changes once it landed (services/cache/feed.py), the worker hands them to `receive`,
and a refresh first applies those that follow what the snapshot holds (same
incarnation, no write missed in between), then asks Redis for what is still newer,
which is then usually nothing. A missed message, a worker just started, or a node
whose change does not apply to the snapshot's copy of it: Redis has them, and the
same round trip reads them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
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
from shared.wire import text, unpack

# A committed pod shows in its node's record within one refresh; an assumption left
# longer (its pod bound and deleted in between, say) is dropped rather than kept forever.
PENDING_TTL = 10.0

_NOT_YET = float("inf")
# Node-change messages kept between refreshes at most; more (a worker that does not
# refresh) are dropped, and the next refresh reads the changes from Redis instead.
FEED_LIMIT = 10_000
GONE, FULL, DELTA = 0, 1, 2  # the feed's entry kinds (services/cache/feed.py)


@dataclass
class _Pending:
    """A local assumption; `committed_at` is the node generation that holds it at the
    cache, once the cache said so."""

    pod: PodInfo
    node: str
    since: float
    committed_at: float = _NOT_YET
    acked: bool = False  # the cache committed it
    cycle: int = 0  # the attempt's (the queue's) cycle


_DELTA_LUA = files("shared.lua").joinpath("snapshot_delta.lua").read_text()
_DELTA_KEYS = [
    keys.CACHE_GENERATIONS,
    keys.CACHE_NODEINFO,
    keys.state_key("cache"),
    keys.CACHE_GENERATION,
]
# Nodes one call of snapshot_delta reads at most: the script holds Redis (every other
# client waits) while it runs, and a first refresh at 100 000 nodes in one call held it
# past its busy-script limit (docs/scale.md §1). A refresh reading fewer (the steady
# state: a few changed nodes) is one call.
REFRESH_PAGE = 2000


class _Pages:
    """One paged read of snapshot_delta: the arguments of the next call, and what the
    calls so far brought. A node read again (it changed while paging: a later page
    finds it past the cursor) keeps the later record."""

    def __init__(self, generation: int, incarnation: int, stale: list[str]) -> None:
        self._since = generation
        self._held = incarnation
        self._stale = stale
        # Where the next page starts (snapshot_delta.lua): a generation, how many of its
        # nodes were read, how many it had then; "": after `generation`.
        self._cursor: tuple[str, int, int] = ("", 0, 0)
        self.incarnation = 0  # the first page's
        self.generation = 0
        self.changed: dict[str, bytes | str | None] = {}
        self.done = False

    def args(self) -> list[Any]:
        names = self._stale[:REFRESH_PAGE]  # they count in the page
        return [self._since, self._held, REFRESH_PAGE, *self._cursor, *names]

    def take(self, flat: list[Any]) -> bool:
        """Take one call's answer; False when its incarnation is not the first page's."""
        incarnation = int(flat[0])
        if self.incarnation and incarnation != self.incarnation:
            return False
        if incarnation != self._held:
            self._stale = []  # every node is read anyway
        self.incarnation = incarnation
        self.generation = max(self.generation, int(flat[1] or 0))
        names = 0
        for i in range(5, len(flat), 3):
            self.changed[text(flat[i])] = flat[i + 2]
            if flat[i + 1] is None:
                names += 1
            else:
                self.generation = max(self.generation, int(float(flat[i + 1])))
        del self._stale[:names]
        self.done = flat[2] is None and not self._stale
        if flat[2] is not None:
            self._cursor = (text(flat[2]), int(flat[3]), int(flat[4]))
        return True


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
        # The cache's generation through which the snapshot holds every change (each
        # node may be newer: `reload`), and the incarnation of the state it counts in.
        self.generation = 0
        self.incarnation = 0
        self._feed: list[bytes] = []  # node-change messages not applied yet
        self._stale: set[str] = set()  # nodes the feed could not bring: read from Redis
        self._gap = False  # the feed missed a change since the last Redis read
        # Nodes brought by the feed / read from Redis by refreshes (how well it serves).
        self.fed = 0
        self.read = 0
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
            self._pod_groups = {text(k): unpack(v) for k, v in raw.items()}
            self._pod_groups_version = version
        return self._pod_groups

    def receive(self, data: bytes) -> None:
        """A message of the cache's node-change feed (NODE_CHANGES); the next refresh
        applies it."""
        if len(self._feed) >= FEED_LIMIT:
            self._feed.clear()  # the next refresh finds the gap and reads Redis
        self._feed.append(data)

    async def refresh(self) -> int:
        """Apply every change since the last refresh; returns how many nodes changed.
        One at a time: a lane asking while another lane's refresh is out would read the
        same changes again (at start, every node twice)."""
        async with self._refreshing:
            # Messages read off the socket but not handed to `receive` yet go through
            # one turn of the loop first: without it, a change read from Redis here
            # arrives by the feed a moment later, and is dropped there.
            await asyncio.sleep(0)
            fed = self.apply_feed()
            read = await self._read_changes()
            if read is None:
                return fed  # Redis lost the cache's state; it is being written again
            incarnation, generation, changed = read
            self._gap = False
            if incarnation != self.incarnation:
                self._start_over(incarnation, changed)
                self.generation = 0
            self.generation = max(self.generation, generation)
            self._stale.clear()
            self.read += len(changed)
            self._apply(self._decode_all(changed))
            return fed + len(changed)

    async def _read_changes(
        self,
    ) -> tuple[int, int, list[tuple[str, bytes | str | None]]] | None:
        """Every node changed since the generation held (every node, in another
        incarnation) and the nodes asked for by name, read a page at a time: the
        incarnation, the generation through which they hold every change, and the
        nodes (None: Redis holds no cache state). The first page decides the
        incarnation; when a later page finds another, the state was rewritten in
        between, and the read starts over."""
        while True:
            pages = _Pages(self.generation, self.incarnation, sorted(self._stale))
            while not pages.done:
                flat = await self._script(keys=_DELTA_KEYS, args=pages.args())
                if not flat[0]:
                    return None
                if not pages.take(flat):
                    break  # another incarnation meanwhile
            else:
                return pages.incarnation, pages.generation, list(pages.changed.items())

    async def catch_up(self) -> int:
        """`refresh` without its Redis read when the feed brought every change it has
        seen since that read: a worker's lane refreshes while its pop waits, and what
        the cache changed after comes by the feed. Redis all the same when the feed
        cannot tell (a gap, another incarnation, a change relative to another copy of a
        node) or nothing was read yet. A change still on its way is missed either way,
        as by a read a moment earlier: the cache's assume judges against its own state."""
        async with self._refreshing:
            await asyncio.sleep(0)  # messages read off the socket (as in `refresh`)
            fed = self.apply_feed()
            if self.incarnation and not self._gap and not self._stale:
                return fed
        return fed + await self.refresh()

    def apply_feed(self) -> int:
        """Apply the feed's messages received since the last refresh that follow what
        the snapshot holds (the synchronous part of `refresh`, which then asks Redis
        for the rest); returns how many nodes they changed."""
        replaced, touched, freed = self._take_feed()
        for name in replaced:
            touched.pop(name, None)
        self.freed += freed
        self._update_in_place(touched)
        # now: the generation already counts them
        self._apply(list(replaced.items()), touched)
        return len(replaced) + len(touched)

    def _take_feed(self) -> tuple[dict[str, NodeInfo | None], dict[str, bool], bool]:
        """The nodes the feed's messages change: messages of this incarnation that
        follow the generation held, in order, until one does not (a message missed:
        Redis has the rest). Advances the generation. Returns the nodes to put in place
        of the snapshot's (new ones, None: gone), those changed in place (a DELTA
        applied to the snapshot's own NodeInfo) with whether what they count moved, and
        whether a change in place removed a pod."""
        messages, self._feed = self._feed, []
        out: dict[str, NodeInfo | None] = {}
        touched: dict[str, bool] = {}
        local: dict[str, list[str]] | None = None
        stale = self._stale
        freed_any = False
        for data in messages:
            msg = unpack(data)
            follows = self._follows(msg)
            if follows is None:
                break  # a gap
            if not follows:
                continue
            for name, generation, kind, *change in msg["n"]:
                held = out[name] if name in out else self.nodes.get(name)
                if held is not None and held.generation >= generation:
                    continue  # the snapshot's copy is newer (read by `reload`)
                if kind == GONE:
                    out[name] = None
                elif kind == FULL:
                    out[name] = self._decode(name, change[0], held)
                elif held is None or held.generation != change[0] or name in stale:
                    stale.add(name)  # the change is relative to another copy
                    continue
                else:
                    if local is None:
                        local = self._local_by_node()
                    # pods assumed here are left out of a change made without them (a
                    # node this loop changed already has none left)
                    mine = local.get(name, ()) if name not in out and name not in touched else ()
                    counted = change[3] if len(change) > 3 else None  # a cache that sends it
                    moved, freed = held.apply_changes(
                        generation, change[1], change[2], mine, counted
                    )
                    if name not in out:  # else a NodeInfo this loop made: replaces still
                        touched[name] = touched.get(name, False) or moved
                        freed_any = freed_any or freed
                if stale:
                    stale.discard(name)
            self.generation = msg["g"]
        self.fed += len(out) + len(touched.keys() - out.keys())
        return out, touched, freed_any

    def _follows(self, msg: dict[str, Any]) -> bool | None:
        """Whether a feed message is the next change to apply: False when it is held
        already or another incarnation's (the Redis read tells), None after a gap; the
        last two leave the feed short of Redis until the next read (`catch_up`)."""
        if msg["i"] != self.incarnation:
            self._gap = True
            return False
        if msg["g"] <= self.generation:
            return False
        if msg["p"] > self.generation:
            self._gap = True
            return None
        return True

    def _update_in_place(self, touched: dict[str, bool]) -> None:
        """What the snapshot derives from the NodeInfos changed in place (`touched`:
        name -> whether what they count moved; False: only pods' versions did). They are
        the snapshot's own objects, as a local assumption changes them: a cycle reads
        the snapshot only between awaits (`Snapshot.cluster()` each time), never across
        one, so nothing holds a copy that should have stayed as it was."""
        if self._cluster is not None:
            self._cluster.pods_changed(touched)
        elif self._columns is not None:
            self._columns.update_pods(name for name, moved in touched.items() if moved)

    def _local_by_node(self) -> dict[str, list[str]]:
        """Keys of the pods assumed here and not yet seen in a record, by node."""
        local: dict[str, list[str]] = {}
        for key, p in self._pending.items():
            local.setdefault(p.node, []).append(key)
        return local

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
        self._apply(self._decode_all(list(zip(ordered, records, strict=True))))

    def _decode_all(
        self, changed: list[tuple[str, bytes | str | None]]
    ) -> list[tuple[str, NodeInfo | None]]:
        return [
            (name, self._decode(name, record, self.nodes.get(name)) if record else None)
            for name, record in changed
        ]

    def _apply(
        self, changed: list[tuple[str, NodeInfo | None]], touched: Iterable[str] = ()
    ) -> None:
        """Put `changed` in place of the snapshot's NodeInfos, and the assumptions of
        this worker back on them and on the nodes `touched` (changed in place)."""
        if not changed:
            if touched:
                self._reapply_pending(set(touched))
            return
        rebuild = False
        freed = False
        replaced = []
        for name, info in changed:
            old = self.nodes.get(name)
            if info is None:
                self.nodes.pop(name, None)
                rebuild = rebuild or old is not None
                continue
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
        self._reapply_pending({name for name, _ in changed}.union(touched))

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

    def assume(self, pod: PodInfo, node_name: str, cycle: int = 0) -> None:
        """Count `pod` on the node locally, so that later pods (of this batch and of the
        other lanes) see it, until the cache's record of the node shows it or `forget`."""
        self.supersede(pod.key, cycle)
        self._pending[pod.key] = _Pending(pod, node_name, time.monotonic(), cycle=cycle)
        self._add_local(pod, node_name)

    def supersede(self, key: str, cycle: int) -> None:
        """The queue handed `key` out again, as attempt `cycle`: an earlier attempt's
        local assumption holds no room any more. That attempt lapsed at the queue while
        its assume was still out (a lane waits up to its request timeout for an answer
        that died with a NATS server); kept, it counted the pod twice, or against
        itself, and turned pods away until that lane gave up."""
        p = self._pending.get(key)
        if p is not None and p.cycle != cycle:
            self._drop_local(key, p.node)

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

    def forget(self, pod: PodInfo, node_name: str, cycle: int = 0) -> None:
        """Drop attempt `cycle`'s local assumption, which the cache refused (or that will
        not bind); nothing when a later attempt of the pod holds it (`supersede`)."""
        p = self._pending.get(pod.key)
        if p is not None and p.cycle != cycle:
            return
        self._drop_local(pod.key, node_name)

    def _drop_local(self, key: str, node_name: str) -> None:
        self._pending.pop(key, None)
        node = self.nodes.get(node_name)
        if node is None or not node.remove_pod(key):
            return
        if self._cluster is not None:
            self._cluster.node_changed(node_name)
        elif self._columns is not None:
            self._columns.update(node_name)
