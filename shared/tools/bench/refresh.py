"""The cost of a worker's snapshot refresh (shared/snapshot.py) against real Redis.

The cache service (a process, as in production) gets N nodes with a few pods each
through its events subject, and writes their NodeInfo records and generations to
Redis. Then, as a worker does before each batch, a Snapshot refreshes:
  - cold: a new Snapshot reads every node (a worker that just started);
  - delta k: k nodes changed since the last refresh of a warm Snapshot (a new
    version of one pod on each, through the cache: the node keeps its size), for
    k = 1, 64 and every node.
Per case: the median and p99 of `Snapshot.refresh()`, and of refresh followed by
`cluster()` (the ClusterSnapshot and columns the cycle reads, kept in step).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from functools import partial
from itertools import count
from typing import Any

import nats
from nats.aio.client import Client as NATS

from shared.runtime.connections import connect_redis
from shared.runtime.retry import retry_forever
from shared.runtime.rpc import request
from shared.snapshot import Snapshot
from shared.subjects import CACHE_EVENTS
from shared.tools.devstack import LocalStack, temporary_stack
from shared.tools.synthetic import ZONES, make_node, make_pod

EVENT_BATCH = 1000
SEQ = count(1)


def _pod_upsert(name: str, node: str) -> dict[str, Any]:
    pod = make_pod(name)
    pod["spec"]["nodeName"] = node
    return {
        "op": "pod_upsert",
        "name": f"default/{name}",
        "uid": pod["metadata"]["uid"],
        "node_name": node,
        "pod": pod,
        "seq": next(SEQ),
    }


async def _send(nc: NATS, events: list[dict[str, Any]]) -> None:
    """Apply `events` at the cache (it has written them to Redis when this returns).
    Retried: /readyz answers before the cache subscribes, and the events are idempotent."""
    for start in range(0, len(events), EVENT_BATCH):
        body = {"events": events[start : start + EVENT_BATCH]}
        await retry_forever("send cache events", partial(_apply, nc, body), max_delay=0.5)


async def _apply(nc: NATS, body: dict[str, Any]) -> None:
    await request(nc, CACHE_EVENTS, body, timeout=120)


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "runs": len(samples),
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000,
    }


async def _timed(
    prepare: Callable[[], Awaitable[Snapshot]], repeats: int
) -> tuple[dict[str, float], dict[str, float]]:
    refresh, with_cluster = [], []
    for _ in range(repeats):
        snapshot = await prepare()
        start = time.perf_counter()
        await snapshot.refresh()
        middle = time.perf_counter()
        snapshot.cluster()
        end = time.perf_counter()
        refresh.append(middle - start)
        with_cluster.append(end - start)
    return _stats(refresh), _stats(with_cluster)


async def _measure(stack: LocalStack, nodes: int, pods_per_node: int) -> list[dict[str, Any]]:
    nc = await nats.connect(stack.nats_url)
    redis = connect_redis(stack.redis_url)
    try:
        names = [f"node-{i:05d}" for i in range(nodes)]
        await _send(
            nc,
            [
                {"op": "node_upsert", "name": n, "node": make_node(n, zone=ZONES[i % 3])}
                for i, n in enumerate(names)
            ],
        )
        await _send(
            nc,
            [_pod_upsert(f"init-{j}-{n}", n) for n in names for j in range(pods_per_node)],
        )
        warm = Snapshot(redis)
        await warm.refresh()
        warm.cluster()
        touched = count()

        async def cold() -> Snapshot:
            return Snapshot(redis)

        def delta(k: int) -> Callable[[], Awaitable[Snapshot]]:
            async def prepare() -> Snapshot:
                base = next(touched)
                changed = [names[(base * k + i) % nodes] for i in range(k)]
                await _send(nc, [_pod_upsert(f"init-0-{n}", n) for n in changed])
                return warm

            return prepare

        cases: list[tuple[str, Callable[[], Awaitable[Snapshot]], int]] = [
            (f"delta {k}", delta(k), repeats) for k, repeats in ((1, 200), (64, 100)) if k < nodes
        ]
        cases += [(f"delta {nodes} (all)", delta(nodes), 5), ("cold (all)", cold, 5)]
        rows = []
        for label, prepare, repeats in cases:
            refresh, with_cluster = await _timed(prepare, repeats)
            rows.append(
                {
                    "nodes": nodes,
                    "pods": nodes * pods_per_node,
                    "case": label,
                    "refresh": refresh,
                    "refresh_and_cluster": with_cluster,
                }
            )
        return rows
    finally:
        await redis.aclose()
        await nc.close()


def refresh_costs(node_counts: list[int], pods_per_node: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for nodes in node_counts:
        with temporary_stack("ksched-bench-refresh-", services=["cache"]) as stack:
            rows += asyncio.run(_measure(stack, nodes, pods_per_node))
    return rows


def print_refresh(rows: list[dict[str, Any]]) -> None:
    print("snapshot refresh (shared/snapshot.py against real Redis, records written by the cache)")
    for row in rows:
        r, c = row["refresh"], row["refresh_and_cluster"]
        print(
            f"  {row['nodes']:5d} nodes ({row['pods']:6d} pods)  {row['case']:<17} "
            f"refresh p50 {r['p50_ms']:8.2f} ms  p99 {r['p99_ms']:8.2f} ms   "
            f"+ cluster() p50 {c['p50_ms']:8.2f} ms  p99 {c['p99_ms']:8.2f} ms  "
            f"({r['runs']} runs)",
            flush=True,
        )
