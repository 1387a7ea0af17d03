"""The cache's own work per pod, without NATS or Redis, split by phase.

`python -m shared.tools.bench.cachecore [--pods N] [--batch B] [--runs R]` plays
SchedulingBasic's traffic into the pure parts of the cache service over 500 nodes, in
rounds of B pods: the worker's assumes (the verdict holds, as for most plain pods:
`Cache.verdict_holds`, `Cache.assume_pod`), the write that follows (the changed nodes'
records, `NodeRecords.record`; the changed pods' records; the feed's message,
`NodeFeed.stage` and `publish` into a list), then the watcher's bound pods
(`PodInfo.updated`, `Cache.add_pod`). It prints the CPU time (`time.process_time`)
per pod of each phase and in all, the minimum over R runs. What it leaves out is the
service's I/O: nats-py, the requests' unpacking and the replies, redis-py and the
fenced write (docs/scale.md §1, `python -m shared.tools.bench.singletons cache`).
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any, cast

from nats.aio.client import Client as NATS

from services.cache.cache import Cache
from services.cache.feed import NodeFeed
from services.cache.records import NodeRecords
from shared.config import SchedulerConfiguration
from shared.framework.profile_map import ProfileMap
from shared.framework.runtime import Framework
from shared.framework.types import PodInfo
from shared.plugins import REGISTRY
from shared.runtime.service import tune_gc
from shared.tools.bench.door import rounds_args
from shared.tools.bench.feedapply import FeedSink
from shared.tools.synthetic import make_node, make_pod
from shared.wire import pack

NODES = 500
PHASES = ("assume", "node records", "pod records", "feed", "bound")


class Core:
    """The cache's pure parts as the service wires them, and CPU time per phase."""

    def __init__(self) -> None:
        self.framework: Framework = ProfileMap(SchedulerConfiguration(), REGISTRY)[
            "default-scheduler"
        ]
        self.cache = Cache(time.time)
        self.records = NodeRecords()
        self.feed = NodeFeed()
        self.sink = FeedSink()
        self.seconds = dict.fromkeys(PHASES, 0.0)
        for i in range(NODES):
            self.cache.add_or_update_node(make_node(f"node-{i}", cpu="400", pods=1100))
        self.cache.cluster()
        self.write()  # the first write after a takeover publishes nothing

    def timed(self, phase: str, step: Callable[[], Any]) -> Any:
        before = time.process_time()
        result = step()
        self.seconds[phase] += time.process_time() - before
        return result

    def assume(self, raw: dict[str, Any], node: str, seq: int) -> None:
        cache, uid = self.cache, raw["metadata"]["uid"]
        holds = cache.verdict_holds(self.framework, raw, node, cache.nodes[node].generation)
        pod = PodInfo.lazy(raw, seq) if holds else PodInfo.of(raw, seq)
        if not cache.assume_pod(self.framework, pod, node, uid, seq, validate=not holds).ok:
            raise RuntimeError(f"assume of {uid} on {node} refused")

    def write(self) -> None:
        """One flush: the changed nodes' and pods' records, and the feed's message."""
        nodes, pods = self.cache.take_dirty()
        infos = self.cache.nodes
        records = self.timed(
            "node records", lambda: {n: self.records.record(infos[n]) for n in nodes}
        )
        self.timed("pod records", lambda: [pack(self.cache.pods[k].to_record()) for k in pods])

        def feed() -> None:
            self.feed.stage(self.cache.generation, infos, records, {})
            _finish(self.feed.publish(cast(NATS, self.sink), 1))

        self.timed("feed", feed)

    def bound(self, raw: dict[str, Any], node: str, seq: int) -> None:
        key = f"{raw['metadata']['namespace']}/{raw['metadata']['name']}"
        current = self.cache.pods.get(key)
        pod = PodInfo.updated(current.pod if current else None, raw, seq)
        self.cache.add_pod(key, raw["metadata"]["uid"], node, pod, seq)


def _finish(coroutine: Coroutine[Any, Any, None]) -> None:
    """Run a coroutine that never waits (the sink keeps what is published): no event
    loop's own cost in the figures."""
    with contextlib.suppress(StopIteration):
        coroutine.send(None)
    coroutine.close()


def bound_pod(raw: dict[str, Any], node: str) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    out["spec"]["nodeName"] = node
    out["status"] = {"conditions": [{"type": "PodScheduled", "status": "True"}]}
    return out


def run(pods: int, batch: int) -> dict[str, float]:
    """CPU seconds per pod of each phase, over `pods` pods."""
    core = Core()
    raws = [make_pod(f"p-{i}") for i in range(pods)]
    nodes = [f"node-{i % NODES}" for i in range(pods)]
    bounds = [bound_pod(raw, node) for raw, node in zip(raws, nodes, strict=True)]
    seq = 0
    for start in range(0, pods, batch):
        rows = range(start, min(pods, start + batch))
        for i in rows:
            seq += 1
            core.timed("assume", partial(core.assume, raws[i], nodes[i], seq))
        core.write()
        for i in rows:
            seq += 1
            core.timed("bound", partial(core.bound, bounds[i], nodes[i], seq))
        core.cache.take_dirty()
    return {phase: s / pods for phase, s in core.seconds.items()}


def summary(runs: list[dict[str, float]], pods: int, batch: int) -> str:
    """The run of least CPU in all, by phase, in µs per pod; every run's total."""
    best = min(runs, key=lambda r: sum(r.values()))
    phases = ", ".join(f"{p} {best[p] * 1e6:.1f}" for p in PHASES)
    totals = ", ".join(f"{sum(r.values()) * 1e6:.1f}" for r in runs)
    return (
        f"cache core: {pods} pods on {NODES} nodes in rounds of {batch}: "
        f"min {sum(best.values()) * 1e6:.1f} µs of CPU per pod ({phases}; runs: {totals})"
    )


def main() -> int:
    args = rounds_args(__doc__, pods=6000, batch=60)
    tune_gc()  # the service's collector thresholds: its share of the CPU is the service's
    print(summary([run(args.pods, args.batch) for _ in range(args.runs)], args.pods, args.batch))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
