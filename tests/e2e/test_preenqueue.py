"""PreEnqueue end to end: the queue runs the pod's profile's PreEnqueue plugins, so a
profile without SchedulingGates schedules a gated pod, and one with it holds the pod
(gated, named as the rejecting plugin) until an update removes its gates. The held pod
says why on its PodScheduled condition (KEP-5501; for scheduling gates, the condition
kube-apiserver writes), once, and with no event: it was never attempted."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client as NATS

from shared.api.podstatus import SCHEDULING_GATED_MESSAGE
from shared.subjects import EVENTS_PREFIX
from shared.tools.client import PodTracker, publish_node, publish_pod
from shared.tools.devstack import LocalStack, running
from shared.tools.synthetic import make_node, make_pod
from tests.conftest import make_test_stack
from tests.e2e.test_queue_e2e import pending_pod, queue_gauge

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
GATED = ("False", "SchedulingGated", SCHEDULING_GATED_MESSAGE)  # PodScheduled, as kube says


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
    events = await js.subscribe(f"{EVENTS_PREFIX}.default.held")
    await publish_node(js, make_node("n2"))
    pod = gated_pod("held")
    await publish_pod(js, pod)
    await publish_pod(js, make_pod("marker"))  # published after it: bound after it was queued
    assert await tracker.wait_until(lambda t: "default/marker" in t.bound(), timeout=15)
    assert "default/held" not in tracker.bound()
    assert await tracker.wait_until(lambda t: condition(t, "default/held") == GATED, timeout=15)
    entry = await pending_pod(nc, "default/held")
    assert entry is not None
    assert (entry["queue"], entry["attempts"]) == ("gated", 0)
    assert entry["unschedulable_plugins"] == ["SchedulingGates"]
    assert entry["message"] == f"waiting for scheduling gates: [{GATE}]"
    assert queue_gauge(stack, "scheduler_pending_pods", 'queue="gated"') == 1

    held = copy.deepcopy(tracker.objects["default/held"])  # with the condition ksched wrote
    del held["spec"]["schedulingGates"]
    await publish_pod(js, held, "MODIFIED")
    assert await tracker.wait_until(lambda t: "default/held" in t.bound(), timeout=15)
    assert queue_gauge(stack, "scheduler_pending_pods", 'queue="gated"') == 0
    # Never attempted while gated: its only event is the binding's.
    assert [event["reason"] for event in await drain(events)] == ["Scheduled"]


async def test_a_gated_pod_that_already_says_so_is_not_written_again(
    stack: LocalStack, nc: NATS, tracker: PodTracker
) -> None:
    """As kube's scheduler skips a status patch the pod already carries (KEP-5501): a
    gated pod published with kube-apiserver's condition keeps its version."""
    js = nc.jetstream()
    exported = gated_pod("exported")
    exported["status"] = {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": GATED[1], "message": GATED[2]}
        ],
    }
    seq = await publish_pod(js, exported)
    await publish_pod(js, gated_pod("fresh"))  # written after `exported` was decided on
    assert await tracker.wait_until(lambda t: condition(t, "default/fresh") == GATED, timeout=15)
    assert tracker.pods["default/exported"].seq == seq
    entry = await pending_pod(nc, "default/exported")
    assert entry is not None and entry["queue"] == "gated"


def condition(tracker: PodTracker, key: str) -> tuple[str, str, str] | None:
    """The pod's PodScheduled (status, reason, message), None before the pod is seen."""
    view = tracker.pods.get(key)
    return None if view is None else (view.scheduled, view.reason, view.message)


async def drain(sub: Any) -> list[dict[str, Any]]:
    """The events the subscription has, waiting a little for stragglers."""
    found = []
    while True:
        try:
            msg = await sub.next_msg(timeout=1)
        except TimeoutError:  # nats-py's is one too
            return found
        found.append(json.loads(msg.data))
