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
from shared.sharding import QueueShard
from shared.tools.client import PodTracker
from shared.tools.devstack import running
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
