"""What-if against a running ksched: what `ksched whatif` says a pod would get is what
ksched then does with it (hypothesis over random small clusters), and asking writes
nothing."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import nats
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nats.aio.client import Client as NATS

from shared.subjects import WHATIF
from shared.tools.client import PodTracker, publish_all
from shared.tools.devstack import LocalStack
from shared.tools.synthetic import HOSTNAME, make_node, make_pod
from shared.wire import dump_json

pytestmark = pytest.mark.e2e

EXAMPLE = "whatif.example"  # node label: which example a node belongs to
CPUS = ["250m", "500m", "1", "2", "3"]


async def what_if(nc: NATS, pod: dict[str, Any], **extra: Any) -> dict[str, Any]:
    msg = await nc.request(WHATIF, dump_json({"pod": pod, **extra}), timeout=10)
    assert not (msg.headers or {}).get("Nats-Service-Error"), msg.headers
    report: dict[str, Any] = json.loads(msg.data)
    return report


async def until_nodes(nc: NATS, pod: dict[str, Any], count: int) -> dict[str, Any]:
    """The report once the workers' snapshot shows `count` nodes (the cache has them)."""
    for _ in range(200):
        report = await what_if(nc, pod)
        if report["nodes"] == count:
            return report
        await asyncio.sleep(0.05)
    raise AssertionError(f"the snapshot never showed {count} nodes")


def pinned(pod: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    pod["spec"]["nodeSelector"] = labels
    return pod


@st.composite
def examples(draw: st.DrawFn) -> dict[str, Any]:
    """A few nodes (some tainted), pods already placed on them, and a pod to ask about."""
    nodes = [
        {
            "cpu": draw(st.sampled_from(["1", "2", "4"])),
            "pods": draw(st.integers(1, 4)),
            "tainted": draw(st.booleans()),
        }
        for _ in range(draw(st.integers(1, 4)))
    ]
    placed = [
        (draw(st.integers(0, len(nodes) - 1)), draw(st.sampled_from(CPUS[:3])))
        for _ in range(draw(st.integers(0, 5)))
    ]
    return {
        "nodes": nodes,
        "placed": placed,
        "cpu": draw(st.sampled_from(CPUS)),
        "tolerates": draw(st.booleans()),
    }


async def check_example(url: str, case: dict[str, Any], k: int, total_nodes: int) -> None:
    nc = await nats.connect(url)
    tracker = PodTracker()
    await tracker.start(nc)
    js = nc.jetstream()
    try:
        mine = {EXAMPLE: str(k)}
        nodes = []
        for i, spec in enumerate(case["nodes"]):
            node = make_node(f"ex{k}-n{i}", cpu=spec["cpu"], pods=spec["pods"])
            node["metadata"]["labels"].update(mine)
            if spec["tainted"]:
                node["spec"] = {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}
            nodes.append(node)
        await publish_all(js, nodes)
        # pods already there: ksched places each on its node (or leaves it pending)
        existing = []
        for j, (i, cpu) in enumerate(case["placed"]):
            pod = pinned(make_pod(f"ex{k}-e{j}", cpu=cpu), {HOSTNAME: f"ex{k}-n{i}"})
            pod["spec"]["tolerations"] = [{"operator": "Exists"}]
            existing.append(pod)
        await publish_all(js, existing)
        keys = {f"default/ex{k}-e{j}" for j in range(len(existing))}
        assert await tracker.wait_until(
            lambda t: keys <= set(t.bound()) | set(t.unschedulable()), timeout=30
        )
        probe = pinned(make_pod(f"ex{k}-probe", cpu=case["cpu"]), mine)
        if case["tolerates"]:
            probe["spec"]["tolerations"] = [{"key": "k", "operator": "Exists"}]
        report = await until_nodes(nc, probe, total_nodes)
        await publish_all(js, [probe])
        key = f"default/ex{k}-probe"
        assert await tracker.wait_until(
            lambda t: key in t.bound() or key in t.unschedulable(), timeout=30
        )
        if report["chosen"] is None:
            assert key in tracker.unschedulable(), tracker.bound().get(key)
            assert tracker.unschedulable()[key] == report["message"]
        else:
            assert tracker.bound().get(key) in report["best"], (report, tracker.pods.get(key))
    finally:
        await nc.close()


def test_what_if_matches_what_ksched_then_does(stack: LocalStack) -> None:
    """Each example adds its nodes (labelled apart) to the running cluster; its pods ask
    for them by label, so earlier examples change nothing for later ones."""
    counter = itertools.count()
    total = [0]

    @settings(
        max_examples=6,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(case=examples())
    def check(case: dict[str, Any]) -> None:
        total[0] += len(case["nodes"])
        asyncio.run(check_example(stack.nats_url, case, next(counter), total[0]))

    check()


async def test_what_if_writes_nothing_and_places_a_workload(nc: NATS, tracker: PodTracker) -> None:
    js = nc.jetstream()
    await publish_all(js, [make_node(f"n{i}", cpu="2") for i in range(3)])
    before = (await js.stream_info("KSCHED_CLUSTER")).state.messages
    pod = make_pod("web", cpu="1")
    report = await until_nodes(nc, pod, 3)
    report = await what_if(nc, pod, replicas=8, node="n0")
    assert report["replicas"]["fit"] == 6 and report["replicas"]["nodes"] == 3
    assert report["message"].startswith("0/3 nodes are available: 3 Insufficient cpu.")
    assert report["node"]["filter"]["NodeResourcesFit"] == "passed"
    assert (await js.stream_info("KSCHED_CLUSTER")).state.messages == before
    assert tracker.pods == {}
    # and the real ones then fit as the what-if said: six of them
    await publish_all(js, [make_pod(f"web-{i}", cpu="1") for i in range(8)])
    assert await tracker.wait_until(
        lambda t: len(t.bound()) == 6 and len(t.unschedulable()) == 2, timeout=30
    )
