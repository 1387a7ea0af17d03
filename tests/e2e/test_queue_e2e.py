"""Queue behaviour seen from outside: moves on cluster events decided by queueing hints,
scheduling gates, the inspection service, nominated pods, and a kill -9 of the queue."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import time
import urllib.request
from typing import Any

import pytest
from nats.aio.client import Client as NATS
from nats.errors import NoRespondersError

from shared.runtime.rpc import request
from shared.subjects import QUEUE_NOMINATED, QUEUE_PENDING, QUEUE_SERVICE_NAME, QUEUE_STATS
from shared.tools.cli.live import queue_pending
from shared.tools.client import PodTracker, publish_all, publish_node, publish_pod
from shared.tools.devstack import LocalStack
from shared.tools.synthetic import make_node, make_pod
from tests.e2e.test_watcher_shards import metric_total

pytestmark = pytest.mark.e2e


async def pending(nc: NATS, **query: Any) -> dict[str, Any]:
    """The pending pods of every queue shard (one queue: its own reply, and `counts`)."""
    return await queue_pending(nc, query)


async def pending_pod(nc: NATS, key: str) -> dict[str, Any] | None:
    return next((p for p in (await pending(nc))["pods"] if p["key"] == key), None)


async def wait_pending(nc: NATS, key: str, queue: str, timeout: float = 10) -> dict[str, Any]:
    """The pod's entry once it is in `queue` (the worker reports after its status write;
    a restarted queue answers once it has restored)."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(NoRespondersError):
            entry = await pending_pod(nc, key)
            if entry is not None and entry["queue"] == queue:
                return entry
        assert time.monotonic() < deadline, f"{key} not in {queue}: {entry}"
        await asyncio.sleep(0.05)


def queue_metrics(stack: LocalStack) -> str:
    """The /metrics text of every queue instance (of every queue shard), one after another."""
    return "".join(_metrics(s.http_port) for s in stack.services if s.name == "queue")


def queue_gauge(stack: LocalStack, name: str, label: str) -> float:
    """A gauge summed over every queue instance (with standbys: theirs are 0)."""
    ports = [s.http_port for s in stack.services if s.name == "queue"]
    return sum(metric_total(port, name, label) for port in ports)


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return str(resp.read().decode())


async def test_unschedulable_pod_binds_soon_after_a_fitting_node_appears(
    stack: LocalStack, nc: NATS, tracker: PodTracker
) -> None:
    js = nc.jetstream()
    await publish_node(js, make_node("small", cpu="1"))
    await publish_pod(js, make_pod("big", cpu="2"))
    assert await tracker.wait_until(lambda t: "default/big" in t.unschedulable(), timeout=15)

    await publish_node(js, make_node("large", cpu="4"))
    # Moved by the NodeAdd event and NodeResourcesFit's hint (the metrics below say so),
    # well before the 5-minute flush; the bound is loose so that a loaded machine passes.
    assert await tracker.wait_until(lambda t: t.bound().get("default/big") == "large", timeout=60)
    metrics = queue_metrics(stack)

    def counted(labels: str) -> bool:
        return f"scheduler_queue_incoming_pods_total{{{labels}" in metrics

    assert counted('event="UnschedulablePodAdd",queue="active"')
    # The failed attempt waits in unschedulablePods for the NodeAdd move (active or
    # backoff, as the backoff timing fell) — unless the cluster changed under the
    # attempt (kube's move request during the cycle). Then either the queue puts it in
    # backoffQ at once, or the worker, reading the snapshot again after the failure and
    # finding the new node there, sends a move with its report (labelled
    # AssignedPodDelete: room appeared) that takes it to backoffQ; all three happen
    # here, as the timing falls.
    waited = counted('event="ScheduleAttemptFailure",queue="unschedulable"')
    backed_off = counted('event="ScheduleAttemptFailure",queue="backoff"')
    assert waited or backed_off, metrics
    moved_by_worker = counted('event="AssignedPodDelete",queue=')
    assert backed_off or moved_by_worker or counted('event="NodeAdd",queue='), metrics
    assert 'scheduler_pending_pods{queue="unschedulable"} 0.0' in metrics


async def test_events_that_cannot_help_leave_the_pod_unschedulable(
    nc: NATS, tracker: PodTracker
) -> None:
    js = nc.jetstream()
    plain = make_node("plain")
    await publish_node(js, plain)
    picky = make_pod("picky")
    picky["spec"]["nodeSelector"] = {"disk": "ssd"}
    await publish_pod(js, picky)
    assert await tracker.wait_until(lambda t: "default/picky" in t.unschedulable(), timeout=15)
    before = await wait_pending(nc, "default/picky", "unschedulable")
    assert before["unschedulable_plugins"] == ["NodeAffinity"]

    # NodeAffinity does not register allocatable updates, and its hint skips a new node
    # without the label; a pod bound meanwhile (AssignedPod/Add) is no concern of it.
    bigger = copy.deepcopy(plain)
    bigger["status"]["capacity"]["cpu"] = "64"
    await publish_node(js, bigger, "MODIFIED")
    await publish_node(js, make_node("another-plain"))
    await publish_pod(js, make_pod("marker"))  # bound after the events above were applied
    assert await tracker.wait_until(lambda t: "default/marker" in t.bound(), timeout=15)
    after = await pending_pod(nc, "default/picky")
    assert after is not None
    assert (after["queue"], after["attempts"]) == ("unschedulable", before["attempts"])

    start = time.monotonic()
    labelled = copy.deepcopy(bigger)
    labelled["metadata"]["labels"]["disk"] = "ssd"
    await publish_node(js, labelled, "MODIFIED")  # Node/UpdateNodeLabel: the hint says Queue
    assert await tracker.wait_until(lambda t: t.bound().get("default/picky") == "plain", timeout=2)
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
    entry = await pending_pod(nc, "default/gated")
    assert entry is not None and (entry["queue"], entry["attempts"]) == ("gated", 0)

    del gated["spec"]["schedulingGates"]
    await publish_pod(js, gated, "MODIFIED")
    assert await tracker.wait_until(lambda t: "default/gated" in t.bound(), timeout=15)


