"""Leader election and fencing of watcher, queue and cache against a real Redis, and
failover of each with two replicas: kill -9 the leader, the standby takes over, no pod
is lost or bound twice."""

from __future__ import annotations

import asyncio
import itertools
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
import redis.asyncio as aioredis
from redis import Redis as SyncRedis

from services.watcher.takeover import take_over
from shared import keys
from shared.runtime.connections import ensure_streams
from shared.runtime.elector import EpochFloor, Fenced, LeaderElector
from shared.runtime.lease import LeaseConfig, Role
from shared.subjects import CLUSTER_STREAM
from shared.tools.client import PodTracker, publish_all
from shared.tools.devstack import LocalStack, Server, running, start_nats
from shared.tools.synthetic import make_node, make_pod
from tests.conftest import make_test_stack

pytestmark = pytest.mark.e2e

FAST = LeaseConfig(lease_duration=1.0, renew_deadline=0.6, retry_period=0.2)


async def test_one_leader_at_a_time_with_a_new_epoch_each_term(redis: aioredis.Redis) -> None:
    a = LeaderElector(redis, "queue", "a", FAST)
    b = LeaderElector(redis, "queue", "b", FAST)
    await a.acquire()
    await b.try_once()
    assert (a.lease.epoch, b.lease.role, b.lease.holder) == (1, Role.STANDBY, "a")
    await a.try_once()  # a renewal keeps the epoch
    assert (a.lease.role, a.lease.epoch) == (Role.LEADING, 1)
    await a.release()
    await asyncio.wait_for(b.acquire(), 2)
    assert b.lease.epoch == 2


async def test_a_standby_takes_over_once_the_lease_lapses(redis: aioredis.Redis) -> None:
    a = LeaderElector(redis, "cache", "a", FAST)
    b = LeaderElector(redis, "cache", "b", FAST)
    await a.acquire()  # and then a dies: it never renews
    started = time.monotonic()
    await asyncio.wait_for(b.acquire(), 3)
    assert time.monotonic() - started >= 0.5  # not before the lease lapsed
    await a.try_once()  # a comes back: it must find out that it lost
    assert a.lease.role is Role.LOST and a.lost.is_set()


async def test_a_leader_whose_event_loop_stalls_keeps_its_lease(
    redis: aioredis.Redis, redis_server: Server
) -> None:
    """Renewal runs in a thread of its own: a handler holding the loop for longer than
    the lease (a large batch on a busy machine) costs no failover."""
    renewer = SyncRedis(port=redis_server.port, socket_timeout=0.5)
    a = LeaderElector(redis, "cache", "a", FAST, renewer)
    b = LeaderElector(redis, "cache", "b", FAST)
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    await asyncio.sleep(0.05)
    time.sleep(2 * FAST.lease_duration)  # the loop is blocked; the thread renews
    await b.try_once()
    assert (b.lease.role, b.lease.holder) == (Role.STANDBY, "a")
    assert not a.lost.is_set()
    a.fence()  # stops the thread too
    await holding
    renewer.close()


def wedged(now: float) -> str:
    return "handling a batch for 99 s (stall limit 3 s)"


@pytest.mark.parametrize("threaded", [True, False], ids=["lease thread", "event loop"])
async def test_a_stalled_leader_releases_its_lease_and_counts_it_lost(
    redis: aioredis.Redis, redis_server: Server, threaded: bool
) -> None:
    """No progress (the tracker's stalled() gives a reason at two renewals in a row):
    the leader deletes its lease at once, so a standby takes over at its next try
    instead of after the lease duration, and the leader's `lost` is set."""
    renewer = SyncRedis(port=redis_server.port, socket_timeout=0.5) if threaded else None
    a = LeaderElector(redis, "watcher", "a", FAST, renewer, stalled=wedged)
    b = LeaderElector(redis, "watcher", "b", FAST)
    await a.acquire()
    await asyncio.wait_for(a.hold(), 5 * FAST.retry_period)
    assert a.lost.is_set() and a.lease.role is Role.LOST
    assert await redis.exists(keys.lease_key("watcher")) == 0  # released, not lapsing
    await b.try_once()
    assert (b.lease.role, b.lease.epoch) == (Role.LEADING, a.lease.epoch + 1)
    a.close()


