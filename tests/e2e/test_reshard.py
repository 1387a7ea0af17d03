"""Shards come and go by configuration (issue 21 item 2, docs/scale.md §4 "Join, leave,
failover"): the whole ksched is stopped (or killed) and started again with another
`KSCHED_SHARDS`, or the new count's instances start beside the old ones, which then
stop one by one (a rolling update). Pods the old shards held (pending, parked as
unschedulable) and pods published while nothing ran, or while both counts ran, are each
bound exactly once; no node is overcommitted and every queue shard of the new count
holds its own pods."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import nats
import pytest
import redis.asyncio as aioredis
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from shared import keys
from shared.sharding import pod_key_owner, queue_shards
from shared.tools.client import PodTracker, publish_all, publish_node
from shared.tools.devstack import SERVICES, LocalStack, running
from shared.tools.synthetic import make_node, make_pod
from shared.wire import text
from tests.conftest import make_test_stack
from tests.e2e.test_redis_loss import assert_invariants

pytestmark = pytest.mark.e2e

NAMESPACES = ("default", "team-a", "team-b")


def pods(prefix: str, count: int) -> list[dict[str, Any]]:
    return [
        make_pod(f"{prefix}-{i:03d}", cpu="500m", namespace=NAMESPACES[i % len(NAMESPACES)])
        for i in range(count)
    ]


def stop(stack: LocalStack, how: signal.Signals) -> None:
    """Every service process ended by `how` (SIGTERM: a rolling change of configuration;
    SIGKILL: a crash, then started with the new one)."""
    for svc in stack.services:
        if svc.proc.poll() is None:
            svc.proc.send_signal(how)
    stack.stop_services()


async def filled_and_parked(
    nc: NATS, nodes: list[dict[str, Any]], first: list[dict[str, Any]]
) -> tuple[PodTracker, JetStreamContext]:
    """The 4 small nodes and the 80 first pods published: 32 bound, the 48 others
    parked as unschedulable, waiting for room."""
    tracker = PodTracker()
    await tracker.start(nc)
    js = nc.jetstream()
    for node in nodes:
        await publish_node(js, node)
    await publish_all(js, first)
    assert await tracker.wait_until(
        lambda t: len(t.bound()) == 32 and len(t.unschedulable()) == 48, timeout=60
    ), (len(tracker.bound()), len(tracker.unschedulable()))
    return tracker, js


async def held_by_shard(redis: aioredis.Redis, shards: int) -> dict[int, set[str]]:
    """The pods each queue shard of `shards` holds in Redis."""
    held: dict[int, set[str]] = {}
    for q in queue_shards(shards):
        names = await redis.hkeys(keys.queue_pods_key(q.lane))
        held[q.shard] = {text(n) for n in names}
    return held


@pytest.mark.timeout(400)
@pytest.mark.parametrize(
    ("counts", "how"),
    [((1, 3, 2), signal.SIGTERM), ((2, 3), signal.SIGKILL)],
    ids=["1-3-2-term", "2-3-kill"],
)
async def test_a_new_shard_count_binds_every_pod_once(
    tmp_path: Path, counts: tuple[int, ...], how: signal.Signals
) -> None:
    """Going from 3 shards to 2 or from 2 to 3, shards 0 and 1 find in Redis the state
    they kept under the other count, holding pods another shard now owns: they must
    build theirs anew (the shard layout in the state marker), or those pods are held
    twice. (Back to an earlier count, 1 → 2 → 1, Redis holds a state as old as its
    watcher lane's position: consistent, and taken up.)"""
    # 4 nodes of 4 cpu: 32 pods of 500m fit; the others wait, parked, for the big node
    nodes = [make_node(f"n{i}", cpu="4", memory="16Gi") for i in range(4)]
    big = make_node("big", cpu="64", memory="128Gi")
    first = pods("early", 80)
    published = list(first)
    stack = make_test_stack(tmp_path / "stack")
    stack.shards = counts[0]
    with running(stack):
        nc = await nats.connect(stack.nats_url, max_reconnect_attempts=-1)
        redis = aioredis.from_url(stack.redis_url)
        try:
            tracker, js = await filled_and_parked(nc, nodes, first)

            for step, shards in enumerate(counts[1:]):
                await asyncio.to_thread(stop, stack, how)
                more = pods(f"late{step}", 20)
                await publish_all(js, more)  # while no service runs
                published += more
                stack.shards = shards
                await asyncio.to_thread(stack.start_services)
                await asyncio.to_thread(stack.wait_ready, 60)
                # after a kill, the old leaders' leases run out first (kube's 15 s)
                leaders = await asyncio.to_thread(stack.wait_shard_leaders, "queue", 60)
                assert all(leaders), leaders
                await holds_each_pending_pod_once(redis, shards, published, tracker)

            await publish_node(js, big)
            await assert_invariants(stack, tracker, [*nodes, big], published)
        finally:
            await redis.aclose()
            await nc.close()


async def holds_each_pending_pod_once(
    redis: aioredis.Redis, shards: int, published: list[dict[str, Any]], tracker: PodTracker
) -> None:
    """The queue shards of `shards` hold every pod not bound, each pod in its own
    shard alone, and nothing else (no pod bound long ago, kept from an earlier count)."""
    bound = set(tracker.bound())
    pending = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in published} - bound

    async def taken_in() -> dict[int, set[str]]:
        while True:
            held = await held_by_shard(redis, shards)
            if set().union(*held.values()) >= pending:
                return held
            await asyncio.sleep(0.2)

    try:
        held = await asyncio.wait_for(taken_in(), timeout=60)
    except TimeoutError:
        held = await held_by_shard(redis, shards)
        missing = pending - set().union(*held.values())
        owners = {k: pod_key_owner(shards, k) for k in sorted(missing)}
        raise AssertionError(f"{len(missing)} pending pods held by no shard: {owners}") from None
    every = [k for names in held.values() for k in names]
    assert len(every) == len(set(every)), "a pod held by two shards"
    assert set(every) == pending, (sorted(set(every) - pending)[:5], len(pending))
    for s, names in held.items():
        assert all(pod_key_owner(shards, k) == s for k in names if shards > 1), (s, names)
    if shards > 1:
        assert all(held.values()), held  # the pending pods spread over every shard