async def test_inspection_service_is_discoverable(nc: NATS) -> None:
    ping = json.loads((await nc.request(f"$SRV.PING.{QUEUE_SERVICE_NAME}", b"", timeout=5)).data)
    assert ping["name"] == QUEUE_SERVICE_NAME and ping["type"] == "io.nats.micro.v1.ping_response"
    info = json.loads((await nc.request(f"$SRV.INFO.{QUEUE_SERVICE_NAME}", b"", timeout=5)).data)
    endpoints = {e["name"]: e["subject"] for e in info["endpoints"]}
    assert (endpoints["pending"], endpoints["stats"]) == (QUEUE_PENDING, QUEUE_STATS)
    assert set(endpoints) == {"pending", "stats", "readyz", "metrics"}
    stats = json.loads((await nc.request(f"$SRV.STATS.{QUEUE_SERVICE_NAME}", b"", timeout=5)).data)
    assert "counts" in stats["endpoints"][0]["data"]
    reply = json.loads((await nc.request(QUEUE_STATS, b"", timeout=5)).data)
    assert set(reply["counts"]) >= {"active", "backoff", "unschedulable", "gated"}
    bad = await nc.request(QUEUE_PENDING, b'{"queue": "nowhere"}', timeout=5)
    assert bad.headers is not None and bad.headers.get("Nats-Service-Error-Code") == "400"


async def test_nominated_pods_are_served(nc: NATS, tracker: PodTracker) -> None:
    js = nc.jetstream()
    await publish_node(js, make_node("n1", cpu="1"))
    preemptor = make_pod("preemptor", cpu="4")  # fits nowhere: stays pending, nominated
    preemptor["status"] = {"nominatedNodeName": "n1"}
    # Not eligible to preempt, so PostFilter leaves the nomination as it is (a failed
    # preemption would clear it, as kube-scheduler does).
    preemptor["spec"]["preemptionPolicy"] = "Never"
    await publish_pod(js, preemptor)
    assert await tracker.wait_until(lambda t: "default/preemptor" in t.unschedulable(), timeout=15)
    reply = await request(nc, QUEUE_NOMINATED, {"node": "n1"})
    assert [(p["key"], p["node"]) for p in reply["pods"]] == [("default/preemptor", "n1")]
    assert reply["pods"][0]["pod"]["spec"]["containers"] == preemptor["spec"]["containers"]
    assert reply["version"] >= 1
    assert (await request(nc, QUEUE_NOMINATED, {"node": "n2"}))["pods"] == []


async def test_workers_filter_with_the_nominated_pods(nc: NATS, tracker: PodTracker) -> None:
    """RunFilterPluginsWithNominatedPods: room nominated to a pending pod of higher
    priority is not given to a lower one."""
    js = nc.jetstream()
    await publish_all(js, [make_node("roomy", cpu="2"), make_node("tight", cpu="1")])
    holder = make_pod("holder", cpu="1500m", priority=10)
    holder["spec"]["nodeSelector"] = {"disk": "none"}  # stays pending, nominated to roomy
    holder["status"] = {"nominatedNodeName": "roomy"}
    holder["spec"]["preemptionPolicy"] = "Never"  # keeps the nomination (see above)
    await publish_pod(js, holder)
    assert await tracker.wait_until(lambda t: "default/holder" in t.unschedulable(), timeout=15)
    # Least-allocated alone would pick roomy; roomy's free room is promised to holder.
    await publish_pod(js, make_pod("late", cpu="1", priority=0))
    assert await tracker.wait_until(lambda t: "default/late" in t.bound(), timeout=15)
    assert tracker.bound()["default/late"] == "tight"


async def test_queue_killed_and_restarted_mid_run_loses_nothing(
    stack: LocalStack, nc: NATS, tracker: PodTracker
) -> None:
    js = nc.jetstream()
    await publish_all(js, [make_node(f"n{i}", cpu="8", memory="32Gi") for i in range(5)])
    # Rejected by NodeAffinity, which no binding or failed binding can help: it stays put.
    picky = make_pod("picky")
    picky["spec"]["nodeSelector"] = {"disk": "ssd"}
    await publish_pod(js, picky)
    before = await wait_pending(nc, "default/picky", "unschedulable")

    pods = [make_pod(f"p-{i}") for i in range(150)]
    await publish_all(js, pods)
    assert await tracker.wait_until(lambda t: len(t.bound()) >= 20, timeout=30)
    queue = next(s for s in stack.services if s.name == "queue")
    queue.proc.kill()  # SIGKILL: no chance to flush anything
    queue.proc.wait()
    stack.services.remove(queue)
    stack.start_service("queue")
    stack.wait_ready()

    assert await tracker.wait_until(lambda t: len(t.bound()) == 150, timeout=60), (
        f"{len(tracker.bound())} of 150 bound"
    )
    assert all(v.bind_count <= 1 for v in tracker.pods.values())
    after = await wait_pending(nc, "default/picky", "unschedulable")
    # the backoff state survived: same sub-queue, attempts and backoff expiry
    for field in ("queue", "attempts", "backoff_expiry", "unschedulable_plugins", "timestamp"):
        assert after[field] == before[field], field
