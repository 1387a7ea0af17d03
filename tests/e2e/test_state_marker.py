"""The state marker and the relist against real servers (shared/runtime/watermark.py,
shared/relist.py): a leader's batch lands only over the state it wrote, a loss makes
it write its whole state again as a new incarnation, a new leader trusts Redis only
as far as the watcher acknowledged, and the log lists its latest events and the bind
requests in flight."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis.asyncio as aioredis
from nats.js import JetStreamContext

from services.watcher.takeover import take_over
from shared import keys
from shared.relist import pending_pods, read_in_flight, read_latest
from shared.runtime.elector import LeaderElector, LeaseClients
from shared.runtime.fencing import FencedBatch
from shared.runtime.lease import LeaseConfig
from shared.runtime.leasestore import LeaseStore
from shared.runtime.watermark import Marker, StateWrites, read_marker, state_at_takeover
from shared.sharding import WatcherShard
from shared.subjects import BIND_STREAM, BIND_SUBJECT, CLUSTER_STREAM
from shared.tools.client import publish_all, publish_pod
from shared.tools.synthetic import make_node, make_pod
from shared.wire import pack

pytestmark = pytest.mark.e2e

# Long enough that the lease stays current by the test's clock on a loaded machine:
# each test acquires once and never renews.
LEASE = LeaseConfig(lease_duration=120.0, renew_deadline=90.0, retry_period=1.0)
PODS = keys.QUEUE_PODS
MARKER = keys.state_key("queue")


@pytest.fixture
async def elector(redis: aioredis.Redis, store: LeaseStore) -> LeaderElector:
    """The queue's leader."""
    leader = LeaderElector(LeaseClients(store, redis), "queue", "a", LEASE)
    await leader.acquire()
    return leader


@pytest.fixture
async def state(redis: aioredis.Redis, js: JetStreamContext, elector: LeaderElector) -> StateWrites:
    """The queue's writes, as a leader that has just taken over."""
    writes = StateWrites("queue", (PODS,), lambda: js, redis, elector.batch)
    takeover = await state_at_takeover(js, redis, "queue")
    writes.mark.start(takeover.incarnation, 0)
    writes.whole = True
    return writes


def setting(pods: dict[str, bytes]) -> Callable[[FencedBatch], None]:
    def everything(batch: FencedBatch) -> None:
        batch.hset(PODS, mapping=pods)

    return everything


def changing(field: str) -> Callable[[FencedBatch], Callable[[], None]]:
    """Changes that set `field` in the pods' hash (and undo nothing)."""

    def changes(batch: FencedBatch) -> Callable[[], None]:
        batch.hset(PODS, field, b"x")
        return lambda: None

    return changes


async def test_a_batch_lands_only_over_the_state_its_leader_wrote(
    state: StateWrites, redis: aioredis.Redis
) -> None:
    pods = {"a": b"1"}
    await state.write(lambda batch: None, setting(pods))  # the takeover's whole state
    first = state.mark.incarnation
    undone: list[str] = []

    def change(field: str) -> Callable[[FencedBatch], Callable[[], None]]:
        def changes(batch: FencedBatch) -> Callable[[], None]:
            pods[field] = b"x"
            batch.hset(PODS, field, b"x")
            return lambda: undone.append(field)

        return changes

    await state.write(change("b"), setting(pods))
    assert (await read_marker(redis, "queue")).writes == 2
    # Redis goes back a write (a replica that lagged, an older append-only file) ...
    await redis.hset(MARKER, "writes", 1)
    await redis.hdel(PODS, "b")
    # ... so the next batch writes nothing, and the whole state is written instead
    await state.write(change("c"), setting(pods))
    assert undone == ["c"]
    assert await redis.hgetall(PODS) == {b"a": b"1", b"b": b"x", b"c": b"x"}
    marker = await read_marker(redis, "queue")
    assert marker.incarnation > first and marker.writes == 1
    assert state.mark.incarnation == marker.incarnation


async def test_a_leader_stopped_before_it_took_the_state_over_writes_nothing(
    state: StateWrites, redis: aioredis.Redis, js: JetStreamContext, elector: LeaderElector
) -> None:
    """A stop's last flush during the takeover: its memory holds nothing taken over yet,
    and written "whole" over the predecessor's state it would wipe what the next
    leader restores."""
    await state.write(lambda batch: None, setting({"a": b"1"}))  # the predecessor's
    before = await read_marker(redis, "queue")
    taking_over = StateWrites("queue", (PODS,), lambda: js, redis, elector.batch)
    await taking_over.write(changing("b"), setting({"b": b"x"}))
    assert await redis.hgetall(PODS) == {b"a": b"1"}
    assert await read_marker(redis, "queue") == before


