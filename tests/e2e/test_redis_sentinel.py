"""ksched on Redis with Sentinel (a primary, a replica, three sentinels; shared/tools/
sentinel.py): the primary killed (kill -9) while pods are scheduled, the sentinels
promote the replica, the services follow it, and no pod is lost, bound twice or put on
a full node; a primary demoted while its clients stay connected (READONLY) is left for
the new one, where Lua scripts and pipelines work."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from importlib.resources import files
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NATS
from redis import Redis

from shared import keys
from shared.api.models import key_of
from shared.runtime.connections import connect_redis
from shared.runtime.fencing import epoch_floor, raise_epoch
from shared.tools.devstack import LocalStack, running
from shared.tools.invariants import audit
from shared.tools.observe import settle
from shared.tools.sentinel import MASTER_NAME, RedisSentinels, start_sentinels
from shared.tools.synthetic import make_node, make_pod
from tests.conftest import make_test_stack
from tests.e2e.kills import publish_until_bound
from tests.e2e.state import eventually

pytestmark = pytest.mark.e2e

NODES = [make_node(f"n{i}", cpu="4", memory="32Gi") for i in range(16)]  # 64 cpus
PODS = 480  # 125m each: 60 cpus, so an overcommit would show


@pytest.fixture
def sentinel_stack(tmp_path: Path) -> Iterator[LocalStack]:
    """The whole ksched on Redis with Sentinel (KSCHED_REDIS_URL=redis+sentinel://…)."""
    with running(replace(make_test_stack(tmp_path / "stack"), redis_sentinel=True)) as st:
        yield st


@pytest.fixture
async def snc(sentinel_stack: LocalStack) -> AsyncIterator[NATS]:
    """The test's own NATS connection (the stack's one server)."""
    async with await nats.connect(sentinel_stack.nats_url) as client:
        yield client


def sentinels_of(stack: LocalStack) -> RedisSentinels:
    assert stack.redis_sentinels is not None
    return stack.redis_sentinels


def resumed_after(kill: float, bound_at: list[float]) -> float:
    """Seconds from the kill to the binding that ended the longest pause in binding
    after it (bindings already under way when Redis went finish at once)."""
    times = sorted(t for t in bound_at if t >= kill)
    edges = [kill, *times]
    gaps = [(b - a, b) for a, b in itertools.pairwise(edges)]
    return max(gaps)[1] - kill if gaps else 0.0


@pytest.mark.timeout(300)
async def test_a_killed_primary_is_replaced_and_no_pod_is_lost(
    sentinel_stack: LocalStack, snc: NATS
) -> None:
    sentinels = sentinels_of(sentinel_stack)
    pods = [make_pod(f"p-{i:03d}", cpu="125m", memory="256Mi") for i in range(PODS)]
    tracker, publishing = await publish_until_bound(snc, NODES, pods, PODS // 4)
    old = sentinels.primary()
    old_port = sentinels.data[old].port
    killed = time.perf_counter()
    await asyncio.to_thread(sentinels.kill, old)
    await asyncio.to_thread(sentinels.wait_promoted, old_port)
    promoted = time.perf_counter() - killed
    await asyncio.wait_for(publishing, 120)

    keys_ = [key_of(p) for p in pods]
    everyone = await tracker.wait_until(lambda t: all(k in t.bound() for k in keys_), timeout=120)
    bound = tracker.bound()
    assert everyone, f"{len(bound)} of {PODS} bound"
    assert all(v.bind_count == 1 for v in tracker.pods.values()), "a pod was bound twice"
    report = audit(NODES, {key_of(p): p for p in pods}, bound)
    assert report.ok, report.lines()[:10]
    redis = connect_redis(sentinel_stack.redis_url)
    try:  # the cache's commits, on the new primary, agree with the bindings
        commits = await settle(tracker, redis, keys_, timeout=60)
    finally:
        await redis.aclose()
    assert {k: c.node for k, c in commits.items()} == bound
    resumed = resumed_after(killed, [v.bound_at for v in tracker.pods.values() if v.bound_at])
    print(
        f"\nsentinel failover: replica promoted {promoted:.2f} s after the kill, "
        f"pods binding again {resumed:.2f} s after it"
    )


async def test_a_demoted_primary_is_left_for_the_new_one(tmp_path: Path) -> None:
    """SENTINEL FAILOVER demotes a live primary: its clients' writes get READONLY, which
    must send them to the new primary, where the fencing script (not in its script cache:
    NOSCRIPT) and a pipeline run."""
    sentinels = await asyncio.to_thread(start_sentinels, tmp_path)
    client = connect_redis(sentinels.url)
    try:
        await raise_epoch(client, "queue", 1)
        old_port = sentinels.primary_port()
        assert old_port is not None
        replica = next(s for s in sentinels.data if s.port != old_port)
        fenced_write = files("shared.lua").joinpath("fenced_write.lua").read_text()
        sha = hashlib.sha1(fenced_write.encode()).hexdigest()
        with Redis(port=replica.port) as direct:  # scripts are not replicated
            assert direct.script_exists(sha) == [False]
        with Redis(port=sentinels.sentinels[0].port) as sentinel:
            sentinel.execute_command("SENTINEL", "FAILOVER", MASTER_NAME)
        new_port = await asyncio.to_thread(sentinels.wait_promoted, old_port)
        assert new_port == replica.port
        # Until Sentinel demotes it, the old primary still takes writes, which its resync
        # from the new one then drops: Sentinel's known window (docs/reliability.md).
        await asyncio.to_thread(sentinels.wait_role, old_port, "slave")

        async def written() -> bool:
            try:
                await raise_epoch(client, "queue", 2)
                async with client.pipeline(transaction=False) as pipe:
                    pipe.hset(keys.QUEUE_PODS, "default/p", b"x")
                    pipe.hget(keys.QUEUE_PODS, "default/p")
                    _, value = await pipe.execute()
            except Exception:  # the failover is under way
                return False
            return bool(value == b"x")

        assert await eventually(written, 30)
        with Redis(port=new_port) as direct:  # it all landed on the new primary
            assert direct.get(keys.lease_epoch_key("queue")) == b"2"
            assert direct.hget(keys.QUEUE_PODS, "default/p") == b"x"
            assert direct.execute_command("ROLE")[0] == b"master"
        assert await epoch_floor(client, "queue") == 2
    finally:
        await client.aclose()
        sentinels.stop()
