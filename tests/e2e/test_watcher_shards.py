"""Watcher shards (docs/scale.md §4, shared/sharding.py): N watcher shards, each with a
leader and a standby, share the cluster stream by pod partition; every pod is bound
exactly once, and a shard leader killed mid-run is replaced by its own standby, which
takes over that shard alone."""

from __future__ import annotations

import asyncio
import signal
import urllib.request
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from shared.runtime.watermark import watcher_consumers
from shared.sharding import ShardMap, consumer_lane
from shared.subjects import PARTITIONED_PODS_PREFIX
from shared.tools.client import PodTracker, last_pod_msg, publish_all
from shared.tools.devstack import LocalStack, ServiceProc, running
from shared.tools.synthetic import make_node, make_pod
from tests.conftest import make_test_stack
from tests.e2e.test_redis_loss import assert_invariants, publish_with_fault

pytestmark = pytest.mark.e2e

NODES = 12
PODS = 300
NAMESPACES = ("default", "team-a", "team-b", "prod")
CHUNK = 25
PACE = 0.2  # about 2.5 s of arrivals: the kill strikes while they come
KILLED = 1  # the shard whose leader is killed


def cluster() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Nodes (some with FQDN names) and pods over several namespaces, half of them with
    dotted names (several subject tokens)."""
    nodes = [
        make_node(f"n{i:02d}" + (".rack-a.example" if i % 3 == 0 else ""), cpu="8", memory="32Gi")
        for i in range(NODES)
    ]
    pods = [
        make_pod(
            f"web.v{i % 3}.p-{i:04d}" if i % 2 else f"p-{i:04d}",
            cpu="100m",
            memory="64Mi",
            namespace=NAMESPACES[i % len(NAMESPACES)],
        )
        for i in range(PODS)
    ]
    return nodes, pods


async def consumers_by_lane(js: JetStreamContext) -> dict[str, list[str]]:
    lanes: dict[str, list[str]] = {}
    for info in await watcher_consumers(js):
        lanes.setdefault(consumer_lane(info.name) or "?", []).append(info.name)
    return lanes


def metric_total(http_port: int, name: str, label: str = "") -> float:
    """The sum of a counter's samples (those whose labels hold `label`), by /metrics."""
    url = f"http://127.0.0.1:{http_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as resp:
        lines = resp.read().decode().splitlines()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in lines
        if line.startswith((f"{name}{{", f"{name} ")) and label in line
    )


def pod_events(http_port: int) -> float:
    """The pod events a watcher handled."""
    return metric_total(http_port, "ksched_watcher_events_total", 'kind="pod"')


async def run_with_kill(
    nc: NATS,
    stack: LocalStack,
    tracker: PodTracker,
    leader: ServiceProc | None,
    pods: tuple[list[dict[str, Any]], list[dict[str, Any]]],
) -> None:
    """Publish the nodes and `pods`, SIGKILL `leader` mid-run; then every pod must be
    bound once, none lost, no node overcommitted."""

    async def kill(_: LocalStack) -> None:
        assert leader is not None
        leader.proc.send_signal(signal.SIGKILL)

    await publish_with_fault(nc, stack, tracker, kill, pods, chunk=CHUNK, pace=PACE)
    await assert_invariants(stack, tracker, *pods)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("shards", [2, 3])
