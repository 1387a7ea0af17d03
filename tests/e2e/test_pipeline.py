"""End to end: watch events in on NATS, bindings out, through all five services."""

from __future__ import annotations

import asyncio
import json

import pytest
from nats.aio.client import Client as NATS

from shared.subjects import ERROR_HEADER, ERRORS_STREAM
from shared.tools.client import PodTracker, publish_all, publish_node, publish_pod
from shared.tools.devstack import LocalStack
from shared.tools.synthetic import make_node, make_pod
from tests.e2e.kills import run_and_kill

pytestmark = pytest.mark.e2e

MILLI = {"200m": 200, "3": 3000, "800m": 800, "500m": 500, "100m": 100}


async def test_fitting_pods_bind_and_the_rest_report_kube_scheduler_message(
    nc: NATS, tracker: PodTracker
) -> None:
    js = nc.jetstream()
    nodes = [make_node(f"node-{i}", cpu="2", memory="4Gi") for i in range(3)]
    small = [make_pod(f"small-{i}", cpu="200m", memory="128Mi") for i in range(24)]
    huge = [make_pod(f"huge-{i}", cpu="3", memory="128Mi") for i in range(6)]
    await publish_all(js, nodes)
    await publish_all(js, small + huge)

    done = await tracker.wait_until(
        lambda t: len(t.bound()) == 24 and len(t.unschedulable()) == 6, timeout=30
    )
    assert done, (tracker.bound(), tracker.unschedulable())
    assert set(tracker.bound()) == {f"default/small-{i}" for i in range(24)}
    # 3 cpu is more than a node has at all: preemption cannot help (DefaultPreemption's part).
    assert set(tracker.unschedulable().values()) == {
        "0/3 nodes are available: 3 Insufficient cpu. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    }
    used: dict[str, int] = {}
    for node in tracker.bound().values():
        used[node] = used.get(node, 0) + 200
    assert all(milli <= 2000 for milli in used.values()), used
    assert all(v.bind_count <= 1 for v in tracker.pods.values())


async def test_deleting_a_bound_pod_lets_a_pending_pod_bind(nc: NATS, tracker: PodTracker) -> None:
    js = nc.jetstream()
    await publish_node(js, make_node("only", cpu="1", memory="4Gi"))
    first = make_pod("first", cpu="800m", memory="128Mi")
    await publish_pod(js, first)
    assert await tracker.wait_until(lambda t: "default/first" in t.bound(), timeout=15)

    await publish_pod(js, make_pod("second", cpu="500m", memory="128Mi"))
    assert await tracker.wait_until(lambda t: "default/second" in t.unschedulable(), timeout=15)
    assert tracker.unschedulable()["default/second"] == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )

    await publish_pod(js, first, "DELETED")
    assert await tracker.wait_until(lambda t: t.bound().get("default/second") == "only", timeout=15)


async def test_malformed_event_goes_to_errors_and_nothing_stops(
    nc: NATS, tracker: PodTracker
) -> None:
    js = nc.jetstream()
    errors = await js.subscribe("ksched.errors.>", stream=ERRORS_STREAM)
    await js.publish("ksched.cluster.pods.default.broken", b"{not json")
    bad_quantity = make_pod("negative", cpu="-1")
    await js.publish(
        "ksched.cluster.pods.default.negative",
        json.dumps({"type": "ADDED", "object": bad_quantity}).encode(),
    )
    first = await errors.next_msg(timeout=10)
    second = await errors.next_msg(timeout=10)
    by_subject = {m.subject: m for m in (first, second)}
    broken = by_subject["ksched.errors.ksched.cluster.pods.default.broken"]
    assert broken.data == b"{not json"
    assert "invalid JSON" in broken.headers[ERROR_HEADER]
    negative = by_subject["ksched.errors.ksched.cluster.pods.default.negative"]
    assert "spec.containers[0].resources.requests.cpu" in negative.headers[ERROR_HEADER]
    assert "non-negative" in negative.headers[ERROR_HEADER]

    await publish_node(js, make_node("n1"))
    await publish_pod(js, make_pod("fine"))
    assert await tracker.wait_until(lambda t: "default/fine" in t.bound(), timeout=15)


async def test_worker_killed_mid_run_loses_no_pod(
    stack: LocalStack, nc: NATS, tracker: PodTracker
) -> None:
    await run_and_kill(
        stack, nc, tracker, "worker", nodes=10, node_cpu="8", pods=400, kill_after=20
    )
    await asyncio.sleep(0)
