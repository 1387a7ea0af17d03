"""The cache's node-change feed (services/cache/feed.py) against the cache service, a
real NATS and Redis: a worker's snapshot that gets every message applies the changes
without reading Redis, and ends exactly as a snapshot read whole from Redis; one that
misses a message reads what it missed from Redis, and ends the same."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
import redis.asyncio as aioredis
from nats.aio.client import Client as NATS
from nats.aio.subscription import Subscription

from shared.framework.types import PodInfo
from shared.runtime.connections import connect_redis
from shared.runtime.rpc import request
from shared.snapshot import Snapshot
from shared.subjects import CACHE_EVENTS, NODE_CHANGES
from shared.tools.devstack import LocalStack, running
from shared.tools.synthetic import make_node, make_pod
from shared.wire import pack, unpack

pytestmark = pytest.mark.e2e

SEQ = iter(range(1, 1_000_000))


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    """Only the cache (conftest's `nc` connects to it)."""
    with running(LocalStack(tmp_path / "stack", workers=0, binders=0), ["cache"]) as st:
        yield st


def node_upsert(name: str, **labels: str) -> dict[str, Any]:
    raw = make_node(name, cpu="8")
    raw["metadata"].setdefault("labels", {}).update(labels)
    return {"op": "node_upsert", "name": name, "node": raw, "seq": next(SEQ)}


def pod_upsert(name: str, node: str) -> dict[str, Any]:
    pod = make_pod(name, cpu="1")
    pod["spec"]["nodeName"] = node
    key = f"default/{name}"
    uid = pod["metadata"]["uid"]
    return {
        "op": "pod_upsert",
        "name": key,
        "uid": uid,
        "node_name": node,
        "pod": pod,
        "seq": next(SEQ),
    }


def pod_delete(name: str) -> dict[str, Any]:
    return {"op": "pod_delete", "name": f"default/{name}", "seq": next(SEQ)}


def node_delete(name: str) -> dict[str, Any]:
    return {"op": "node_delete", "name": name, "seq": next(SEQ)}


async def apply(nc: NATS, feed: Subscription, *events: dict[str, Any]) -> bytes:
    """Apply `events` at the cache (written to Redis when this returns); the feed's
    message of that write. Retried while nobody answers: the cache reports ready a
    moment before it subscribes (shared/tools/bench/refresh.py does the same)."""
    for _ in range(100):
        try:
            reply = await request(nc, CACHE_EVENTS, {"events": list(events)}, timeout=30)
            break
        except nats.errors.NoRespondersError:
            await asyncio.sleep(0.2)
    assert not reply["failed"], reply
    return (await feed.next_msg(timeout=10)).data


def state(snapshot: Snapshot) -> dict[str, Any]:
    """What plugins read of each node, and the columns the cycle reads."""
    columns = snapshot.cluster().columns
    return {
        name: (
            info.generation,
            info.raw_node,
            {key: pod.version for key, pod in info.pods.items()},
            dict(info.requested),
            columns.requested("cpu")[columns.index[name]] if name in columns.index else None,
        )
        for name, info in snapshot.nodes.items()
    }


async def read_whole(stack: LocalStack) -> dict[str, Any]:
    redis = connect_redis(stack.redis_url)
    try:
        fresh = Snapshot(redis)
        await fresh.refresh()
        return state(fresh)
    finally:
        await redis.aclose()


@pytest.fixture
async def redis(stack: LocalStack) -> AsyncIterator[aioredis.Redis]:
    client = connect_redis(stack.redis_url)
    yield client
    await client.aclose()


async def warm(nc: NATS, redis: aioredis.Redis) -> tuple[Snapshot, Subscription]:
    """A snapshot of four nodes with pods, read from Redis; the feed subscribed."""
    feed = await nc.subscribe(NODE_CHANGES)
    await nc.flush()
    await apply(nc, feed, *(node_upsert(f"n{i}") for i in range(4)))
    await apply(nc, feed, *(pod_upsert(f"p{i}-{j}", f"n{i}") for i in range(4) for j in range(2)))
    snapshot = Snapshot(redis)
    await snapshot.refresh()
    return snapshot, feed


async def test_node_changes_reach_the_snapshot_without_reading_redis(
    stack: LocalStack, nc: NATS, redis: aioredis.Redis
) -> None:
    snapshot, feed = await warm(nc, redis)
    rounds = [
        [pod_upsert("new-0", "n0")],  # a pod added
        [pod_delete("p1-0")],  # one removed
        [pod_upsert("new-0", "n0"), pod_upsert("new-1", "n1")],  # a new version, a new pod
        [node_upsert("n2", tier="gold")],  # the node object changed
        [pod_upsert("p3-0", "n3"), pod_delete("p3-0"), pod_delete("p3-1")],  # several
        [node_upsert("n4")],  # a new node
        [pod_delete("p2-0"), pod_delete("p2-1"), node_delete("n2")],  # a node gone
    ]
    for events in rounds:
        snapshot.receive(await apply(nc, feed, *events))
        read = snapshot.read
        await snapshot.refresh()
        assert snapshot.read == read, events  # nothing read from Redis
        assert state(snapshot) == await read_whole(stack), events
    assert snapshot.fed > 0


async def test_a_missed_node_change_is_read_from_redis(
    stack: LocalStack, nc: NATS, redis: aioredis.Redis
) -> None:
    snapshot, feed = await warm(nc, redis)
    await apply(nc, feed, pod_upsert("lost", "n0"), pod_delete("p1-0"))  # never received
    snapshot.receive(await apply(nc, feed, pod_upsert("after", "n0")))
    read = snapshot.read
    await snapshot.refresh()
    assert snapshot.read > read  # the gap: n0 and n1 read from Redis
    assert {"default/lost", "default/after"} <= set(snapshot.nodes["n0"].pods)
    assert "default/p1-0" not in snapshot.nodes["n1"].pods
    assert state(snapshot) == await read_whole(stack)
    # and the messages after the Redis read apply again
    snapshot.receive(await apply(nc, feed, pod_upsert("later", "n1")))
    read = snapshot.read
    await snapshot.refresh()
    assert snapshot.read == read
    assert state(snapshot) == await read_whole(stack)


async def test_a_change_to_a_copy_newer_than_the_message_is_not_applied_back(
    stack: LocalStack, nc: NATS, redis: aioredis.Redis
) -> None:
    """A node re-read by name (`reload`, after a refused assume) may be newer than the
    messages not applied yet: they do not take it back."""
    snapshot, feed = await warm(nc, redis)
    first = await apply(nc, feed, pod_upsert("a", "n0"))
    second = await apply(nc, feed, pod_upsert("b", "n0"))
    await snapshot.reload(redis, {"n0"})
    snapshot.receive(first)
    snapshot.receive(second)
    await snapshot.refresh()
    assert {"default/a", "default/b"} <= set(snapshot.nodes["n0"].pods)
    assert state(snapshot) == await read_whole(stack)


async def test_a_local_assumption_survives_a_change_and_ends_with_its_commit(
    stack: LocalStack, nc: NATS, redis: aioredis.Redis
) -> None:
    """A pod this worker assumed (not yet committed) stays counted on its node across a
    delta that does not have it, and is held by the cache's copy once a delta has it."""
    snapshot, feed = await warm(nc, redis)
    event = pod_upsert("mine", "n0")
    mine = PodInfo.of(event["pod"], 0)
    snapshot.assume(mine, "n0")
    snapshot.receive(await apply(nc, feed, pod_upsert("theirs", "n0")))
    await snapshot.refresh()
    assert {"default/mine", "default/theirs"} <= set(snapshot.nodes["n0"].pods)
    assert snapshot.uncommitted() == {"default/mine"}
    snapshot.receive(await apply(nc, feed, event))
    await snapshot.refresh()
    assert snapshot.uncommitted() == set()
    assert state(snapshot) == await read_whole(stack)


async def test_a_change_to_another_copy_of_the_node_is_read_from_redis(
    stack: LocalStack, nc: NATS, redis: aioredis.Redis
) -> None:
    """A delta made against another copy of the node than the snapshot's (its base
    generation is not the copy's): that node is read by name from Redis, in the same
    round trip, and the rest of the message still applies."""
    snapshot, feed = await warm(nc, redis)
    msg = unpack(await apply(nc, feed, pod_upsert("x", "n0"), pod_upsert("y", "n1")))
    entries = {entry[0]: entry for entry in msg["n"]}
    assert entries["n0"][2] == entries["n1"][2] == 2  # deltas
    entries["n0"][3] -= 1  # made against an older copy than the snapshot's
    snapshot.receive(pack(msg))
    read = snapshot.read
    await snapshot.refresh()
    assert snapshot.read == read + 1  # n0 alone
    assert "default/x" in snapshot.nodes["n0"].pods
    assert state(snapshot) == await read_whole(stack)


def count_redis_reads(snapshot: Snapshot) -> list[None]:
    """One entry per Redis read of the snapshot's refreshes, from now on."""
    reads: list[None] = []
    script = snapshot._script

    async def counted(**kwargs: Any) -> Any:
        reads.append(None)
        return await script(**kwargs)

    snapshot._script = counted  # type: ignore[assignment]
    return reads


async def test_catching_up_takes_the_feed_alone_unless_it_missed_a_change(
    stack: LocalStack, nc: NATS, redis: aioredis.Redis
) -> None:
    """A worker's lane reads Redis while its pop waits; the popped batch then takes only
    the feed's messages since (Snapshot.catch_up), without a round trip, unless the
    feed missed one."""
    snapshot, feed = await warm(nc, redis)
    reads = count_redis_reads(snapshot)
    snapshot.receive(await apply(nc, feed, pod_upsert("fed", "n0")))
    await snapshot.catch_up()
    assert reads == [] and "default/fed" in snapshot.nodes["n0"].pods
    assert state(snapshot) == await read_whole(stack)
    await apply(nc, feed, pod_upsert("lost", "n1"))  # never received
    snapshot.receive(await apply(nc, feed, pod_upsert("after", "n0")))
    await snapshot.catch_up()
    assert len(reads) == 1  # the gap: Redis read
    assert state(snapshot) == await read_whole(stack)
    snapshot.receive(await apply(nc, feed, pod_upsert("later", "n1")))
    await snapshot.catch_up()
    assert len(reads) == 1  # past the gap, the feed alone again
    assert state(snapshot) == await read_whole(stack)