async def test_a_stall_that_clears_by_the_next_renewal_keeps_the_lease(
    redis: aioredis.Redis, redis_server: Server
) -> None:
    answers = itertools.cycle([wedged(0), None])
    renewer = SyncRedis(port=redis_server.port, socket_timeout=0.5)
    a = LeaderElector(redis, "cache", "a", FAST, renewer, stalled=lambda now: next(answers))
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    await asyncio.sleep(6 * FAST.retry_period)
    assert not a.lost.is_set() and a.lease.leading
    a.fence()  # stops the thread too
    await holding
    a.close()


async def test_a_deposed_leaders_writes_are_refused_whole(redis: aioredis.Redis) -> None:
    a = LeaderElector(redis, "queue", "a", FAST)
    b = LeaderElector(redis, "queue", "b", FAST)
    await a.acquire()
    await redis.delete(keys.lease_key("queue"))  # a's lease lapses unnoticed
    await b.acquire()
    batch = a.batch()
    batch.hset(keys.QUEUE_PODS, "default/p", b"stale")
    batch.hdel(keys.QUEUE_PODS, "default/q")
    with pytest.raises(Fenced):
        await batch.execute()
    assert a.lost.is_set()  # a fenced write deposes at once, before the next renewal
    assert await redis.hgetall(keys.QUEUE_PODS) == {}
    current = b.batch()
    current.hset(keys.QUEUE_PODS, mapping={f"p{i}": i for i in range(5000)})  # chunked
    current.zadd(keys.CACHE_GENERATIONS, {"n1": 3})
    current.incr(keys.CACHE_PODGROUPS_VERSION)
    current.set(keys.CACHE_GENERATION, 9)
    current.hdel(keys.QUEUE_PODS, "p0", "p1")
    await current.execute()
    assert await redis.hlen(keys.QUEUE_PODS) == 4998
    assert await redis.zscore(keys.CACHE_GENERATIONS, "n1") == 3
    assert await redis.get(keys.CACHE_GENERATION) == b"9"


async def test_only_the_current_watcher_epoch_is_admitted(redis: aioredis.Redis) -> None:
    floor = EpochFloor(redis, "watcher")
    assert await floor.admit(0)  # no watcher ever led (a tool replaying events)
    await redis.set(keys.lease_epoch_key("watcher"), 3)
    assert await floor.admit(3)
    assert not await floor.admit(2)  # deposed
    assert not await floor.admit(99)  # forged: never handed out
    assert not await floor.admit("3")
    assert await floor.admit(3)


# --- failover of the services ---------------------------------------------------------


@pytest.fixture
def ha_stack(tmp_path: Path) -> Iterator[LocalStack]:
    """Two replicas each of watcher, queue and cache (a 3 s lease), two workers and binders."""
    stack = make_test_stack(tmp_path / "stack")
    stack.standbys = 1
    with running(stack) as st:
        yield st


async def wait_leader(stack: LocalStack, name: str, timeout: float) -> float:
    """Seconds until some replica of `name` leads and serves."""
    started = time.monotonic()
    while stack.leader(name) is None:
        assert time.monotonic() - started < timeout, f"no {name} leader after {timeout} s"
        await asyncio.sleep(0.1)
    return time.monotonic() - started


