"""Queue shards (docs/scale.md §4, shared/sharding.py QueueShard): with N watcher and
queue shards, each with a leader and a standby, queue shard s holds the pods of watcher
shard s's partitions; workers pop from every shard. One queue shard's leader killed
mid-run is replaced by its own standby, which takes over that shard alone: every pod is
bound once, none lost, no node overcommitted."""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats
import pytest
import redis.asyncio as aioredis

from shared import keys
from shared.runtime.watermark import read_marker
from shared.sharding import QueueShard, pod_key_owner
from shared.tools.client import PodTracker, publish_all, publish_pod
from shared.tools.devstack import running
from shared.tools.synthetic import make_node, make_pod
from tests.conftest import make_test_stack
from tests.e2e.test_watcher_shards import cluster, metric_total, run_with_kill

pytestmark = pytest.mark.e2e

KILLED = 1  # the queue shard whose leader is killed


def incoming_pods(http_port: int) -> float:
    """The pods a queue leader took in."""
    return metric_total(http_port, "scheduler_queue_incoming_pods_total")


async def incarnations(redis: aioredis.Redis, shards: int) -> dict[int, int]:
    """Each queue shard's state incarnation, by its own marker."""
    lanes = {s: QueueShard(shards, s).lane for s in range(shards)}
    return {s: (await read_marker(redis, lane)).incarnation for s, lane in lanes.items()}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("shards", [2, 3])
async def test_a_killed_queue_shard_leader_hands_over_its_shard_alone(
    tmp_path: Path, shards: int
) -> None:
    nodes, pods = cluster()
    stack = make_test_stack(tmp_path / "stack")
    stack.shards, stack.standbys = shards, 1
    stack.env["KSCHED_LOG_LEVEL"] = "info"
    with running(stack):
        nc = await nats.connect(stack.nats_url, max_reconnect_attempts=-1)
        redis = aioredis.from_url(stack.redis_url)
        try:
            tracker = PodTracker()
            await tracker.start(nc)
            leaders = {s: await asyncio.to_thread(stack.leader, "queue", s) for s in range(shards)}
            assert all(leaders.values()), leaders
            before = await incarnations(redis, shards)
            assert all(before.values()), before  # each shard keeps its own state
            assert await redis.get(keys.lease_epoch_key(f"queue.{KILLED}")) is not None
            await run_with_kill(nc, stack, tracker, leaders[KILLED], (nodes, pods))
            after = await incarnations(redis, shards)
            for s in range(shards):  # only the killed shard has a new incarnation
                assert (after[s] == before[s]) == (s != KILLED), (before, after)
                if s != KILLED:  # and the others' leaders led throughout, pods coming in
                    assert (await asyncio.to_thread(stack.leader, "queue", s)) is leaders[s]
                    assert await asyncio.to_thread(incoming_pods, leaders[s].http_port) > 0
            successor = await asyncio.to_thread(stack.leader, "queue", KILLED)
            assert successor is not None and successor is not leaders[KILLED]
            # the kill struck mid-run: the successor had its shard's pods left to take in
            assert await asyncio.to_thread(incoming_pods, successor.http_port) > 0
        finally:
            await redis.aclose()
            await nc.close()


def name_in_shard(prefix: str, shard: int, shards: int) -> str:
    """A pod name in namespace default whose queue shard is `shard`."""
    return next(
        f"{prefix}-{i}"
        for i in range(1000)
        if pod_key_owner(shards, f"default/{prefix}-{i}") == shard
    )


@pytest.mark.timeout(180)
async def test_a_nomination_on_one_shard_keeps_its_room_from_another_shard_s_pod(
    tmp_path: Path,
) -> None:
    """Preemption across queue shards: the preemptor (shard 0) is nominated to the node
    its victim leaves; a lower-priority pod of shard 1 that would fit there must not take
    that room (workers merge every shard's nominated pods; the cache refuses the rest)."""
    high, sneaky = name_in_shard("high", 0, 2), name_in_shard("sneaky", 1, 2)
    stack = make_test_stack(tmp_path / "stack")
    stack.shards = 2
    with running(stack):
        nc = await nats.connect(stack.nats_url)
        try:
            js = nc.jetstream()
            tracker = PodTracker()
            await tracker.start(nc)
            await publish_all(js, [make_node("only", cpu="1", memory="16Gi")])
            low = [make_pod(f"low-{i}", cpu="500m", priority=0, node="only") for i in range(2)]
            await publish_all(js, low)
            assert await tracker.wait_until(lambda t: len(t.bound()) == 2, timeout=15)

            await publish_pod(js, make_pod(high, cpu="500m", priority=1000))
            nominated = f"default/{high}"
            assert await tracker.wait_until(
                lambda t: (p := t.pods.get(nominated)) is not None and p.nominated == "only",
                timeout=15,
            )
            await publish_pod(js, make_pod(sneaky, cpu="500m", priority=0))
            assert await tracker.wait_until(
                lambda t: (
                    t.bound().get(nominated) == "only" and f"default/{sneaky}" in t.unschedulable()
                ),
                timeout=30,
            ), (tracker.pods.get(nominated), tracker.pods.get(f"default/{sneaky}"))
            assert f"default/{sneaky}" not in tracker.bound()
            assert len(tracker.deleted()) == 1
            assert tracker.pods[nominated].bind_count == 1
        finally:
            await nc.close()
