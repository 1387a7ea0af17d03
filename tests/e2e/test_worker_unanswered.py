"""A worker whose assume goes unanswered gives the room back and moves the queue: the
queue and one worker alone (no cache), the nodes written to Redis as the cache would."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from nats.aio.client import Client as NATS

from shared import keys
from shared.framework.types import NodeInfo
from shared.runtime.rpc import request_all
from shared.subjects import QUEUE_EVENTS, QUEUE_PENDING
from shared.tools.devstack import LocalStack, running
from shared.tools.synthetic import make_node, make_pod
from shared.wire import pack

pytestmark = pytest.mark.e2e


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    with running(LocalStack(tmp_path / "stack", workers=1, binders=0), ["queue", "worker"]) as st:
        yield st


async def write_node(redis_url: str, name: str) -> None:
    """What the cache service writes for a node (no cache runs: no assume is answered)."""
    redis = aioredis.Redis.from_url(redis_url)
    try:
        info = NodeInfo(name)
        info.set_node(make_node(name, cpu="4"))
        info.generation = 1
        await redis.hset(keys.state_key("cache"), "incarnation", 1)
        await redis.hset(keys.CACHE_NODEINFO, name, pack(info.to_record()))
        await redis.zadd(keys.CACHE_GENERATIONS, {name: 1})
    finally:
        await redis.aclose()


async def add_pod(nc: NATS, name: str, cpu: str, seq: int) -> None:
    pod = make_pod(name, cpu=cpu)
    event = {"op": "upsert", "key": f"default/{name}", "uid": pod["metadata"]["uid"]}
    events = [{**event, "seq": seq, "pod": pod}]
    await request_all(nc, QUEUE_EVENTS, events, "events", {"epoch": 0, "through": seq})


async def pending(nc: NATS, key: str) -> dict[str, Any] | None:
    msg = await nc.request(QUEUE_PENDING, b"{}", timeout=5)
    return next((p for p in json.loads(msg.data)["pods"] if p["key"] == key), None)


async def until(nc: NATS, key: str, ok: Any, timeout: float = 60) -> dict[str, Any] | None:
    """The pod's listing once `ok` holds for it (None if it never did)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        p = await pending(nc, key)
        if p is not None and ok(p):
            return p
        await asyncio.sleep(0.2)
    return None


async def test_an_unanswered_assume_moves_the_pods_parked_meanwhile(
    stack: LocalStack, nc: NATS
) -> None:
    """kube forgets an assumed pod whose binding cycle failed and moves the unschedulable
    pods (AssignedPodDelete). A pod turned away while an assume was out (its room counted)
    stayed parked for the unschedulable flush (5 minutes) when that assume went
    unanswered: the test_nats_cluster lease-bucket kill's 451 of 480."""
    await write_node(stack.redis_url, "n1")
    await add_pod(nc, "big", "8", 1)  # fits nowhere
    parked = await until(nc, "default/big", lambda p: p["queue"] == "unschedulable")
    assert parked is not None
    await add_pod(nc, "small", "100m", 2)  # placed, its assume unanswered (no cache)
    again = await until(nc, "default/big", lambda p: p["attempts"] > parked["attempts"])
    assert again is not None, "the parked pod was never moved"
