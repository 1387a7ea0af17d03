"""The binding cycle end to end: Permit waits, gangs, binder kills, conflicts, dead letters."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
import redis.asyncio as aioredis
from nats.aio.client import Client as NATS

from shared.subjects import (
    BIND_DEAD_LETTER,
    BIND_SUBJECT,
    ERROR_HEADER,
    ERRORS_STREAM,
    EVENTS_PREFIX,
)
from shared.tools.client import (
    PodTracker,
    publish_all,
    publish_node,
    publish_pod,
    publish_pod_group,
)
from shared.tools.devstack import SERVICES, LocalStack, running
from shared.tools.synthetic import make_gang_pod, make_node, make_pod, make_pod_group
from shared.wire import pack
from tests.conftest import make_test_stack
from tests.e2e.kills import kill_and_restart, run_and_kill
from tests.e2e.state import assumed_pods, eventually

pytestmark = pytest.mark.e2e

GANG_CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled: [{name: Coscheduling}]
      disabled: [{name: PrioritySort}]
  pluginConfig:
  - name: Coscheduling
    args: {permitWaitingTimeSeconds: 3}
"""


@pytest.fixture
def gang_stack(tmp_path: Path) -> Iterator[LocalStack]:
    with running(make_test_stack(tmp_path / "stack", config=GANG_CONFIG)) as st:
        yield st


@pytest.fixture
def stack_without_binders(tmp_path: Path) -> Iterator[LocalStack]:
    """Assumed pods stay assumed until the test starts a binder."""
    services = [s for s in SERVICES if s != "binder"]
    with running(make_test_stack(tmp_path / "stack", binders=0), services) as st:
        yield st


async def _connect(stack: LocalStack) -> tuple[NATS, PodTracker]:
    nc = await nats.connect(stack.nats_url)
    tracker = PodTracker()
    await tracker.start(nc)
    return nc, tracker


@pytest.fixture
async def redis(gang_stack: LocalStack) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(gang_stack.redis_url)
    yield client
    await client.aclose()


# --- Permit and gangs -------------------------------------------------------------------


async def test_gang_waits_holding_its_room_and_binds_whole_when_the_last_member_fits(
    gang_stack: LocalStack, redis: aioredis.Redis
) -> None:
    """Permit Wait + Allow across cycles: 3 of a gang of 4 are assumed and wait in the
    binders (none bound); a new node lets the 4th be assumed, whose Permit allows all."""
    nc, tracker = await _connect(gang_stack)
    js = nc.jetstream()
    try:
        await publish_pod_group(js, make_pod_group("g", 4, timeout_seconds=60))
        await publish_node(js, make_node("n1", cpu="3500m", memory="16Gi"))
        gang = [make_gang_pod(f"g-{i}", "g", cpu="1", memory="1Gi") for i in range(4)]
        await publish_all(js, gang)

        async def three_assumed() -> bool:
            return len([k for k in await assumed_pods(redis) if k.startswith("default/g-")]) == 3

        assert await eventually(three_assumed, timeout=30)
        assert await tracker.wait_until(lambda t: len(t.unschedulable()) == 1, timeout=15)
        assert not tracker.bound(), "a gang member bound before minMember were assumed"

        await publish_node(js, make_node("n2", cpu="3500m", memory="16Gi"))
        assert await tracker.wait_until(lambda t: len(t.bound()) == 4, timeout=30), tracker.bound()
        assert all(v.bound_writes == 1 for v in tracker.pods.values())
    finally:
        await nc.close()


async def test_waiting_pods_wait_again_when_their_binder_is_killed(
    gang_stack: LocalStack, redis: aioredis.Redis
) -> None:
    """Every binder killed while 3 gang members wait: a new binder gets their requests
    again, waits with them, and binds the gang once its 4th member fits."""
    nc, tracker = await _connect(gang_stack)
    js = nc.jetstream()
    try:
        await publish_pod_group(js, make_pod_group("g", 4, timeout_seconds=60))
        await publish_node(js, make_node("n1", cpu="3500m", memory="16Gi"))
        await publish_all(js, [make_gang_pod(f"g-{i}", "g", cpu="1") for i in range(4)])

        async def three_assumed() -> bool:
            return len(await assumed_pods(redis)) == 3

        assert await eventually(three_assumed, timeout=30)
        kill_and_restart(gang_stack, "binder")
        assert await eventually(three_assumed, timeout=5)  # their room is still held

        await publish_node(js, make_node("n2", cpu="3500m", memory="16Gi"))
        assert await tracker.wait_until(lambda t: len(t.bound()) == 4, timeout=40), tracker.bound()
        assert all(v.bound_writes == 1 for v in tracker.pods.values())
    finally:
        await nc.close()


