"""Preemption end to end: victims deleted on their subjects, the preemptor nominated and
bound, PodDisruptionBudgets, preemptionPolicy Never, and the nominated room kept."""

from __future__ import annotations

import json
from typing import Any

import pytest
from nats.aio.client import Client as NATS
from nats.js.api import DeliverPolicy

from shared.subjects import (
    ERROR_HEADER,
    ERRORS_PREFIX,
    ERRORS_STREAM,
    EVENTS_PREFIX,
    EVENTS_STREAM,
    pdb_subject,
)
from shared.tools.client import PodTracker, publish_all, publish_pdb, publish_pod
from shared.tools.synthetic import make_node, make_pdb, make_pod, preemption_async

pytestmark = pytest.mark.e2e


async def preempted_events(nc: NATS, count: int) -> list[dict[str, Any]]:
    js = nc.jetstream()
    sub = await js.subscribe(
        f"{EVENTS_PREFIX}.>", stream=EVENTS_STREAM, deliver_policy=DeliverPolicy.ALL
    )
    found: list[dict[str, Any]] = []
    while len(found) < count:
        msg = await sub.next_msg(timeout=15)
        event = json.loads(msg.data)
        if event["reason"] == "Preempted":
            found.append(event)
    await sub.unsubscribe()
    return found


async def test_high_priority_pod_binds_after_the_minimum_victims_go(
    nc: NATS, tracker: PodTracker
) -> None:
    js = nc.jetstream()
    nodes = [make_node(f"node-{i}", cpu="1", memory="16Gi") for i in range(3)]
    low = [make_pod(f"low-{i}", cpu="250m", memory="128Mi", priority=0) for i in range(12)]
    await publish_all(js, nodes)
    await publish_all(js, low)
    assert await tracker.wait_until(lambda t: len(t.bound()) == 12, timeout=30)

    await publish_pod(js, make_pod("high", cpu="500m", memory="128Mi", priority=1000))
    assert await tracker.wait_until(lambda t: "default/high" in t.bound(), timeout=30), (
        tracker.pods.get("default/high")
    )

    node = tracker.bound()["default/high"]
    gone = tracker.deleted()
    assert len(gone) == 2, gone  # 500m needs exactly two 250m pods gone from one node
    assert {tracker.pods[k].node for k in gone} == {node}
    assert len(tracker.bound()) == 11
    events = await preempted_events(nc, 2)
    assert {f"default/{e['involvedObject']['name']}" for e in events} == gone
    assert {e["message"] for e in events} == {f"Preempted by pod uid-default-high on node {node}"}


async def test_a_pdb_changes_which_pods_go(nc: NATS, tracker: PodTracker) -> None:
    js = nc.jetstream()
    await publish_all(js, [make_node(n, cpu="1", memory="16Gi") for n in ("node-a", "node-b")])
    # Without a budget node-a would be chosen (its victims have the lower priority);
    # the budget over the db pods makes node-b the node without PDB violations.
    errors = await js.subscribe(f"{ERRORS_PREFIX}.>", stream=ERRORS_STREAM)
    broken = make_pdb("broken", {"app": "web"}, min_available=1, max_unavailable=1)
    await publish_pdb(js, broken)  # malformed: reported, and nothing stops
    bad = await errors.next_msg(timeout=10)
    assert bad.subject == f"{ERRORS_PREFIX}.{pdb_subject('default', 'broken')}"
    assert "cannot be both set" in bad.headers[ERROR_HEADER]
    await publish_pdb(js, make_pdb("db", {"app": "db"}, min_available=2))
    bound = [
        make_pod("db-1", cpu="500m", priority=0, labels={"app": "db"}, node="node-a"),
        make_pod("db-2", cpu="500m", priority=0, labels={"app": "db"}, node="node-a"),
        make_pod("web-1", cpu="500m", priority=10, labels={"app": "web"}, node="node-b"),
        make_pod("web-2", cpu="500m", priority=10, labels={"app": "web"}, node="node-b"),
    ]
    await publish_all(js, bound)
    assert await tracker.wait_until(lambda t: len(t.bound()) == 4, timeout=15)

    await publish_pod(js, make_pod("high", cpu="500m", priority=1000))
    assert await tracker.wait_until(lambda t: "default/high" in t.bound(), timeout=30)

    assert tracker.bound()["default/high"] == "node-b"
    gone = tracker.deleted()
    assert len(gone) == 1 and gone <= {"default/web-1", "default/web-2"}, gone


async def test_preemption_policy_never_waits(nc: NATS, tracker: PodTracker) -> None:
    js = nc.jetstream()
    await publish_all(js, [make_node("only", cpu="1", memory="16Gi")])
    low = make_pod("low", cpu="800m", priority=0, node="only")
    await publish_pod(js, low)
    patient = make_pod("patient", cpu="500m", priority=1000)
    patient["spec"]["preemptionPolicy"] = "Never"
    await publish_pod(js, patient)

    assert await tracker.wait_until(lambda t: "default/patient" in t.unschedulable(), timeout=15)
    assert tracker.unschedulable()["default/patient"] == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: not eligible due to preemptionPolicy=Never."
    )
    assert tracker.deleted() == set()
    assert tracker.pods["default/patient"].nominated == ""

    await publish_pod(js, low, "DELETED")  # room appears: it binds then
    assert await tracker.wait_until(lambda t: "default/patient" in t.bound(), timeout=15)


async def test_nominated_room_is_not_taken_by_a_lower_priority_pod(
    nc: NATS, tracker: PodTracker
) -> None:
    js = nc.jetstream()
    await publish_all(js, [make_node("only", cpu="1", memory="16Gi")])
    await publish_all(
        js, [make_pod(f"low-{i}", cpu="500m", priority=0, node="only") for i in range(2)]
    )
    assert await tracker.wait_until(lambda t: len(t.bound()) == 2, timeout=15)

    await publish_pod(js, make_pod("high", cpu="500m", priority=1000))
    assert await tracker.wait_until(
        lambda t: (
            t.pods.get("default/high", None) is not None
            and t.pods["default/high"].nominated == "only"
        ),
        timeout=15,
    )
    # In between: the preemptor backs off before its next attempt, and a pod of lower
    # priority arrives that would fit in the room the victim leaves.
    await publish_pod(js, make_pod("sneaky", cpu="500m", priority=0))

    assert await tracker.wait_until(
        lambda t: t.bound().get("default/high") == "only" and "default/sneaky" in t.unschedulable(),
        timeout=30,
    ), (tracker.pods.get("default/high"), tracker.pods.get("default/sneaky"))
    assert "default/sneaky" not in tracker.bound()
    assert len(tracker.deleted()) == 1
    assert tracker.pods["default/high"].bind_count == 1


async def test_preemption_async_workload_small(nc: NATS, tracker: PodTracker) -> None:
    """The PreemptionAsync shape at a small size: every preemptor binds, one victim each."""
    js = nc.jetstream()
    nodes, low, high = preemption_async(nodes=10, init_pods=40, preemptors=10)
    await publish_all(js, nodes)
    await publish_all(js, low)
    assert await tracker.wait_until(lambda t: len(t.bound()) == 40, timeout=30)

    await publish_all(js, high)
    preemptors = {f"default/{p['metadata']['name']}" for p in high}
    assert await tracker.wait_until(lambda t: preemptors <= set(t.bound()), timeout=60), {
        k: tracker.pods[k] for k in preemptors - set(tracker.bound())
    }
    assert len(tracker.deleted()) == 10
    assert all(v.bind_count <= 1 for v in tracker.pods.values())
