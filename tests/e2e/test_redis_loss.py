"""Redis loses data mid-run (docs/reliability.md, "Redis data loss"): queue and cache
notice and rebuild from the log; no pod is lost or bound twice, no node overcommitted,
and the workers still see nodes added afterwards."""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
import pytest
import redis.asyncio as aioredis
from nats.aio.client import Client as NATS

from shared.api.models import key_of
from shared.runtime.watermark import read_marker
from shared.sharding import QueueShard
from shared.tools.client import PodTracker, publish_all
from shared.tools.devstack import LEADER_ELECTED, LocalStack, running
from shared.tools.invariants import audit
from shared.tools.observe import read_commits
from shared.tools.servers import restart
from shared.tools.synthetic import HOSTNAME, make_node, make_pod
from tests.conftest import make_test_stack
from tests.e2e.state import eventually

pytestmark = pytest.mark.e2e

NODES = 50
PODS = 3000
# Pods arrive CHUNK at a time every PACE seconds (about 10 s for all): the fault
# strikes while they do, and a failover after it finds work left to do.
CHUNK = 100
PACE = 0.3
# A pod is 100m and the nodes hold exactly PODS of them: a cache that forgets bound
# pods overcommits nodes at once.
NODE_CPU = "6"

Fault = Callable[[LocalStack], Awaitable[None]]


def loss_stack(workdir: Path, *, persist: bool = False, shards: int = 1) -> LocalStack:
    """Two workers and binders; watcher and queue (each shard) and cache with a standby
    each (a leader that loses its lease with the data hands over)."""
    stack = make_test_stack(workdir)
    stack.standbys = 1
    stack.shards = shards
    stack.persist = persist
    stack.env["KSCHED_LOG_LEVEL"] = "info"
    return stack


async def flushall(stack: LocalStack) -> None:
    client = aioredis.from_url(stack.redis_url)
    try:
        await client.flushall()
    finally:
        await client.aclose()


async def restore_older_aof(stack: LocalStack, *, with_leaders: bool = False) -> None:
    """What `appendfsync everysec` allows on a host crash: Redis comes back with its
    append-only file as it was about a second before it died (`with_leaders`: the
    leaders of watcher, queue and cache die with it, as on the same host)."""
    assert stack.redis is not None
    aof = stack.workdir / "appendonlydir"
    older = stack.workdir / "appendonlydir-older"
    await asyncio.to_thread(shutil.copytree, aof, older)
    await asyncio.sleep(1.0)  # writes the copy misses
    victims = [stack.redis.proc]
    if with_leaders:
        victims += [await leader(stack, name) for name in LEADER_ELECTED]
    for proc in victims:
        proc.send_signal(signal.SIGKILL)
    await asyncio.to_thread(stack.redis.proc.wait)
    await asyncio.to_thread(shutil.rmtree, aof)
    await asyncio.to_thread(older.rename, aof)
    stack.redis = await asyncio.to_thread(restart, stack.redis)


async def leader(stack: LocalStack, name: str) -> subprocess.Popen[bytes]:
    svc = await asyncio.to_thread(stack.leader, name)
    assert svc is not None, f"no {name} leader"
    return svc.proc


async def host_crash(stack: LocalStack) -> None:
    await restore_older_aof(stack, with_leaders=True)


async def rollback_then_failover(stack: LocalStack) -> None:
    """Redis alone goes back a second; a while later queue and cache fail over: their
    standbys must find a whole state in Redis."""
    await restore_older_aof(stack)
    await asyncio.sleep(0.5)
    for name in ("queue", "cache"):
        (await leader(stack, name)).send_signal(signal.SIGKILL)


def loss_cluster() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [make_node(f"n{i:02d}", cpu=NODE_CPU, memory="64Gi") for i in range(NODES)]
    pods = [make_pod(f"p-{i:04d}", cpu="100m", memory="64Mi") for i in range(PODS)]
    return nodes, pods


