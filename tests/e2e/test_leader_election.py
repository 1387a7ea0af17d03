"""Leader election and fencing of watcher, queue and cache against a real nats-server
(the lease bucket) and Redis (the fence), and failover of each with two replicas: kill -9
the leader, the standby takes over, no pod is lost or bound twice."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import nats
import pytest
import redis.asyncio as aioredis

from services.watcher.takeover import take_over
from shared import keys
from shared.runtime.connections import ensure_streams
from shared.runtime.elector import LeaderElector, LeaseClients, OpenClients, Stalled
from shared.runtime.fencing import EpochFloor, Fenced
from shared.runtime.lease import LeaseConfig, LeaseRecord, Role
from shared.runtime.leasestore import LeaseStore
from shared.subjects import CLUSTER_STREAM
from shared.tools.client import PodTracker, publish_all
from shared.tools.devstack import LocalStack, running
from shared.tools.servers import Server, start_nats
from shared.tools.synthetic import make_node, make_pod
from tests.conftest import make_test_stack

pytestmark = pytest.mark.e2e

FAST = LeaseConfig(lease_duration=1.0, renew_deadline=0.6, retry_period=0.2)
# A candidate whose clock runs slow: it believes its lease current long after a FAST
# standby, by its own clock, has seen it lapse. Only Redis's epoch stops its writes.
SLOW_CLOCK = LeaseConfig(lease_duration=20.0, renew_deadline=10.0, retry_period=5.0)


@pytest.fixture
def own_clients(nats_server: Server, redis_server: Server) -> OpenClients:
    """What a lease thread opens: a NATS connection and a Redis client of its own."""

    async def open_clients() -> LeaseClients:
        nc = await nats.connect(f"nats://127.0.0.1:{nats_server.port}")
        redis = aioredis.Redis(port=redis_server.port, socket_timeout=0.5)

        async def close() -> None:
            await nc.close()
            await redis.aclose()

        return LeaseClients(await LeaseStore.open(nc.jetstream()), redis, close)

    return open_clients


def candidate(
    store: LeaseStore,
    redis: aioredis.Redis,
    identity: str,
    service: str = "queue",
    config: LeaseConfig = FAST,
    renewer: OpenClients | None = None,
    stalled: Stalled | None = None,
) -> LeaderElector:
    clients = LeaseClients(store, redis)
    return LeaderElector(clients, service, identity, config, renewer, stalled)


@contextlib.asynccontextmanager
async def renewing(elector: LeaderElector) -> AsyncIterator[asyncio.Task[None]]:
    """The elector holding its lease meanwhile; stopped as a service stops (renewing
    ends, the thread's last try included), whatever the test found."""
    holding = asyncio.create_task(elector.hold())
    try:
        yield holding
    finally:
        holding.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await holding


async def redis_epoch(redis: aioredis.Redis, service: str = "queue") -> int:
    return int(await redis.get(keys.lease_epoch_key(service)) or 0)


async def test_one_leader_at_a_time_with_a_new_epoch_each_term(
    store: LeaseStore, redis: aioredis.Redis
) -> None:
    a = candidate(store, redis, "a")
    b = candidate(store, redis, "b")
    await a.acquire()
    await b.try_once()
    assert (a.lease.epoch, b.lease.role, b.lease.holder) == (1, Role.STANDBY, "a")
    assert await redis_epoch(redis) == 1  # the leader raised the fence to its epoch
    await a.try_once()  # a renewal keeps the epoch
    assert (a.lease.role, a.lease.epoch) == (Role.LEADING, 1)
    record, _ = await store.read("queue")
    assert record is not None and (record.holder, record.renew_count) == ("a", 1)
    await a.release()
    await asyncio.wait_for(b.acquire(), 2)
    assert b.lease.epoch == 2 and await redis_epoch(redis) == 2


async def test_epochs_start_above_what_redis_has_seen(
    store: LeaseStore, redis: aioredis.Redis
) -> None:
    """A Redis that fenced with epochs before the bucket existed (an upgrade from
    leases in Redis, or a bucket lost and recreated): the first term starts above."""
    await redis.set(keys.lease_epoch_key("cache"), 40)
    a = candidate(store, redis, "a", "cache")
    await a.acquire()
    assert a.lease.epoch == 41
    batch = a.batch()
    batch.set(keys.CACHE_GENERATION, 1)
    await batch.execute()


async def test_a_standby_takes_over_once_the_lease_lapses(
    store: LeaseStore, redis: aioredis.Redis
) -> None:
    a = candidate(store, redis, "a", "cache")
    b = candidate(store, redis, "b", "cache")
    await a.acquire()  # and then a dies: it never renews
    started = time.monotonic()
    await asyncio.wait_for(b.acquire(), 3)
    assert time.monotonic() - started >= FAST.lease_duration  # not before it lapsed
    assert b.lease.epoch == a.lease.epoch + 1
    await a.try_once()  # a comes back: it must find out that it lost
    assert a.lease.role is Role.LOST and a.lost.is_set()


async def test_two_standbys_racing_for_a_lapsed_lease_make_one_leader(
    store: LeaseStore, redis: aioredis.Redis
) -> None:
    """Both read the same revision; the compare-and-set lets one write land."""
    await candidate(store, redis, "gone").acquire()
    standbys = [candidate(store, redis, f"s{i}") for i in range(4)]
    await asyncio.gather(*(s.try_once() for s in standbys))  # each sees the record
    await asyncio.sleep(FAST.lease_duration)
    await asyncio.gather(*(s.try_once() for s in standbys))
    leaders = [s for s in standbys if s.lease.leading]
    assert len(leaders) == 1 and leaders[0].lease.epoch == 2
    record, _ = await store.read("queue")
    assert record is not None and record.holder == leaders[0].lease.identity


async def test_a_leader_whose_event_loop_stalls_keeps_its_lease(
    store: LeaseStore, redis: aioredis.Redis, own_clients: OpenClients
) -> None:
    """Renewal runs in a thread of its own: a handler holding the loop for longer than
    the lease (a large batch on a busy machine) costs no failover."""
    a = candidate(store, redis, "a", "cache", renewer=own_clients)
    b = candidate(store, redis, "b", "cache")
    await a.acquire()
    async with renewing(a):
        await asyncio.sleep(0.05)
        time.sleep(2 * FAST.lease_duration)  # the loop is blocked; the thread renews
        await b.try_once()
        await asyncio.sleep(FAST.lease_duration)
        await b.try_once()
        assert (b.lease.role, b.lease.holder) == (Role.STANDBY, "a")
        assert not a.lost.is_set()


def wedged(now: float) -> str:
    return "handling a batch for 99 s (stall limit 3 s)"


@pytest.mark.parametrize("threaded", [True, False], ids=["lease thread", "event loop"])
async def test_a_stalled_leader_releases_its_lease_and_counts_it_lost(
    store: LeaseStore, redis: aioredis.Redis, own_clients: OpenClients, threaded: bool
) -> None:
    """No progress (the tracker's stalled() gives a reason at two renewals in a row):
    the leader releases its lease at once, so a standby takes over at its next try
    instead of after the lease duration, and the leader's `lost` is set."""
    renewer = own_clients if threaded else None
    a = candidate(store, redis, "a", "watcher", renewer=renewer, stalled=wedged)
    b = candidate(store, redis, "b", "watcher")
    await a.acquire()
    await asyncio.wait_for(a.hold(), 5 * FAST.retry_period)
    assert a.lost.is_set() and a.lease.role is Role.LOST
    record, _ = await store.read("watcher")
    assert record is not None and (record.holder, record.epoch) == ("", a.lease.epoch)
    await b.try_once()  # released, not lapsing: at once
    assert (b.lease.role, b.lease.epoch) == (Role.LEADING, a.lease.epoch + 1)


async def test_a_stall_that_clears_by_the_next_renewal_keeps_the_lease(
    store: LeaseStore, redis: aioredis.Redis, own_clients: OpenClients
) -> None:
    answers = itertools.cycle([wedged(0), None])
    a = candidate(
        store, redis, "a", "cache", renewer=own_clients, stalled=lambda now: next(answers)
    )
    await a.acquire()
    async with renewing(a):
        await asyncio.sleep(6 * FAST.retry_period)
        assert not a.lost.is_set() and a.lease.leading


async def test_a_deposed_leaders_writes_are_refused_whole(
    store: LeaseStore, redis: aioredis.Redis
) -> None:
    """`a`'s clock runs slow: it still believes its lease current when `b` takes over.
    Redis's epoch refuses its batch, all of it."""
    a = candidate(store, redis, "a", config=SLOW_CLOCK)
    b = candidate(store, redis, "b")
    await a.acquire()
    await b.acquire()
    assert a.lease.current(time.monotonic())  # a does not know
    batch = a.batch()
    batch.hset(keys.QUEUE_PODS, "default/p", b"stale")
    batch.hdel(keys.QUEUE_PODS, "default/q")
    with pytest.raises(Fenced, match="FENCED stale lease epoch 1"):
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


async def test_a_leader_past_its_renew_deadline_refuses_its_own_writes(
    store: LeaseStore, redis: aioredis.Redis
) -> None:
    """Frozen past its renew deadline (nothing renewed meanwhile), a leader does not
    send its batch at all: a successor may lead already."""
    a = candidate(store, redis, "a")
    await a.acquire()
    await asyncio.sleep(FAST.renew_deadline)
    batch = a.batch()
    batch.hset(keys.QUEUE_PODS, "default/p", b"late")
    with pytest.raises(Fenced, match="not current"):
        await batch.execute()
    assert a.lost.is_set() and await redis.hgetall(keys.QUEUE_PODS) == {}


@pytest.mark.parametrize("loss", ["FLUSHALL", "epoch lowered"])
async def test_redis_losing_the_epoch_reissues_none_and_fences_again(
    store: LeaseStore, redis: aioredis.Redis, own_clients: OpenClients, loss: str
) -> None:
    """Redis loses its last writes while `b` leads (wiped, or back to an older state
    with `a`'s epoch): the bucket still decides the epochs, `b`'s next renewal brings
    its epoch back into Redis, and from then on deposed `a` is refused again."""
    a = candidate(store, redis, "a", config=SLOW_CLOCK)
    b = candidate(store, redis, "b", renewer=own_clients)
    await a.acquire()
    await b.acquire()
    async with renewing(b):
        if loss == "FLUSHALL":
            await redis.flushall()
        else:
            await redis.set(keys.lease_epoch_key("queue"), a.lease.epoch)
        deadline = time.monotonic() + 10
        while await redis_epoch(redis) != b.lease.epoch:  # back within a retry period
            assert time.monotonic() < deadline, "the leader never raised Redis's epoch again"
            await asyncio.sleep(0.02)
        batch = a.batch()
        batch.hset(keys.QUEUE_PODS, "default/p", b"stale")
        with pytest.raises(Fenced):
            await batch.execute()
        assert await redis.hgetall(keys.QUEUE_PODS) == {}
    await b.release()
    c = candidate(store, redis, "c")
    await c.acquire()
    assert c.lease.epoch == b.lease.epoch + 1 == 3  # never 1 or 2 again


async def test_only_the_current_watcher_epoch_is_admitted(
    store: LeaseStore, redis: aioredis.Redis
) -> None:
    floor = EpochFloor(store, "watcher")
    assert await floor.admit(0)  # no watcher ever led (a tool replaying events)
    await store.write("watcher", LeaseRecord("w", 3, 15.0), 0)
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


async def test_a_new_watcher_resumes_at_once_after_its_predecessors_ack_floor(
    tmp_path: Path,
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
        first = await js.pull_subscribe_bind(await take_over(js, 1), stream=CLUSTER_STREAM)
        fetched = await first.fetch(10, timeout=2)
        await fetched[3].ack_sync()  # ack-all through sequence 4, then dies
        await first.unsubscribe()
        second = await js.pull_subscribe_bind(await take_over(js, 2), stream=CLUSTER_STREAM)
        again = await second.fetch(10, timeout=2)
        assert [m.metadata.sequence.stream for m in again] == list(range(5, 11))
        names = {c.name for c in await js.consumers_info(CLUSTER_STREAM)}
        assert "watcher-2" in names and "watcher-1" not in names
    finally:
        await nc.close()
        server.stop()
