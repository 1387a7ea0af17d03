"""Gangs across queue shards (shared/sharding.py queue_owner, docs/scale.md §4): with N
watcher and queue shards, a gang whose members' partitions belong to different shards
is held whole by its gang's queue shard, so it binds all-or-nothing as with one queue."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest
from nats.js import JetStreamContext

from shared.sharding import pod_key_owner
from shared.tools.client import PodTracker, publish_all, publish_node, publish_pod, publish_workload
from shared.tools.devstack import running
from shared.tools.synthetic import make_node, make_workload, make_workload_pod
from tests.conftest import make_test_stack
from tests.e2e.test_gang_workload import WAITING_FOR_PODS, WORKLOAD_GANG_CONFIG

pytestmark = pytest.mark.e2e


def members_over_shards(shards: int, n: int) -> list[str]:
    """n pod names in namespace default whose partitions go round every queue shard."""
    names: list[str] = []
    candidates = iter(f"m-{i}" for i in range(1000))
    while len(names) < n:
        wanted = len(names) % shards
        names.append(next(c for c in candidates if pod_key_owner(shards, f"default/{c}") == wanted))
    return names


@pytest.fixture(params=[2, 3], ids=["2 shards", "3 shards"])
async def sharded(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[int, JetStreamContext, PodTracker]]:
    """A stack with GangScheduling and N watcher and queue shards, and a client."""
    stack = make_test_stack(tmp_path / "stack", config=WORKLOAD_GANG_CONFIG)
    stack.shards = request.param
    with running(stack):
        nc = await nats.connect(stack.nats_url)
        tracker = PodTracker()
        await tracker.start(nc)
        yield request.param, nc.jetstream(), tracker
        await nc.close()


@pytest.mark.timeout(180)
async def test_a_gang_spread_over_partitions_waits_for_its_last_pod_then_binds_whole(
    sharded: tuple[int, JetStreamContext, PodTracker],
) -> None:
    shards, js, tracker = sharded
    names = members_over_shards(shards, 3)
    await publish_node(js, make_node("n1", cpu="8", memory="16Gi"))
    await publish_workload(js, make_workload("job", {"workers": 3}))
    pods = [make_workload_pod(n, "job", "workers", cpu="1") for n in names]
    await publish_all(js, pods[:2])
    members = {f"default/{n}" for n in names}

    def held(t: PodTracker) -> bool:
        return sum(m == WAITING_FOR_PODS for m in t.unschedulable().values()) == 2

    assert await tracker.wait_until(held, timeout=30), tracker.pods
    assert not members & set(tracker.bound()), "a member bound short of minCount"
    await publish_pod(js, pods[2])
    assert await tracker.wait_until(lambda t: members <= set(t.bound()), timeout=30), tracker.pods
    assert all(v.bound_writes == 1 for k, v in tracker.pods.items() if k in members)