async def publish_with_fault(
    nc: NATS,
    stack: LocalStack,
    tracker: PodTracker,
    fault: Fault,
    cluster: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = None,
    *,
    chunk: int = CHUNK,
    pace: float = PACE,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Publish the nodes, then the pods `chunk` at a time every `pace` seconds; strike
    once a quarter are bound."""
    js = nc.jetstream()
    nodes, pods = cluster or loss_cluster()
    await publish_all(js, nodes)

    async def publish() -> None:
        for start in range(0, len(pods), chunk):
            await publish_all(js, pods[start : start + chunk])
            await asyncio.sleep(pace)

    async def strike() -> None:
        assert await tracker.wait_until(lambda t: len(t.bound()) >= len(pods) // 4, timeout=60)
        await fault(stack)

    await asyncio.gather(publish(), strike())
    return nodes, pods


async def assert_invariants(
    stack: LocalStack,
    tracker: PodTracker,
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
) -> None:
    raw = {key_of(p): p for p in pods}

    def bound_count(t: PodTracker) -> int:
        return sum(1 for k in raw if (v := t.pods.get(k)) is not None and v.node and not v.deleted)

    settled = await tracker.wait_until(lambda t: bound_count(t) == len(raw), timeout=120)
    bound = {k: v.node for k, v in tracker.pods.items() if k in raw and v.node}
    lost = sorted(set(raw) - set(bound))
    double = sorted(k for k in raw if (v := tracker.pods.get(k)) is not None and v.bind_count > 1)
    report = audit(nodes, raw, bound)
    print(  # the run's numbers (pytest -rP shows them): docs/reliability.md quotes them
        f"{len(bound)}/{len(raw)} bound, {len(lost)} lost, {len(double)} bound twice, "
        f"{len(report.overcommitted)} nodes overcommitted"
    )
    assert settled, f"{len(lost)} pods not bound, e.g. {lost[:5]}"
    assert not double, f"bound twice: {double[:10]}"
    assert report.ok, report.lines()[:10]
    forgotten = await forgotten_bindings(stack, bound)
    assert not forgotten, f"the cache does not count {len(forgotten)} bound pods: {forgotten[:5]}"


async def forgotten_bindings(stack: LocalStack, bound: dict[str, str]) -> list[str]:
    """The bound pods the cache does not count where they are bound (none, once the
    watcher delivered every binding): a cache that forgot them overcommits their nodes
    as soon as pods keep coming."""
    client = aioredis.from_url(stack.redis_url)
    missing: list[str] = []

    async def counted() -> bool:
        commits = await read_commits(client, list(bound))
        missing[:] = sorted(
            k for k, node in bound.items() if (c := commits.get(k)) is None or c.node != node
        )
        return not missing

    try:
        await eventually(counted, timeout=30)
    finally:
        await client.aclose()
    return missing


async def assert_new_nodes_seen(nc: NATS, tracker: PodTracker) -> None:
    """A node added after the loss gets pods: the workers' snapshots follow the cache."""
    node = make_node("late-node", cpu="4", memory="16Gi")
    late = [make_pod(f"late-{i}", cpu="100m", memory="64Mi") for i in range(5)]
    for pod in late:
        pod["spec"]["nodeSelector"] = {HOSTNAME: "late-node"}
    await publish_all(nc.jetstream(), [node, *late])
    keys = [key_of(p) for p in late]
    assert await tracker.wait_until(
        lambda t: all(t.pods.get(k) is not None and t.pods[k].node for k in keys), timeout=60
    ), {k: tracker.pods[k].message for k in keys if k in tracker.pods}


async def run_with_fault(
    tmp_path: Path,
    fault: Fault,
    *,
    persist: bool = False,
    shards: int = 1,
    after: Fault | None = None,
) -> None:
    """`after`: checks of the stack once the invariants held."""
    stack = loss_stack(tmp_path / "stack", persist=persist, shards=shards)
    with running(stack):
        nc = await nats.connect(stack.nats_url, max_reconnect_attempts=-1)
        try:
            tracker = PodTracker()
            await tracker.start(nc)
            nodes, pods = await publish_with_fault(nc, stack, tracker, fault)
            await assert_invariants(stack, tracker, nodes, pods)
            await assert_new_nodes_seen(nc, tracker)
            if after is not None:
                await after(stack)
        finally:
            await nc.close()


@pytest.mark.timeout(300)
async def test_flushall_mid_run_loses_no_pod_and_overcommits_no_node(tmp_path: Path) -> None:
    await run_with_fault(tmp_path, flushall)


@pytest.mark.timeout(300)
async def test_flushall_mid_run_with_two_shards(tmp_path: Path) -> None:
    """Each queue shard and the cache rebuild from the log (a queue shard its own pods)
    with each watcher shard's applied sequence reset to the rebuild's cut, and the next
    takeover compares them with each shard's ack floor."""
    lanes = [QueueShard(2, s).lane for s in range(2)]
    before: dict[str, int] = {}

    async def flush_shards(stack: LocalStack) -> None:
        before.update(await queue_incarnations(stack, lanes))
        await flushall(stack)

    async def rebuilt(stack: LocalStack) -> None:
        assert all(before.values()), before  # each shard kept its own state
        after = await queue_incarnations(stack, lanes)
        assert all(after[lane] > before[lane] for lane in lanes), (before, after)

    await run_with_fault(tmp_path, flush_shards, shards=2, after=rebuilt)


async def queue_incarnations(stack: LocalStack, lanes: list[str]) -> dict[str, int]:
    client = aioredis.from_url(stack.redis_url)
    try:
        return {lane: (await read_marker(client, lane)).incarnation for lane in lanes}
    finally:
        await client.aclose()


@pytest.mark.timeout(300)
async def test_host_crash_brings_redis_back_a_second_older(tmp_path: Path) -> None:
    """Redis and the leaders of watcher, queue and cache are killed together; Redis
    comes back from its append-only file as it was a second earlier."""
    await run_with_fault(tmp_path, host_crash, persist=True)


@pytest.mark.timeout(300)
async def test_redis_back_a_second_older_then_a_failover(tmp_path: Path) -> None:
    await run_with_fault(tmp_path, rollback_then_failover, persist=True)
