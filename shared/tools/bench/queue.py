"""`ksched bench-queue` (make bench-queue): the queue service against real servers.

Starts nats-server, redis-server and the queue service (as a process, as in
production), then measures over NATS, as a worker sees it:
  - pop latency of a single pod (max=1), one request at a time;
  - pop latency of a batch (max=64), one request at a time;
  - throughput: pods added (batches of upserts, as the watcher sends them),
    popped by several concurrent long-polling poppers (batches of 64) and
    reported assumed, until every pod went through.
Every pop and report is persisted to Redis before its reply, as always.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import nats
from nats.aio.client import Client as NATS

from shared.runtime.rpc import request
from shared.runtime.timeouts import within
from shared.subjects import QUEUE_EVENTS, QUEUE_POP, QUEUE_REPORT
from shared.tools.devstack import LocalStack, temporary_stack
from shared.tools.synthetic import make_pod

ADD_BATCH = 500


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def upserts(prefix: str, count: int) -> list[dict[str, Any]]:
    events = []
    for i in range(count):
        pod = make_pod(f"{prefix}-{i}")
        events.append(
            {
                "op": "upsert",
                "key": f"default/{prefix}-{i}",
                "uid": pod["metadata"]["uid"],
                "seq": i + 1,
                "pod": pod,
            }
        )
    return events


async def add_pods(nc: NATS, events: list[dict[str, Any]]) -> None:
    for start in range(0, len(events), ADD_BATCH):
        await request(nc, QUEUE_EVENTS, {"events": events[start : start + ADD_BATCH]}, timeout=30)


async def clear(nc: NATS, popped: list[dict[str, Any]]) -> None:
    """The pods leave the queue as a binding would make them ("assigned")."""
    events = [{"op": "assigned", "key": p["key"]} for p in popped]
    await add_pods(nc, events)


async def pop_latency(nc: NATS, prefix: str, batch: int, requests: int) -> dict[str, float]:
    await add_pods(nc, upserts(prefix, batch * requests))
    samples, popped = [], []
    for _ in range(requests):
        start = time.perf_counter()
        reply = await request(nc, QUEUE_POP, {"max": batch, "wait_ms": 0}, timeout=10)
        samples.append(time.perf_counter() - start)
        assert len(reply["pods"]) == batch, "the queue ran dry"
        popped += reply["pods"]
    await clear(nc, popped)
    return {
        "requests": requests,
        "batch": batch,
        "p50_ms": percentile(samples, 0.50) * 1000,
        "p99_ms": percentile(samples, 0.99) * 1000,
        "pods_per_s": batch * requests / sum(samples),
    }


async def throughput(nc: NATS, pods: int, poppers: int, batch: int) -> dict[str, float]:
    done = asyncio.Event()
    reported = 0
    popped_all: list[dict[str, Any]] = []

    async def popper() -> None:
        nonlocal reported
        while not done.is_set():
            reply = await request(nc, QUEUE_POP, {"max": batch, "wait_ms": 100}, timeout=10)
            got = reply["pods"]
            if not got:
                continue
            reports = [{"key": p["key"], "cycle": p["cycle"], "outcome": "assumed"} for p in got]
            await request(nc, QUEUE_REPORT, {"reports": reports}, timeout=10)
            popped_all.extend(got)
            reported += len(got)
            if reported >= pods:
                done.set()

    start = time.perf_counter()
    tasks = [asyncio.create_task(popper()) for _ in range(poppers)]
    await add_pods(nc, upserts("tp", pods))
    added = time.perf_counter() - start
    await within(done.wait(), 600)
    elapsed = time.perf_counter() - start
    await asyncio.gather(*tasks)
    await clear(nc, popped_all)
    return {
        "pods": pods,
        "poppers": poppers,
        "batch": batch,
        "seconds": elapsed,
        "pods_per_s": pods / elapsed,
        "added_per_s": pods / added,
    }


async def _measure(stack: LocalStack, args: argparse.Namespace) -> dict[str, Any]:
    nc = await nats.connect(stack.nats_url)
    try:
        await pop_latency(nc, "warm", 1, 50)  # connections, code paths, Redis
        return {
            "single": await pop_latency(nc, "single", 1, args.single),
            "batched": await pop_latency(nc, "batched", args.batch, args.batches),
            "throughput": await throughput(nc, args.pods, args.poppers, args.batch),
        }
    finally:
        await nc.close()


def _print(results: dict[str, Any]) -> None:
    single, batched, tp = results["single"], results["batched"], results["throughput"]
    print("bench-queue: queue service over real nats-server and redis-server")
    print(
        f"  pop 1 pod      ({single['requests']} requests, one at a time): "
        f"p50 {single['p50_ms']:.2f} ms  p99 {single['p99_ms']:.2f} ms"
    )
    print(
        f"  pop {batched['batch']} pods    ({batched['requests']} requests, one at a time): "
        f"p50 {batched['p50_ms']:.2f} ms  p99 {batched['p99_ms']:.2f} ms  "
        f"({batched['pods_per_s']:.0f} pods/s popped)"
    )
    print(
        f"  throughput     ({tp['pods']} pods added, popped by {tp['poppers']} poppers in "
        f"batches of {tp['batch']}, reported): {tp['pods_per_s']:.0f} pods/s "
        f"({tp['seconds']:.2f} s; adding alone {tp['added_per_s']:.0f} pods/s)"
    )


def run_bench_queue(args: argparse.Namespace) -> int:
    with temporary_stack("ksched-bench-queue-", services=["queue"]) as stack:
        results = asyncio.run(_measure(stack, args))
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        _print(results)
    return 0
