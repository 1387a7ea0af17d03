"""A worker's reports riding on its next pop: the queue service alone, played to over
NATS as the watcher and a worker would (as the singletons bench does)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from nats.aio.client import Client as NATS

from services.queue.podinfo import INFLIGHT
from services.queue.records import record_of
from shared import keys
from shared.runtime.rpc import request, request_all
from shared.runtime.watermark import read_marker
from shared.subjects import QUEUE_EVENTS, QUEUE_PENDING, QUEUE_POP
from shared.tools.devstack import LocalStack, running
from shared.tools.synthetic import make_pod

pytestmark = pytest.mark.e2e


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    """The queue alone (conftest's `nc` connects to it)."""
    with running(LocalStack(tmp_path / "stack"), ["queue"]) as st:
        yield st


async def add_pods(nc: NATS, names: list[str]) -> None:
    """Pending pods, as the watcher's leader delivers them (no watcher runs: epoch 0)."""
    events = [
        {
            "op": "upsert",
            "key": f"default/{name}",
            "uid": pod["metadata"]["uid"],
            "seq": seq,
            "pod": pod,
        }
        for seq, (name, pod) in enumerate(((n, make_pod(n)) for n in names), start=1)
    ]
    await request_all(nc, QUEUE_EVENTS, events, "events", {"epoch": 0, "through": len(names)})


async def where(nc: NATS, key: str) -> str | None:
    msg = await nc.request(QUEUE_PENDING, b"{}", timeout=5)
    pods = json.loads(msg.data)["pods"]
    return next((p["queue"] for p in pods if p["key"] == key), None)


async def test_reports_riding_on_a_pop_are_applied_and_written_before_its_reply(
    stack: LocalStack, nc: NATS
) -> None:
    await add_pods(nc, ["a", "b"])
    first = await request(nc, QUEUE_POP, {"max": 2, "wait_ms": 1000})
    cycles = {p["key"]: p["cycle"] for p in first["pods"]}
    assert set(cycles) == {"default/a", "default/b"}
    reports: list[dict[str, Any]] = [
        {"key": "default/a", "cycle": cycles["default/a"], "outcome": "assumed"},
        {
            "key": "default/b",
            "cycle": cycles["default/b"],
            "outcome": "unschedulable",
            "message": "0/1 nodes are available: 1 Insufficient cpu.",
            "plugins": ["NodeResourcesFit"],
        },
        {"key": "default/gone", "cycle": 1, "outcome": "assumed"},  # stale: not accepted
    ]
    # nothing left to pop: answered at once (wait 0), with what the reports did
    second = await request(nc, QUEUE_POP, {"max": 2, "wait_ms": 0, "reports": reports})
    assert (second["pods"], second["accepted"], second["failed"]) == ([], 2, [])
    assert await where(nc, "default/a") == "binding"
    assert await where(nc, "default/b") == "unschedulable"
    # written before the reply: a queue killed now restores both as reported
    redis = aioredis.Redis.from_url(stack.redis_url)
    try:
        records = {k: record_of(await redis.hget(keys.QUEUE_PODS, k)) for k in cycles}
    finally:
        await redis.aclose()
    assert records["default/a"]["where"] == "binding"
    assert records["default/b"]["where"] == "unschedulable"
    assert records["default/b"]["unschedulable_plugins"] == ["NodeResourcesFit"]

    # the same reports again (the worker's pop reply was lost): they change nothing
    again = await request(nc, QUEUE_POP, {"max": 2, "wait_ms": 0, "reports": reports})
    assert (again["pods"], again["accepted"]) == ([], 0)
    assert await where(nc, "default/b") == "unschedulable"


async def test_a_bad_report_is_refused_alone_and_the_pop_still_answered(nc: NATS) -> None:
    await add_pods(nc, ["c", "d"])
    popped = await request(nc, QUEUE_POP, {"max": 1, "wait_ms": 1000})
    (pod,) = popped["pods"]
    reports: list[Any] = ["junk", {"key": pod["key"], "cycle": pod["cycle"], "outcome": "assumed"}]
    reply = await request(nc, QUEUE_POP, {"max": 1, "wait_ms": 1000, "reports": reports})
    assert reply["accepted"] == 1 and [i for i, _ in reply["failed"]] == [0]
    assert [p["key"] for p in reply["pods"]] == [
        "default/d" if pod["key"] == "default/c" else "default/c"
    ]


async def test_a_pod_for_a_waiting_pop_is_written_once_with_its_pop(
    stack: LocalStack, nc: NATS
) -> None:
    """The pods the watcher brings to a waiting long poll and that poll's hand-out go to
    Redis in one write (the pop's reply waited for two, one after the other): each pod
    still in flight in Redis before its pop is answered."""
    redis = aioredis.Redis.from_url(stack.redis_url)
    rounds = 4
    try:
        before = (await read_marker(redis, "queue")).writes
        for n in range(rounds):
            pop = asyncio.create_task(request(nc, QUEUE_POP, {"max": 1, "wait_ms": 10_000}))
            await asyncio.sleep(0.3)  # the pop is waiting at the queue
            await add_pods(nc, [f"w{n}"])
            popped = await pop
            assert [p["key"] for p in popped["pods"]] == [f"default/w{n}"]
            record = record_of(await redis.hget(keys.QUEUE_PODS, f"default/w{n}"))
            assert record["where"] == INFLIGHT
        writes = (await read_marker(redis, "queue")).writes - before
    finally:
        await redis.aclose()
    # one write per round; the queue's tick may add one now and then
    assert writes <= rounds + 1, writes


async def test_moves_alone_cost_the_queue_no_write(stack: LocalStack, nc: NATS) -> None:
    """A queue shard takes every watcher shard's moves, most in messages with nothing
    else (a bound pod of another shard): they set the move request cycle, which no
    decision reads, so they cost no fenced round trip of their own. A move that brings
    a pod back is written."""
    redis = aioredis.Redis.from_url(stack.redis_url)
    try:
        await add_pods(nc, ["m0", "m1"])
        popped = await request(nc, QUEUE_POP, {"max": 2, "wait_ms": 1000})
        first, _ = popped["pods"]  # the other stays in flight
        report = {"key": first["key"], "cycle": first["cycle"], "outcome": "unschedulable"}
        report |= {"message": "0/1 nodes are available", "plugins": ["NodeResourcesFit"]}
        await request(nc, QUEUE_POP, {"max": 0, "wait_ms": 0, "reports": [report]})
        assert await where(nc, first["key"]) == "unschedulable"
        bound = make_pod("elsewhere") | {"spec": {"nodeName": "n1"}}
        moves = [{"op": "move", "resource": "Pod", "action": "Add", "new": bound}]
        before = (await read_marker(redis, "queue")).writes
        for _ in range(5):
            await request_all(nc, QUEUE_EVENTS, moves, "events", {"epoch": 0})
        assert (await read_marker(redis, "queue")).writes == before
        freed = [{"op": "move", "resource": "Pod", "action": "Delete", "old": bound}]
        await request_all(nc, QUEUE_EVENTS, freed, "events", {"epoch": 0})
        assert await where(nc, first["key"]) in ("backoff", "active")
        assert (await read_marker(redis, "queue")).writes > before
    finally:
        await redis.aclose()
