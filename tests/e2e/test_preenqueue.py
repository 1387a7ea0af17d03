"""PreEnqueue end to end: the queue runs the pod's profile's PreEnqueue plugins, so a
profile without SchedulingGates schedules a gated pod, and one with it holds the pod
(gated, named as the rejecting plugin) until an update removes its gates."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client as NATS

from shared.tools.client import PodTracker, publish_node, publish_pod
from shared.tools.devstack import LocalStack, running
from shared.tools.synthetic import make_node, make_pod
from tests.conftest import make_test_stack
from tests.e2e.test_queue_e2e import pending_pod, queue_metrics

pytestmark = pytest.mark.e2e

UNGATED = ("ungated-at-preenqueue", "ungated-by-multipoint")
CONFIG = f"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
- schedulerName: {UNGATED[0]}
  plugins:
    preEnqueue:
      disabled: [{{name: SchedulingGates}}]
- schedulerName: {UNGATED[1]}
  plugins:
    multiPoint:
      disabled: [{{name: SchedulingGates}}]
"""
GATE = "example.com/wait"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """One stack for the module: a default profile and two without SchedulingGates."""
    workdir: Path = tmp_path_factory.mktemp("preenqueue") / "stack"
    with running(make_test_stack(workdir, config=CONFIG)) as st:
        yield st


def gated_pod(name: str, scheduler: str = "") -> dict[str, Any]:
    pod = make_pod(name)
    pod["spec"]["schedulingGates"] = [{"name": GATE}]
    if scheduler:
        pod["spec"]["schedulerName"] = scheduler
    return pod


async def test_a_profile_without_scheduling_gates_schedules_a_gated_pod(
    nc: NATS, tracker: PodTracker
) -> None:
    js = nc.jetstream()
    await publish_node(js, make_node("n1"))
    keys = [f"default/gated-{profile}" for profile in UNGATED]
    for profile in UNGATED:
        await publish_pod(js, gated_pod(f"gated-{profile}", profile))
    assert await tracker.wait_until(lambda t: set(keys) <= set(t.bound()), timeout=15), (
        f"not bound: {sorted(set(keys) - set(tracker.bound()))}"
    )


async def test_the_default_profile_holds_a_gated_pod_until_its_gates_are_removed(
    stack: LocalStack, nc: NATS, tracker: PodTracker
) -> None:
    js = nc.jetstream()
    await publish_node(js, make_node("n2"))
    pod = gated_pod("held")
    await publish_pod(js, pod)
    await publish_pod(js, make_pod("marker"))  # published after it: bound after it was queued
    assert await tracker.wait_until(lambda t: "default/marker" in t.bound(), timeout=15)
    assert "default/held" not in tracker.bound()
    assert "default/held" not in tracker.unschedulable()  # never attempted: no status written
    entry = await pending_pod(nc, "default/held")
    assert entry is not None
    assert (entry["queue"], entry["attempts"]) == ("gated", 0)
    assert entry["unschedulable_plugins"] == ["SchedulingGates"]
    assert entry["message"] == f"waiting for scheduling gates: [{GATE}]"
    assert 'scheduler_pending_pods{queue="gated"} 1.0' in queue_metrics(stack)

    del pod["spec"]["schedulingGates"]
    await publish_pod(js, pod, "MODIFIED")
    assert await tracker.wait_until(lambda t: "default/held" in t.bound(), timeout=15)
    assert 'scheduler_pending_pods{queue="gated"} 0.0' in queue_metrics(stack)