async def test_events_that_change_nothing_still_move_the_marker_on(
    state: StateWrites, redis: aioredis.Redis
) -> None:
    """The watcher acks them once applied: a marker left behind would make the next
    leader rebuild a state that was whole."""
    await state.write(lambda batch: None, setting({"a": b"1"}))
    state.mark.through(42)  # a batch with nothing for this service
    await state.write(lambda batch: None, setting({"a": b"1"}))
    assert (await read_marker(redis, "queue")).applied == 42
    await state.write(lambda batch: None, setting({"a": b"1"}))  # nothing more to say
    assert (await read_marker(redis, "queue")).writes == 2


async def test_each_watcher_shards_applied_moves_on_and_outlives_a_rewrite(
    state: StateWrites, redis: aioredis.Redis
) -> None:
    """A shard's batch with nothing for this service still moves its own `applied` on;
    a rewrite after a loss (a new incarnation) keeps what each shard had applied: the
    state in memory still holds those events, and a marker without them would make the
    next leader rebuild a whole state."""
    await state.write(lambda batch: None, setting({"a": b"1"}))
    first = state.mark.incarnation
    state.mark.through(42, "watcher.1")
    await state.write(lambda batch: None, setting({"a": b"1"}))
    assert (await read_marker(redis, "queue")).lanes == {"watcher.1": 42}
    await redis.hset(MARKER, "writes", 1)  # Redis went back a write
    await state.write(changing("b"), setting({"a": b"1"}))  # so the whole state again
    marker = await read_marker(redis, "queue")
    assert marker.incarnation > first and marker.writes == 1
    assert marker.lanes == {"watcher.1": 42}


async def test_a_leader_that_writes_nothing_finds_the_loss_by_its_check(
    state: StateWrites, redis: aioredis.Redis
) -> None:
    await state.write(lambda batch: None, setting({"a": b"1"}))
    await state.check()
    assert not state.whole
    await redis.delete(MARKER, PODS)  # wiped (the lease aside: it may live elsewhere)
    await state.check()
    assert state.whole
    await state.write(lambda batch: None, setting({"a": b"1"}))
    assert await redis.hgetall(PODS) == {b"a": b"1"}


async def test_a_new_leader_that_finds_the_state_whole_only_renames_it(
    state: StateWrites, redis: aioredis.Redis, js: JetStreamContext
) -> None:
    await state.write(lambda batch: None, setting({"a": b"1"}))
    takeover = await state_at_takeover(js, redis, "queue")
    assert takeover.lost is None
    state.mark.start(takeover.incarnation, takeover.marker.applied)
    await state.adopt()
    assert await redis.hgetall(PODS) == {b"a": b"1"}
    assert await read_marker(redis, "queue") == Marker(takeover.incarnation, 0, 1)


async def test_a_new_leader_trusts_redis_as_far_as_the_watcher_acknowledged(
    redis: aioredis.Redis, js: JetStreamContext
) -> None:
    takeover = await state_at_takeover(js, redis, "queue")
    assert takeover.first and takeover.lost is None  # no state before: none lost
    again = await state_at_takeover(js, redis, "queue")
    assert not again.first and again.lost is not None
    assert again.lost.startswith("no state marker")
    await publish_all(js, [make_pod(f"p{i}") for i in range(5)])  # sequences 1-5
    watcher = await js.pull_subscribe_bind(await take_over(js, 1), stream=CLUSTER_STREAM)
    (*_, last) = await watcher.fetch(5, timeout=2)
    await last.ack_sync()  # the watcher acknowledged through 5
    await redis.hset(MARKER, mapping={"incarnation": takeover.incarnation, "applied": 4})
    again = await state_at_takeover(js, redis, "queue")
    assert again.incarnation > takeover.incarnation
    assert again.lost is not None and "applied through sequence 4" in again.lost
    await redis.hset(MARKER, "applied", 5)
    assert (await state_at_takeover(js, redis, "queue")).lost is None