@pytest.mark.parametrize("service", ["queue", "cache", "watcher"])
async def test_killing_the_leader_mid_run_hands_over_without_losing_a_pod(
    ha_stack: LocalStack, service: str
) -> None:
    nc = await nats.connect(ha_stack.nats_url)
    try:
        js = nc.jetstream()
        tracker = PodTracker()
        await tracker.start(nc)
        await publish_all(js, [make_node(f"n{i}", cpu="16", memory="64Gi") for i in range(10)])
        await publish_all(js, [make_pod(f"p-{i}", cpu="100m") for i in range(600)])
        assert await tracker.wait_until(lambda t: len(t.bound()) >= 50, timeout=30)
        leader = ha_stack.leader(service)
        assert leader is not None
        leader.proc.send_signal(signal.SIGKILL)
        took = await wait_leader(ha_stack, service, timeout=30)
        print(f"{service}: standby leads and serves {took:.1f} s after kill -9 (3 s lease)")
        await publish_all(js, [make_pod(f"after-{i}", cpu="100m") for i in range(50)])
        assert await tracker.wait_until(lambda t: len(t.bound()) == 650, timeout=60), (
            f"{len(tracker.bound())} of 650 bound"
        )
        assert all(v.bind_count == 1 for v in tracker.pods.values())
    finally:
        await nc.close()


async def test_a_standby_takes_over_with_kube_defaults_within_the_lease(tmp_path: Path) -> None:
    """Lease 15 s, renew deadline 10 s, retry 2 s: the standby serves about a lease
    duration after the kill -9 (the bound is loose; the measured time is printed)."""
    stack = LocalStack(tmp_path / "stack", workers=1, binders=1, standbys=1)
    with running(stack, ("queue", "cache", "watcher", "worker", "binder")):
        leader = stack.leader("queue")
        assert leader is not None
        leader.proc.send_signal(signal.SIGKILL)
        took = await wait_leader(stack, "queue", timeout=30)
        print(f"queue: standby leads and serves {took:.1f} s after kill -9 (15 s lease)")
        nc = await nats.connect(stack.nats_url)
        try:
            tracker = PodTracker()
            await tracker.start(nc)
            js = nc.jetstream()
            await publish_all(js, [make_node("n0"), make_pod("p")])
            assert await tracker.wait_until(lambda t: "default/p" in t.bound(), timeout=30)
        finally:
            await nc.close()


async def test_sigterm_hands_the_lease_over_at_once(ha_stack: LocalStack) -> None:
    leader = ha_stack.leader("cache")
    assert leader is not None
    leader.proc.send_signal(signal.SIGTERM)
    assert leader.proc.wait(20) == 0
    took = await wait_leader(ha_stack, "cache", timeout=10)
    assert took < 3  # released: no waiting for the 3 s lease to lapse


# 1: Redis lost its epoch counter and handed the predecessor's epoch out again.
@pytest.mark.parametrize("epoch", [2, 1])
async def test_a_new_watcher_resumes_at_once_after_its_predecessors_ack_floor(
    tmp_path: Path, epoch: int
) -> None:
    """The batch a killed watcher fetched but never acked comes again at once (not after
    ack_wait, and not acked away by the successor's ack-all); the predecessor's consumer
    is gone, and a publisher's ephemeral consumer plays no part."""
    server = start_nats(tmp_path)
    nc = await nats.connect(f"nats://127.0.0.1:{server.port}")
    try:
        js = nc.jetstream()
        await ensure_streams(js)
        await publish_all(js, [make_pod(f"p{i}") for i in range(10)])  # sequences 1-10
        await js.subscribe("ksched.cluster.>", ordered_consumer=True)  # someone watching
        first = await js.pull_subscribe_bind(await take_over(js, 1, "a"), stream=CLUSTER_STREAM)
        fetched = await first.fetch(10, timeout=2)
        await fetched[3].ack_sync()  # ack-all through sequence 4, then dies
        await first.unsubscribe()
        second = await js.pull_subscribe_bind(
            await take_over(js, epoch, "b"), stream=CLUSTER_STREAM
        )
        again = await second.fetch(10, timeout=2)
        assert [m.metadata.sequence.stream for m in again] == list(range(5, 11))
        names = {c.name for c in await js.consumers_info(CLUSTER_STREAM)}
        assert f"watcher-{epoch}-b" in names and "watcher-1-a" not in names
    finally:
        await nc.close()
        server.stop()
