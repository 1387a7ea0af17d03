"""kube-scheduler's framework and queue metrics on a real stack's /metrics, after
scheduling: scheduler_framework_extension_point_duration_seconds (workers, binders,
queue), scheduler_plugin_execution_duration_seconds (sampled cycles) and
scheduler_unschedulable_pods (queue), scheduler_batch_attempts_total (workers), with
kube's label names and values."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Callable

import pytest
from nats.aio.client import Client as NATS
from prometheus_client.parser import text_string_to_metric_families

from shared.tools.client import PodTracker, publish_node, publish_pod
from shared.tools.devstack import LocalStack
from shared.tools.synthetic import make_node, make_pod

pytestmark = pytest.mark.e2e

PROFILE = "default-scheduler"
POINTS = "scheduler_framework_extension_point_duration_seconds"
PLUGINS = "scheduler_plugin_execution_duration_seconds"
PODS = 100  # sampled cycles are 1 in 10: at least one among 100 but for 0.9^100 (3e-5)

Labels = dict[str, str]


def scrape(stack: LocalStack, service: str) -> list[tuple[str, Labels, float]]:
    """Every sample of every replica of `service`: (name, labels, value)."""
    samples = []
    for svc in stack.services:
        if svc.name != service:
            continue
        url = f"http://127.0.0.1:{svc.http_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode()
        for family in text_string_to_metric_families(text):
            samples += [(s.name, dict(s.labels), s.value) for s in family.samples]
    return samples


def total(samples: list[tuple[str, Labels, float]], name: str, **labels: str) -> float:
    """The samples named `name` whose labels include `labels`, summed."""
    return sum(
        value
        for sample, got, value in samples
        if sample == name and all(got.get(k) == v for k, v in labels.items())
    )


async def eventually(check: Callable[[], bool], timeout: float = 15) -> bool:
    """Polls a scrape until `check` holds (metrics have no change to wait on)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await asyncio.to_thread(check):
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.2)
    return True


async def test_framework_and_queue_metrics_after_scheduling(
    stack: LocalStack, nc: NATS, tracker: PodTracker
) -> None:
    js = nc.jetstream()
    for name in ("n1", "n2"):  # two feasible nodes: PreScore and Score run
        await publish_node(js, make_node(name, cpu="64", memory="512Gi", pods=200))
    keys = {f"default/p{i}" for i in range(PODS)}
    for i in range(PODS):
        await publish_pod(js, make_pod(f"p{i}", cpu="10m"))
    await publish_pod(js, make_pod("huge", cpu="1000"))  # fits nowhere
    assert await tracker.wait_until(
        lambda t: keys <= set(t.bound()) and "default/huge" in t.unschedulable(), timeout=60
    )

    workers = scrape(stack, "worker")
    count = f"{POINTS}_count"
    for point in ("PreFilter", "PreScore", "Score", "Reserve", "Permit"):
        assert total(workers, count, extension_point=point, status="Success", profile=PROFILE)
    # the huge pod: PreFilter passes, every node fails Filter, preemption finds nothing
    assert total(workers, count, extension_point="PostFilter", status="Unschedulable")
    assert not total(workers, count, extension_point="Filter")  # kube times it per plugin only
    # le is inclusive and the last bound is kube's 0.1ms * 2^11
    assert total(workers, f"{POINTS}_bucket", extension_point="PreFilter", le="0.2048")
    # replicas of one template: opportunistic batching (on by default) reused results
    batched = total(workers, "scheduler_batch_attempts_total", profile=PROFILE, result="hint_used")
    print("DEBUG", [s for s in workers if "batch" in s[0]])
    assert 0 < batched < PODS

    def sampled_filter() -> bool:
        samples = scrape(stack, "worker")
        return bool(
            total(samples, f"{PLUGINS}_count", plugin="NodeResourcesFit", extension_point="Filter")
        )

    assert await eventually(sampled_filter)
    sampled = {
        labels["extension_point"] for n, labels, _ in scrape(stack, "worker") if PLUGINS in n
    }
    assert {"PreFilter", "Filter", "Score"} <= sampled

    binders = scrape(stack, "binder")
    for point in ("PreBind", "Bind", "PostBind"):
        assert total(binders, count, extension_point=point, status="Success", profile=PROFILE)

    def queue_has_huge_unschedulable() -> bool:
        samples = scrape(stack, "queue")
        return total(
            samples, "scheduler_unschedulable_pods", plugin="NodeResourcesFit", profile=PROFILE
        ) == 1 and bool(total(samples, count, extension_point="PreEnqueue", status="Success"))

    assert await eventually(queue_has_huge_unschedulable)
