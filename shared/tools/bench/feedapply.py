"""What a worker's snapshot pays per changed node to apply the cache's node-change feed.

One process, no servers: a cache-side NodeFeed (services/cache/feed.py) stages and
"publishes" (into a list) the changes of `--changed` nodes per write, as the cache
does when pods bind: a write adds a new pod to each of K nodes (the assume), the next
re-versions those pods (the binding seen by the watcher). A worker-side Snapshot of
the same `--nodes` nodes (`--pods` pods each to begin with) receives each message and
applies it (`Snapshot.apply_feed`, the synchronous part of a refresh, then `cluster()`,
the ClusterSnapshot and columns the cycle reads). Reported: CPU time
(`time.process_time`) per changed node, the minimum over `--runs` runs of `--rounds`
writes each: CPU time moves little with the machine's load, and the minimum least.
The refresh's Redis round trip (one per refresh, whatever the number of changes) is
not in it.

    python -m shared.tools.bench.feedapply [--nodes 5000] [--changed 20]

Under `valgrind --tool=callgrind` (instruction counts do not depend on the load),
`--runs 1 --rounds 20` keeps it short.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from itertools import count

import redis.asyncio as aioredis

from services.cache.feed import NodeFeed
from shared.framework.types import NodeInfo, PodInfo
from shared.snapshot import Snapshot
from shared.tools.synthetic import make_node, make_pod
from shared.wire import pack

INCARNATION = 1


class FeedSink:
    """Where NodeFeed.publish sends: kept in a list."""

    max_payload = 8 * 1024 * 1024

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    async def publish(self, subject: str, data: bytes) -> None:
        self.sent.append(data)


class _Cache:
    """The cache's side: NodeInfos, generations, and the feed of their changes."""

    def __init__(self, nodes: int, pods: int) -> None:
        self.generation = 0
        self.names = [f"node-{i}" for i in range(nodes)]
        self.nodes: dict[str, NodeInfo] = {}
        self.seq = count(1)
        self.feed = NodeFeed()
        self.sink = FeedSink()
        for name in self.names:
            info = NodeInfo(name)
            info.set_node(make_node(name))
            for _ in range(pods):
                info.add_pod(self._new_pod(name))
            self.nodes[name] = info
        self.write(self.names)  # sends nothing: the first write after a takeover

    def _new_pod(self, node: str) -> PodInfo:
        seq = next(self.seq)
        return PodInfo.of(make_pod(f"pod-{seq}", node=node), seq)

    def records(self) -> list[tuple[str, bytes]]:
        return [(name, pack(info.to_record())) for name, info in self.nodes.items()]

    def write(self, names: list[str]) -> bytes | None:
        """One landed write changing `names`: its feed message."""
        self.generation += 1
        records = {}
        for name in names:
            info = self.nodes[name]
            info.generation = self.generation
            records[name] = pack(info.to_record())
        self.feed.stage(self.generation, self.nodes, records, {})
        sent = len(self.sink.sent)
        asyncio.run(self.feed.publish(self.sink, INCARNATION))  # type: ignore[arg-type]
        return self.sink.sent[-1] if len(self.sink.sent) > sent else None

    def assume(self, names: list[str]) -> list[str]:
        """A new pod on each node; returns their keys."""
        keys = []
        for name in names:
            pod = self._new_pod(name)
            self.nodes[name].add_pod(pod)
            keys.append(pod.key)
        return keys

    def bind(self, names: list[str], keys: list[str]) -> None:
        """Each pod of `keys` at a new version (bound)."""
        for name, key in zip(names, keys, strict=True):
            info = self.nodes[name]
            info.add_pod(info.pods[key].with_version(next(self.seq)))


def _snapshot(cache: _Cache) -> Snapshot:
    snap = Snapshot(aioredis.Redis())  # never connects: only the feed is applied
    snap.incarnation, snap.generation = INCARNATION, cache.generation
    snap._apply(snap._decode_all(list(cache.records())))  # as a first refresh reads
    snap.cluster()
    return snap


def measure(nodes: int, changed: int, pods: int, rounds: int) -> tuple[float, float]:
    """CPU seconds per changed node of one run of `rounds` writes: writes that add a
    pod to each node, and writes that re-version it."""
    cache = _Cache(nodes, pods)
    snap = _snapshot(cache)
    spent = [0.0, 0.0]
    applied = [0, 0]
    keys: list[str] = []
    for r in range(rounds):
        start = (r // 2 * changed) % (nodes - changed)
        names = cache.names[start : start + changed]
        if r % 2 == 0:
            keys = cache.assume(names)
        else:
            cache.bind(names, keys)
        data = cache.write(names)
        assert data is not None
        snap.receive(data)
        t0 = time.process_time()
        applied[r % 2] += snap.apply_feed()
        snap.cluster()
        spent[r % 2] += time.process_time() - t0
    assert sum(applied) == rounds * changed, "every change must come by the feed"
    return spent[0] / applied[0], spent[1] / applied[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--changed", type=int, default=20, help="nodes changed per write")
    parser.add_argument("--pods", type=int, default=2, help="pods per node to begin with")
    parser.add_argument("--rounds", type=int, default=400, help="writes per run")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    results = [measure(args.nodes, args.changed, args.pods, args.rounds) for _ in range(args.runs)]
    print(
        f"feed apply: {args.nodes} nodes, {args.changed} changed per write, "
        f"{args.rounds} writes x {args.runs} runs, CPU per changed node (min, median):"
    )
    for i, kind in enumerate(("pod added", "pod re-versioned (bound)")):
        us = sorted(r[i] * 1e6 for r in results)
        print(f"  {kind}: {us[0]:.1f} us, {us[len(us) // 2]:.1f} us")
    both = sorted((a + b) / 2 * 1e6 for a, b in results)
    print(f"  both: {both[0]:.1f} us, {both[len(both) // 2]:.1f} us")


if __name__ == "__main__":
    main()
