"""Gang scheduling through the Workload API on a real stack: GangScheduling enabled in
the profile (upstream's alpha GangScheduling gate on), a short Permit timeout."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
import redis.asyncio as aioredis
from nats.js import JetStreamContext

from shared import keys
from shared.sharding import queue_shards
from shared.subjects import EVENTS_PREFIX
from shared.tools.client import PodTracker, publish_all, publish_node, publish_pod, publish_workload
from shared.tools.devstack import LocalStack, running
from shared.tools.synthetic import make_node, make_pod, make_workload, make_workload_pod
from tests.conftest import make_test_stack
from tests.e2e.kills import kill_and_restart
from tests.e2e.state import assumed_pods, eventually
from tests.e2e.test_binding import unpack_json

pytestmark = pytest.mark.e2e

WORKLOAD_GANG_CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled: [{name: GangScheduling}]
  pluginConfig:
  - name: GangScheduling
    args: {schedulingTimeoutSeconds: 3}
"""
Pod = dict[str, Any]
WAITING_FOR_PODS = "waiting for minCount pods from a gang to appear in scheduling queue"


@pytest.fixture
def gang_stack(tmp_path: Path) -> Iterator[LocalStack]:
    with running(make_test_stack(tmp_path / "stack", config=WORKLOAD_GANG_CONFIG)) as st:
        yield st


@pytest.fixture
async def client(gang_stack: LocalStack) -> AsyncIterator[tuple[JetStreamContext, PodTracker]]:
    nc = await nats.connect(gang_stack.nats_url)
    tracker = PodTracker()
    await tracker.start(nc)
    yield nc.jetstream(), tracker
    await nc.close()


@pytest.fixture
async def redis(gang_stack: LocalStack) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(gang_stack.redis_url)
    yield client
    await client.aclose()


async def test_a_gang_of_min_count_3_waits_for_its_third_pod_then_binds_whole(
    client: tuple[JetStreamContext, PodTracker],
) -> None:
    js, tracker = client
    await publish_node(js, make_node("n1", cpu="8", memory="16Gi"))
    await publish_workload(js, make_workload("job", {"workers": 3}))
    await publish_pod(js, make_pod("solo", cpu="1"))  # no workloadRef: not held
    pods = [make_workload_pod(f"w-{i}", "job", "workers", cpu="1") for i in range(3)]
    await publish_all(js, pods[:2])

    def held(t: PodTracker) -> bool:
        return sum(m == WAITING_FOR_PODS for m in t.unschedulable().values()) == 2

    assert await tracker.wait_until(held, timeout=30), tracker.pods
    assert await tracker.wait_until(lambda t: "default/solo" in t.bound(), timeout=30)
    await completes_the_gang(client, pods[2])


async def completes_the_gang(client: tuple[JetStreamContext, PodTracker], third: Pod) -> None:
    """Two members w-0, w-1 held, none bound: the third completes the gang, and all
    three bind, each written once."""
    js, tracker = client
    assert not [k for k in tracker.bound() if "/w-" in k], "a member bound short of minCount"
    await publish_pod(js, third)
    members = {f"default/w-{i}" for i in range(3)}
    assert await tracker.wait_until(lambda t: members <= set(t.bound()), timeout=30), tracker.pods
    assert all(v.bound_writes == 1 for k, v in tracker.pods.items() if k in members)


async def test_a_gang_that_cannot_all_fit_binds_none_and_the_timeout_frees_its_room(
    client: tuple[JetStreamContext, PodTracker], redis: aioredis.Redis
) -> None:
    js, _ = client
    await publish_workload(js, make_workload("job", {"workers": 3}))
    gang = [make_workload_pod(f"w-{i}", "job", "workers", cpu="1") for i in range(3)]
    await times_out_at_permit(client, redis, gang)


async def times_out_at_permit(
    client: tuple[JetStreamContext, PodTracker], redis: aioredis.Redis, gang: list[Pod]
) -> None:
    """A gang of 3 pods (named w-<i>, 1 cpu each, its group's object published) on one
    node with room for 2: two assumed, rejected by the 3 s Permit timeout, none bound,
    and the room they held goes to a 2-cpu pod."""
    js, tracker = client
    events = await js.subscribe(f"{EVENTS_PREFIX}.default.>")
    await publish_node(js, make_node("n1", cpu="2500m", memory="16Gi"))
    await publish_all(js, gang)

    async def two_assumed() -> bool:
        return len(await assumed_pods(redis)) == 2

    assert await eventually(two_assumed, timeout=30)
    # The 3 s timeout: each waiting member is rejected by GangScheduling.
    rejected: set[str] = set()
    while len(rejected) < 2:
        event = unpack_json((await events.next_msg(timeout=20)).data)
        if "rejected due to timeout" in event["message"]:
            assert event["reason"] == "FailedScheduling"
            assert "GangScheduling" in event["message"]
            rejected.add(event["involvedObject"]["name"])
    # Their room is free: a pod that needs 2 cpu binds (priority puts it first).
    await publish_pod(js, make_pod("big", cpu="2", priority=100))
    assert await tracker.wait_until(lambda t: "default/big" in t.bound(), timeout=30)
    assert not [k for k in tracker.bound() if "/w-" in k]
    assert all(v.bound_writes == 0 for k, v in tracker.pods.items() if "/w-" in k)


async def test_a_queue_that_takes_over_counts_the_gangs_bound_pods(
    gang_stack: LocalStack,
    client: tuple[JetStreamContext, PodTracker],
    redis: aioredis.Redis,
) -> None:
    """A gang of 3 bound, one member deleted, every queue killed: the new queue lists
    the bound members from the log, so the replacement pod passes PreEnqueue (2 bound
    + itself) and binds."""
    js, tracker = client
    await publish_node(js, make_node("n1", cpu="8", memory="16Gi"))
    await publish_workload(js, make_workload("job", {"workers": 3}))
    pods = [make_workload_pod(f"w-{i}", "job", "workers", cpu="1") for i in range(4)]
    await publish_all(js, pods[:3])
    assert await tracker.wait_until(lambda t: len(t.bound()) == 3, timeout=30)
    await publish_pod(js, pods[0], "DELETED")

    async def queue_holds_none() -> bool:  # the bindings and the delete are applied
        lanes = [q.lane for q in queue_shards(gang_stack.shards)]
        return all([await redis.hlen(keys.queue_pods_key(lane)) == 0 for lane in lanes])

    assert await eventually(queue_holds_none, timeout=30)
    kill_and_restart(gang_stack, "queue")

    await publish_pod(js, pods[3])
    assert await tracker.wait_until(lambda t: "default/w-3" in t.bound(), timeout=45), (
        tracker.pods.get("default/w-3")
    )