async def test_gang_without_room_stays_unbound_and_frees_its_room_after_the_timeout(
    gang_stack: LocalStack, redis: aioredis.Redis
) -> None:
    nc, tracker = await _connect(gang_stack)
    js = nc.jetstream()
    events = await js.subscribe(f"{EVENTS_PREFIX}.default.>")
    try:
        await publish_node(js, make_node("n1", cpu="3500m", memory="16Gi"))
        gang = [
            make_gang_pod(f"g-{i}", "g", min_available=4, cpu="1", memory="1Gi") for i in range(4)
        ]
        await publish_all(js, gang)

        async def three_assumed() -> bool:
            return len(await assumed_pods(redis)) == 3

        assert await eventually(three_assumed, timeout=30)
        # Timeout (3 s): every waiting member is rejected by Coscheduling.
        rejected: set[str] = set()
        while len(rejected) < 3:
            msg = await events.next_msg(timeout=20)
            event = unpack_json(msg.data)
            if (
                "rejected due to timeout" in event["message"]
                or "rejection in Unreserve" in (event["message"])
            ):
                assert event["reason"] == "FailedScheduling"
                assert event["message"].startswith("0/1 nodes are available: 1 ")
                rejected.add(event["involvedObject"]["name"])
        # Its room is free again: a pod that needs 2 cpu binds (priority puts it first).
        await publish_pod(js, make_pod("big", cpu="2", memory="1Gi", priority=100))
        assert await tracker.wait_until(lambda t: "default/big" in t.bound(), timeout=30)
        assert not any(k.startswith("default/g-") for k in tracker.bound())
        assert all(v.bound_writes == 0 for k, v in tracker.pods.items() if "/g-" in k)
    finally:
        await nc.close()


def unpack_json(data: bytes) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(data)
    return result


# --- binder failures ------------------------------------------------------------------------


async def test_binder_killed_during_a_2000_pod_run_binds_every_pod_exactly_once(
    stack: LocalStack, nc: NATS, tracker: PodTracker
) -> None:
    await run_and_kill(
        stack, nc, tracker, "binder", nodes=20, node_cpu="64", pods=2000, kill_after=300
    )
    assert all(v.bound_writes == 1 for v in tracker.pods.values()), "a binding written twice"


@pytest.mark.parametrize("change", ["updated", "deleted"])
async def test_pod_changed_between_assume_and_bind_is_a_conflict(
    stack_without_binders: LocalStack, change: str
) -> None:
    stack = stack_without_binders
    nc, tracker = await _connect(stack)
    js = nc.jetstream()
    client = aioredis.Redis.from_url(stack.redis_url)
    events = await js.subscribe(f"{EVENTS_PREFIX}.default.p")
    try:
        await publish_node(js, make_node("n1"))
        pod = make_pod("p")
        await publish_pod(js, pod)

        async def assumed() -> bool:
            return "default/p" in await assumed_pods(client)

        assert await eventually(assumed, timeout=20)
        if change == "updated":
            pod["metadata"]["labels"]["tier"] = "web"
            await publish_pod(js, pod, "MODIFIED")
        else:
            await publish_pod(js, pod, "DELETED")
        stack.start_service("binder")
        stack.wait_ready()

        msg = await events.next_msg(timeout=20)
        event = unpack_json(msg.data)
        assert event["reason"] == "FailedScheduling"
        assert event["message"].startswith("Binding rejected: default/p changed since sequence")
        if change == "updated":  # requeued, scheduled again with the new version
            assert await tracker.wait_until(lambda t: "default/p" in t.bound(), timeout=30)
            assert tracker.pods["default/p"].bound_writes == 1
        else:  # forgotten, never bound

            async def forgotten() -> bool:
                return "default/p" not in await assumed_pods(client)

            assert await eventually(forgotten, timeout=20)
            assert tracker.pods["default/p"].bound_writes == 0
    finally:
        await client.aclose()
        await nc.close()


async def test_undecodable_bind_request_is_a_dead_letter_and_its_pod_is_requeued(
    stack: LocalStack, nc: NATS, tracker: PodTracker
) -> None:
    js = nc.jetstream()
    dead = await js.subscribe(f"{BIND_DEAD_LETTER}", stream=ERRORS_STREAM)
    await js.publish(BIND_SUBJECT, b"\xc1 not msgpack", headers={"Nats-Msg-Id": "default/x@7"})
    msg = await dead.next_msg(timeout=20)
    assert msg.data == b"\xc1 not msgpack"
    assert msg.headers[ERROR_HEADER].startswith("undecodable bind request")
    # The binders go on binding.
    await publish_node(js, make_node("n1"))
    await publish_pod(js, make_pod("fine"))
    assert await tracker.wait_until(lambda t: "default/fine" in t.bound(), timeout=20)
    assert all(s.proc.poll() is None for s in stack.services), "a service died"


async def test_a_malformed_batch_is_a_dead_letter_with_its_reason(
    stack: LocalStack, nc: NATS, tracker: PodTracker
) -> None:
    js = nc.jetstream()
    dead = await js.subscribe(f"{BIND_DEAD_LETTER}", stream=ERRORS_STREAM)
    good = {
        "key": "default/b1",
        "uid": "u",
        "seq": 1,
        "node": "n1",
        "cycle": 3,
        "pod": make_pod("b1"),
        "profile": "default-scheduler",
        "assumed_at": 0.0,
    }
    cases = [
        ({"requests": [good, {**good, "key": "default/b2", "profile": "nope"}]}, "no profile"),
        ({"requests": [{**good, "permit_waits": {"X": 1e12}}]}, "waiting on Permit"),
        ({"requests": []}, "must hold requests"),
    ]
    for i, (body, reason) in enumerate(cases):
        await js.publish(BIND_SUBJECT, pack(body), headers={"Nats-Msg-Id": f"bad-batch-{i}"})
        msg = await dead.next_msg(timeout=20)
        assert reason in msg.headers[ERROR_HEADER]
    assert all(s.proc.poll() is None for s in stack.services), "a service died"
