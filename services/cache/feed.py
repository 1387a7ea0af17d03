"""The node-change feed: each state write of the cache, pushed to every worker.

Every worker keeps a snapshot of every node (shared/snapshot.py). Reading each
changed node's whole record back from Redis cost every worker ≈ 1 HGET, an unpack
of the node object and a walk of the node's pods per bound pod (docs/scale.md §1).
Instead, once a write of the cache's state has landed in Redis, the cache publishes
what it changed, once, on NODE_CHANGES (core NATS, every worker subscribed):

    {"i": incarnation, "p": generation of the previous landed write, "g": this
     write's generation (keys.CACHE_GENERATION), "n": [entry, ...]}

with one entry per node the write changed:

    [name, generation, GONE]
    [name, generation, FULL, record]      the NodeInfo record the write stored
    [name, generation, DELTA, base, added, removed, counted]

A DELTA is relative to the node as this feed last published it (its generation
`base`): `added` the pods new or changed since ([key, version, slim], as the record
lists them), `removed` the keys gone, and `counted` (parallel to `added`) what a
NodeInfo counts of each added pod (PodInfo.counted_bytes: its resources and affinity
flags, or None), so that a worker counts the pod without unpacking its slim form. A
worker that predates `counted` reads the first six fields and parses. A node is sent
FULL the first time the feed publishes it (after a takeover, a whole write), and
whenever its node object changed.

Redis stays the truth: a worker applies a message only when it follows what it holds
(`p` ≤ its generation, same incarnation) and reads the rest from Redis, as before
the feed (a lost message, a worker just started, a node whose delta does not fit).
So nothing here must reach every worker: a write whose message is not sent (too
large, NATS away) only costs the workers a Redis read.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client as NATS

from shared.framework.types import NodeInfo, PodInfo
from shared.subjects import NODE_CHANGES
from shared.wire import pack

log = logging.getLogger("ksched.cache.feed")

GONE, FULL, DELTA = 0, 1, 2


@dataclass
class _Published:
    """A node as the feed last published it."""

    generation: int
    raw_node: dict[str, Any] | None
    pods: list[PodInfo]  # in the node's order


@dataclass
class _Staged:
    """A write being made: its message entries, and what the feed knows once it lands."""

    generation: int
    whole: bool = False
    entries: list[list[Any]] = field(default_factory=list)
    published: dict[str, _Published | None] = field(default_factory=dict)


class NodeFeed:
    """Stages each write's node changes (`stage`, `stage_whole`, from inside the write's
    batch building) and publishes them once the write landed (`publish`)."""

    def __init__(self) -> None:
        self._base: int | None = None  # the generation of the last landed write; None: unknown
        self._nodes: dict[str, _Published] = {}
        self._staged: _Staged | None = None

    def reset(self) -> None:
        """A takeover: nothing is known of what the workers hold."""
        self._base = None
        self._nodes = {}
        self._staged = None

    def drop(self) -> None:
        """The staged write did not land."""
        self._staged = None

    def stage_whole(self, generation: int) -> None:
        """The whole state is written (a new incarnation): workers read it from Redis."""
        self._staged = _Staged(generation, whole=True)

    def stage(
        self,
        generation: int,
        nodes: dict[str, NodeInfo],
        records: dict[str, bytes],
        gone: dict[str, int],
    ) -> None:
        """The node changes of a write: `records` (name -> the record written), `gone`
        (name -> generation of nodes deleted), read from `nodes` as the write has them."""
        staged = _Staged(generation)
        for name, gen in gone.items():
            staged.entries.append([name, gen, GONE])
            staged.published[name] = None
        for name, record in records.items():
            info = nodes[name]
            before = self._nodes.get(name)
            if before is None or before.raw_node is not info.raw_node:
                staged.entries.append([name, info.generation, FULL, record])
            else:
                staged.entries.append(_delta(before, info))
            staged.published[name] = _Published(
                info.generation, info.raw_node, [*info.pods.values()]
            )
        self._staged = staged

    async def publish(self, nc: NATS, incarnation: int) -> None:
        """The staged write landed: publish it (when the workers can chain it to the
        previous one) and remember what it published."""
        staged, self._staged = self._staged, None
        if staged is None:
            return
        if staged.whole:
            self._nodes = {}
            self._base = staged.generation
            return
        for name, published in staged.published.items():
            if published is None:
                self._nodes.pop(name, None)
            else:
                self._nodes[name] = published
        base, self._base = self._base, staged.generation
        if base is None:
            return  # the first write after a takeover: the workers read Redis once
        if not staged.entries:
            return  # pods or groups only; a generation moved without a node is a gap
        data = pack({"i": incarnation, "p": base, "g": staged.generation, "n": staged.entries})
        if len(data) > nc.max_payload:
            return  # a gap, as a lost message: the workers read these nodes from Redis
        try:
            await nc.publish(NODE_CHANGES, data)
        except Exception as err:  # the same: Redis has it
            log.debug("node changes not published: %s", err)


def _delta(before: _Published, info: NodeInfo) -> list[Any]:
    pods, removed = _changed(before.pods, info.pods)
    added = [[pod.key, pod.version, pod.slim_bytes] for pod in pods]
    counted = [pod.counted_bytes for pod in pods]
    return [info.name, info.generation, DELTA, before.generation, added, removed, counted]


def _changed(known: list[PodInfo], now: dict[str, PodInfo]) -> tuple[list[PodInfo], list[str]]:
    """The pods of `now` new or replaced since `known`, in the node's order, and the
    keys gone. A pod assumed on a node comes last in its dict (NodeInfo.add_pod), so most
    changes only append to what was published: then the pods published are the same
    objects in the same order (compared by identity, in C: PodInfo has no __eq__) and
    only the new tail is looked at, not every pod on the node."""
    pods = [*now.values()]
    if pods[: len(known)] == known:
        return pods[len(known) :], []
    by_key = {pod.key: pod for pod in known}
    return (
        [pod for key, pod in now.items() if by_key.get(key) is not pod],
        [key for key in by_key if key not in now],
    )
