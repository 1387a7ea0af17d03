"""The worker's snapshot against a real Redis: a refresh that races another lane's
uncommitted local assumption keeps it (it was dropped before, costing conflicts); a
new incarnation of the cache's state is read whole, and a lost one leaves the
snapshot as it is."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from shared import keys
from shared.framework.types import NodeInfo, PodInfo
from shared.snapshot import Snapshot
from shared.tools.synthetic import make_node, make_pod
from shared.wire import pack

pytestmark = pytest.mark.e2e


async def write_node(
    redis: aioredis.Redis, info: NodeInfo, generation: int, incarnation: int = 1
) -> None:
    """What the cache service writes for a changed node (in its state's incarnation)."""
    await redis.hset(keys.state_key("cache"), "incarnation", incarnation)
    info.generation = generation
    await redis.hset(keys.CACHE_NODEINFO, info.name, pack(info.to_record()))
    await redis.zadd(keys.CACHE_GENERATIONS, {info.name: generation})


def node(name: str, *pods: PodInfo) -> NodeInfo:
    info = NodeInfo(name)
    info.set_node(make_node(name, cpu="4"))
    for pod in pods:
        info.add_pod(pod)
    return info


async def test_a_racing_refresh_keeps_uncommitted_local_assumptions(
    redis: aioredis.Redis,
) -> None:
    committed = PodInfo.of(make_pod("committed", cpu="1"), 1)
    local = PodInfo.of(make_pod("local", cpu="1"), 2)
    await write_node(redis, node("n1"), 1)
    snapshot = Snapshot(redis)
    await snapshot.refresh()
    snapshot.cluster()
    # Another worker's pod lands on n1 in the cache while this worker's lane A has
    # assumed `local` on n1 locally, not yet committed.
    await write_node(redis, node("n1", committed), 2)

    async def lane_a() -> None:
        await asyncio.sleep(0)  # lane B's refresh is in flight
        snapshot.assume(local, "n1")

    await asyncio.gather(snapshot.refresh(), lane_a())
    pods = snapshot.nodes["n1"].pods
    assert set(pods) == {committed.key, local.key}
    columns = snapshot.cluster().columns
    assert columns.requested("cpu")[columns.index["n1"]] == 2000

    # Once the cache's record shows the pod, it is no longer carried locally ...
    await write_node(redis, node("n1", committed, local), 3)
    await snapshot.refresh()
    assert set(snapshot.nodes["n1"].pods) == {committed.key, local.key}
    # ... so a later record without it (the pod deleted) is believed.
    await write_node(redis, node("n1", committed), 4)
    await snapshot.refresh()
    assert set(snapshot.nodes["n1"].pods) == {committed.key}


async def test_a_forgotten_assumption_is_not_put_back(redis: aioredis.Redis) -> None:
    local = PodInfo.of(make_pod("local", cpu="1"), 2)
    await write_node(redis, node("n1"), 1)
    snapshot = Snapshot(redis)
    await snapshot.refresh()
    snapshot.assume(local, "n1")
    snapshot.forget(local, "n1")  # the cache refused it
    await write_node(redis, node("n1"), 2)
    await snapshot.refresh()
    assert snapshot.nodes["n1"].pods == {}


async def test_a_pod_out_again_drops_its_earlier_attempts_room(redis: aioredis.Redis) -> None:
    """Attempt 1's assume is out (its lane awaits an answer that died with a NATS
    server); the queue's lease on it lapses and the pod goes out again as attempt 2. The
    earlier room is no longer counted (it was, for the 10 s of the assume's timeout:
    pods turned away with "Insufficient cpu" at test_nats_cluster's lease-bucket kill),
    and attempt 1's late undo leaves attempt 2's room alone."""
    pod = PodInfo.of(make_pod("p", cpu="3"), 1)
    await write_node(redis, node("n1"), 1)
    await write_node(redis, node("n2"), 1)
    snapshot = Snapshot(redis)
    await snapshot.refresh()
    snapshot.assume(pod, "n1", cycle=1)
    snapshot.supersede(pod.key, 2)  # popped again, before its Filter
    assert snapshot.nodes["n1"].pods == {}
    snapshot.assume(pod, "n2", cycle=2)
    snapshot.forget(pod, "n1", cycle=1)  # attempt 1's assume timed out: undone
    assert snapshot.nodes["n1"].pods == {}
    assert set(snapshot.nodes["n2"].pods) == {pod.key}
    assert snapshot.uncommitted() == {pod.key}


async def committed_locally(redis: aioredis.Redis, pod: PodInfo, generation: int) -> Snapshot:
    """A snapshot of n1 (empty, generation 1) in which `pod` was assumed and then
    committed by the cache at `generation`."""
    await write_node(redis, node("n1"), 1)
    snapshot = Snapshot(redis)
    await snapshot.refresh()
    snapshot.assume(pod, "n1")
    snapshot.committed(pod.key, generation)
    return snapshot


async def test_a_local_assumption_is_uncommitted_until_the_cache_commits_it(
    redis: aioredis.Redis,
) -> None:
    """What Permit must not count yet (another lane's pod whose assume is still out)."""
    mine, theirs = PodInfo.of(make_pod("mine", cpu="1"), 1), PodInfo.of(make_pod("t"), 2)
    snapshot = await committed_locally(redis, mine, 2)
    snapshot.assume(theirs, "n1")
    assert snapshot.uncommitted() == {theirs.key}
    snapshot.committed(theirs.key, None)  # a cache that does not say the generation
    assert snapshot.uncommitted() == set()


async def test_a_committed_assumption_deleted_before_any_refresh_is_not_put_back(
    redis: aioredis.Redis,
) -> None:
    """The pod is committed (generation 2) and deleted (generation 3) before this worker
    refreshes again: the record it then reads is newer than the commit, so the pod is
    gone. (Putting it back left a phantom pod on the node, and a preemptor that saw it
    there was parked with nothing left to move it.)"""
    local = PodInfo.of(make_pod("local", cpu="3"), 2)
    snapshot = await committed_locally(redis, local, 2)
    await write_node(redis, node("n1"), 3)
    await snapshot.refresh()
    assert snapshot.nodes["n1"].pods == {}
    assert snapshot.cluster().columns.requested("cpu")[0] == 0


async def test_an_older_record_read_after_the_commit_keeps_the_assumption(
    redis: aioredis.Redis,
) -> None:
    """A record from before the commit (a refresh that raced it) still lacks the pod."""
    local = PodInfo.of(make_pod("local", cpu="3"), 2)
    snapshot = await committed_locally(redis, local, 5)
    await write_node(redis, node("n1"), 4)
    await snapshot.refresh()
    assert set(snapshot.nodes["n1"].pods) == {local.key}


async def test_nodes_added_and_removed_reshape_the_columns(redis: aioredis.Redis) -> None:
    """The columns follow a node coming and another going (rows copied, not rebuilt)."""
    pod = PodInfo.of(make_pod("p", cpu="1"), 1)
    for i, info in enumerate([node("n1", pod), node("n2"), node("n3")]):
        await write_node(redis, info, i + 1)
    snapshot = Snapshot(redis)
    await snapshot.refresh()
    before = snapshot.cluster().columns
    await redis.hdel(keys.CACHE_NODEINFO, "n2")
    await redis.zadd(keys.CACHE_GENERATIONS, {"n2": 4})
    await write_node(redis, node("n4", PodInfo.of(make_pod("q", cpu="2"), 2)), 5)
    await snapshot.refresh()
    columns = snapshot.cluster().columns
    assert columns is not before
    assert [i.name for i in columns.infos] == ["n1", "n3", "n4"]
    assert columns.requested("cpu").tolist() == [1000, 0, 2000]
    assert columns.num_pods.tolist() == [1, 0, 1]


async def test_concurrent_refreshes_read_each_change_once(redis: aioredis.Redis) -> None:
    """Two lanes refreshing at once (at start, say): the second waits and reads only
    what came since, not every node again."""
    for i in range(20):
        await write_node(redis, node(f"n{i:02d}"), i + 1)
    snapshot = Snapshot(redis)
    counts = await asyncio.gather(snapshot.refresh(), snapshot.refresh())
    assert sorted(counts) == [0, 20]
    assert len(snapshot.nodes) == 20


async def test_a_new_incarnation_is_read_whole(redis: aioredis.Redis) -> None:
    """The cache's state written anew (a new leader, or rebuilt after Redis lost it):
    its generations start over, lower than the worker's. Every node is read again, and
    a node the new state lacks is dropped. (A worker used to wait for generations above
    the ones it had seen, and never saw a new node again.)"""
    pod = PodInfo.of(make_pod("p", cpu="1"), 1)
    for i, name in enumerate(["n1", "n2", "n3"]):
        await write_node(redis, node(name), 10 + i)
    snapshot = Snapshot(redis)
    await snapshot.refresh()
    assert snapshot.generation == 12
    await redis.delete(keys.CACHE_GENERATIONS, keys.CACHE_NODEINFO)
    await write_node(redis, node("n1", pod), 1, incarnation=2)
    await write_node(redis, node("n4"), 2, incarnation=2)
    assert await snapshot.refresh() == 4  # n1 and n4 read, n2 and n3 dropped
    assert sorted(snapshot.nodes) == ["n1", "n4"]
    assert set(snapshot.nodes["n1"].pods) == {pod.key}
    assert (snapshot.incarnation, snapshot.generation) == (2, 2)
    await write_node(redis, node("n5"), 3, incarnation=2)
    assert await snapshot.refresh() == 1
    assert sorted(snapshot.nodes) == ["n1", "n4", "n5"]


async def test_while_redis_holds_no_cache_state_the_snapshot_stays(
    redis: aioredis.Redis,
) -> None:
    await write_node(redis, node("n1"), 1)
    snapshot = Snapshot(redis)
    await snapshot.refresh()
    await redis.flushall()  # the cache is writing its state again
    assert await snapshot.refresh() == 0
    assert sorted(snapshot.nodes) == ["n1"]


async def test_a_refresh_counts_room_freed_not_room_taken(redis: aioredis.Redis) -> None:
    """What a worker asks after turning pods away: did the cache free room (a pod gone
    from a node, a node new) since it read? A pod added or kept frees nothing."""
    a = PodInfo.of(make_pod("a", cpu="1"), 1)
    b = PodInfo.of(make_pod("b", cpu="1"), 2)
    await write_node(redis, node("n1", a), 1)
    snapshot = Snapshot(redis)
    await snapshot.refresh()
    freed = snapshot.freed  # the first read finds every node new
    await write_node(redis, node("n1", a, b), 2)  # room taken
    await snapshot.refresh()
    assert snapshot.freed == freed
    await write_node(redis, node("n1", b), 3)  # a forgotten or deleted: room freed
    await snapshot.refresh()
    assert snapshot.freed == freed + 1
    await write_node(redis, node("n2"), 4)  # a new node: room too
    await snapshot.refresh()
    assert snapshot.freed == freed + 2