async def test_a_new_leader_checks_each_watcher_shards_ack_floor_against_its_own_applied(
    redis: aioredis.Redis, js: JetStreamContext
) -> None:
    """Two watcher shards read the stream in two interleaved streams: shard 0 acked
    through 3 while only 2 of its events are applied, shard 1 acked and applied
    through 5. One `applied` (the largest, 5) against one ack floor (the largest, 5)
    would call the state whole."""
    takeover = await state_at_takeover(js, redis, "queue")
    await publish_all(js, [make_pod(f"p{i}") for i in range(5)])  # sequences 1-5
    for shard, through in ((0, 3), (1, 5)):
        name = await take_over(js, 1, WatcherShard(2, shard))
        consumer = await js.pull_subscribe_bind(name, stream=CLUSTER_STREAM)
        msgs = await consumer.fetch(through, timeout=2)
        await msgs[through - 1].ack_sync()
    lanes = {"applied:watcher.0": 2, "applied:watcher.1": 5}
    await redis.hset(MARKER, mapping={"incarnation": takeover.incarnation, **lanes})
    again = await state_at_takeover(js, redis, "queue")
    assert again.lost is not None and "applied through sequence 2, but watcher.0" in again.lost
    await redis.hset(MARKER, "applied:watcher.0", 3)
    assert (await state_at_takeover(js, redis, "queue")).lost is None


async def test_the_log_lists_its_latest_events_and_the_binds_in_flight(
    js: JetStreamContext,
) -> None:
    await publish_all(js, [make_node("n1"), make_pod("p"), make_pod("q")])
    bound = make_pod("q", node="n1")
    await publish_pod(js, bound, "MODIFIED")
    latest = await read_latest(js)
    info = await js.stream_info(CLUSTER_STREAM)
    assert latest.cut == info.state.last_seq == 4
    assert {s: e.seq for s, e in latest.entries.items()} == {
        "ksched.cluster.nodes.n1": 1,
        "ksched.cluster.pods.default.p": 2,
        "ksched.cluster.pods.default.q": 4,
    }
    assert await pending_pods(js, {"default/p", "default/q", "default/r"}) == {
        "default/p": ("uid-default-p", 2)
    }

    def req(name: str, cycle: int) -> dict[str, object]:
        return {
            "key": f"default/{name}",
            "uid": f"uid-default-{name}",
            "seq": 2,
            "node": "n1",
            "cycle": cycle,
            "pod": make_pod(name),
            "profile": "default-scheduler",
            "assumed_at": 0.0,
        }

    await js.publish(BIND_SUBJECT, pack({"requests": [req("a", 1), req("b", 2)]}))
    await js.publish(BIND_SUBJECT, pack(req("c", 3)))
    await js.publish(BIND_SUBJECT, b"\xc1 not msgpack")
    await js.publish(BIND_SUBJECT, pack(req("d", 4)))
    binder = await js.pull_subscribe(BIND_SUBJECT, durable="binder", stream=BIND_STREAM)
    (first,) = await binder.fetch(1, timeout=2)
    await first.ack_sync()  # its binding cycle is over: no longer in flight
    found = await read_in_flight(js)
    assert [(seq, r["key"], r["cycle"]) for seq, r in found] == [
        (2, "default/c", 3),
        (4, "default/d", 4),
    ]


async def test_a_batch_of_many_fields_lands_as_written_one_by_one(
    redis: aioredis.Redis, elector: LeaderElector
) -> None:
    """A batch travels packed (fencing.py, fenced_write.lua's packed form): what lands
    is what the same commands sent argument by argument give, binary values, numbers
    and commands past the script's chunk of 1000 arguments included."""
    records = {f"default/p{i}": bytes([i % 256]) * (i % 300) + b"\x00\xff" for i in range(2500)}
    small = {"one": b"\x00", "two": 2}
    batch = elector.batch()
    batch.hset(PODS, mapping=records)
    batch.hset("small", mapping=small)
    batch.hset("meta", mapping={f"f{i}": i * 1.5 if i % 2 else 1 << 40 for i in range(10)})
    batch.zadd("generations", {f"node-{i}": i for i in range(600)})
    await batch.execute()
    assert await redis.hgetall(PODS) == {k.encode(): v for k, v in records.items()}
    assert await redis.hgetall("small") == {b"one": b"\x00", b"two": b"2"}
    assert await redis.hget("meta", "f3") == b"4.5"
    assert await redis.hget("meta", "f4") == str(1 << 40).encode()
    assert await redis.zscore("generations", "node-599") == 599
    batch = elector.batch()
    batch.hdel(PODS, *[f"default/p{i}" for i in range(2400)])
    await batch.execute()
    assert sorted(await redis.hkeys(PODS)) == sorted(
        f"default/p{i}".encode() for i in range(2400, 2500)
    )