@pytest.mark.timeout(400)
@pytest.mark.parametrize(
    ("counts", "how"),
    [
        ((2, 3), signal.SIGTERM),
        ((3, 2), signal.SIGTERM),
        ((1, 2), signal.SIGTERM),
        ((2, 3), signal.SIGKILL),
    ],
    ids=["2-3", "3-2", "1-2", "2-3-kill"],
)
async def test_a_rolling_change_of_the_shard_count_binds_every_pod_once(
    tmp_path: Path, counts: tuple[int, int], how: signal.Signals
) -> None:
    """A shard count changed as a rolling update does it: every instance of the new
    count starts while the old ones still run (a new shard whose lane an old leader
    holds stands by behind it; a lane new to this count leads at once), pods are
    published during the overlap, and the old instances are stopped one at a time. The
    two layouts overlap meanwhile (a pod can be held by an old shard and by a new one):
    still no pod is lost or bound twice, no node is overcommitted, and the new count's
    shards end up holding their own pending pods (docs/scale.md §4, "Join, leave,
    failover"). The NATS servers map the partitions throughout (with one shard too):
    the mapping is server configuration, set before the change. Killed instead of
    stopped, each old leader's lanes wait for its lease to run out, then the new
    count's standby takes them over."""
    nodes = [make_node(f"n{i}", cpu="4", memory="16Gi") for i in range(4)]
    mid = make_node("mid", cpu="8", memory="32Gi")  # room for 16 while both layouts run
    big = make_node("big", cpu="64", memory="128Gi")
    first = pods("early", 80)
    published = list(first)
    stack = make_test_stack(tmp_path / "stack")
    stack.shards, stack.partitioned = counts[0], True
    with running(stack):
        nc = await nats.connect(stack.nats_url, max_reconnect_attempts=-1)
        redis = aioredis.from_url(stack.redis_url)
        try:
            tracker, js = await filled_and_parked(nc, nodes, first)

            old = list(stack.services)
            stack.shards = counts[1]
            for name in SERVICES:  # the new count's instances, beside the old ones
                for _ in range(stack.replicas(name)):
                    stack.start_service(name)
            await asyncio.to_thread(stack.wait_ready, 60)
            during = pods("during", 30)
            await publish_all(js, during)
            published += during
            await publish_node(js, mid)  # parked pods of both layouts wake for its room
            assert await tracker.wait_until(lambda t: len(t.bound()) == 48, timeout=60), len(
                tracker.bound()
            )
            for i, svc in enumerate(old):  # the old instances go one by one, pods arriving
                await asyncio.to_thread(stack.stop_service, svc, how)
                more = pods(f"after-{i}-{svc.name}", 2)
                await publish_all(js, more)
                published += more
            leaders = await asyncio.to_thread(stack.wait_shard_leaders, "queue", 60)
            assert all(leaders), leaders
            await holds_each_pending_pod_once(redis, counts[1], published, tracker)

            await publish_node(js, big)
            await assert_invariants(stack, tracker, [*nodes, mid, big], published)
        finally:
            await redis.aclose()
            await nc.close()
