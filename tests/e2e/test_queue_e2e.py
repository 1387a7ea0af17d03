"""Queue behaviour seen from outside: moves on cluster events, scheduling gates."""

from __future__ import annotations

import time

import pytest
from nats.aio.client import Client as NATS

from shared.cli.workload import make_node, make_pod
from shared.client import PodTracker, publish_node, publish_pod

pytestmark = pytest.mark.e2e


async def test_unschedulable_pod_binds_soon_after_a_fitting_node_appears(
    nc: NATS, tracker: PodTracker
) -> None:
    js = nc.jetstream()
    await publish_node(js, make_node("small", cpu="1"))
    await publish_pod(js, make_pod("big", cpu="2"))
    assert await tracker.wait_until(lambda t: "default/big" in t.unschedulable(), timeout=15)

    start = time.monotonic()
    await publish_node(js, make_node("large", cpu="4"))
    # moved by the NodeAdd event, not by the 5-minute leftover flush
    assert await tracker.wait_until(lambda t: t.bound().get("default/big") == "large", timeout=2)
    assert time.monotonic() - start < 2


async def test_gated_pod_binds_only_after_its_gate_is_removed(
    nc: NATS, tracker: PodTracker
) -> None:
    js = nc.jetstream()
    await publish_node(js, make_node("n1"))
    gated = make_pod("gated")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    await publish_pod(js, gated)
    await publish_pod(js, make_pod("free"))
    assert await tracker.wait_until(lambda t: "default/free" in t.bound(), timeout=15)
    assert "default/gated" not in tracker.bound()

    del gated["spec"]["schedulingGates"]
    await publish_pod(js, gated, "MODIFIED")
    assert await tracker.wait_until(lambda t: "default/gated" in t.bound(), timeout=15)