async def test_every_pod_is_bound_once_and_a_killed_shard_leader_hands_over_its_shard_alone(
    tmp_path: Path, shards: int
) -> None:
    nodes, pods = cluster()
    owners = {
        ShardMap(shards).pod_owner(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods
    }
    assert owners == set(range(shards))  # every shard has pods to handle
    stack = make_test_stack(tmp_path / "stack")
    stack.shards, stack.standbys = shards, 1
    stack.env["KSCHED_LOG_LEVEL"] = "info"
    with running(stack):
        nc = await nats.connect(stack.nats_url, max_reconnect_attempts=-1)
        js = nc.jetstream()
        try:
            tracker = PodTracker()
            await tracker.start(nc)
            before = await consumers_by_lane(js)
            assert sorted(before) == [f"watcher.{s}" for s in range(shards)], before
            leaders = {
                s: await asyncio.to_thread(stack.leader, "watcher", s) for s in range(shards)
            }
            assert all(leaders.values()), leaders

            await run_with_kill(nc, stack, tracker, leaders[KILLED], (nodes, pods))
            after = await consumers_by_lane(js)
            for s in range(shards):  # one consumer per shard; only the killed one's is new
                lane = f"watcher.{s}"
                assert len(after[lane]) == 1, after
                assert (after[lane] == before[lane]) == (s != KILLED), (before, after)
            for s in range(shards):  # the other shards' leaders led throughout
                if s != KILLED:
                    assert (await asyncio.to_thread(stack.leader, "watcher", s)) is leaders[s]
            successor = await asyncio.to_thread(stack.leader, "watcher", KILLED)
            assert successor is not None and successor is not leaders[KILLED]
            # the kill struck mid-run: the successor had its shard's pods left to handle
            assert await asyncio.to_thread(pod_events, successor.http_port) > 0
        finally:
            await nc.close()


def other_shards_events(http_port: int) -> float:
    """The events a watcher shard acked unread: another shard's."""
    return metric_total(http_port, "ksched_watcher_other_shards_events_total")


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("shards", "partitioned"),
    [(2, True), (2, False), (1, True)],
    ids=["2-mapped", "2-unmapped", "1-mapped"],
)
async def test_with_the_servers_mapping_no_shard_reads_another_shards_pods(
    tmp_path: Path, shards: int, partitioned: bool
) -> None:
    """With the partition mapping in the NATS server's configuration, each watcher shard
    consumes its own partitions alone: no event is delivered to a shard that drops it,
    and every pod event is handled. Without it, the shards share the stream by
    dropping the others' events. Every pod is bound once either way, the pods' Scheduled
    bindings (written on the public subject, stored under the partition's) included.
    One watcher on a mapping server consumes both the partitions and the rest."""
    nodes, pods = cluster()
    stack = make_test_stack(tmp_path / "stack")
    stack.shards, stack.partitioned = shards, partitioned
    stack.env["KSCHED_LOG_LEVEL"] = "info"
    with running(stack):
        nc = await nats.connect(stack.nats_url)
        try:
            tracker = PodTracker()
            await tracker.start(nc)
            await publish_all(nc.jetstream(), [*nodes, *pods])
            keys = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods}
            assert await tracker.wait_until(lambda t: keys <= set(t.bound()), timeout=120)
            assert all(tracker.pods[k].bind_count == 1 for k in keys)
            shard_ids: list[int | None] = list(range(shards)) if shards > 1 else [None]
            leaders = [await asyncio.to_thread(stack.leader, "watcher", s) for s in shard_ids]
            ports = [leader.http_port for leader in leaders if leader is not None]
            assert len(ports) == shards
            meta = pods[1]["metadata"]  # a dotted name
            stored = await last_pod_msg(nc.jetstream(), meta["namespace"], meta["name"])
            assert (stored.subject or "").startswith(PARTITIONED_PODS_PREFIX) == partitioned

            async def counts() -> tuple[float, float]:
                """(pod events handled, events dropped) over the shards' leaders."""
                handled = [await asyncio.to_thread(pod_events, p) for p in ports]
                dropped = [await asyncio.to_thread(other_shards_events, p) for p in ports]
                return sum(handled), sum(dropped)

            # the bindings are seen stored before the watchers have handled them all
            for _ in range(300):
                handled, dropped = await counts()
                if handled >= 2 * len(pods):
                    break
                await asyncio.sleep(0.1)
        finally:
            await nc.close()
    if partitioned:
        assert dropped == 0
        # each pod's ADDED and binding (and any status ksched wrote on the way) handled
        assert handled >= 2 * len(pods)
    else:
        assert dropped >= len(pods)  # each shard is sent the other's pod events too
