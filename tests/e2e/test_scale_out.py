"""Invariant 3 with 4 workers and 2 binders, property-based, through the real services.

Hypothesis draws small, tight clusters (nodes with cpu, memory, pod counts, zones)
and pods (requests, host ports, required hostname/zone anti-affinity, DoNotSchedule
topology spread), publishes them on the public subjects, waits until every pod is
bound or reported unschedulable and the cache's commits match the bindings, then
checks the final state (shared/tools/invariants.audit), that no pod was bound twice, and
that replaying the committed order serially through the framework's Filter accepts
every placement (shared/tools/invariants.replay).

It runs with 1, 2 and 3 watcher and queue shards (shared/sharding.py, docs/scale.md
§4), the workers popping from every queue shard: one devstack per shard count serves
every example of that count. An example uses its own name prefix and deletes its pods
and nodes at the end, so the next one starts from an empty cluster. A sharded run
checks that every queue shard had a leader and took pods in, so that it cannot pass
with the pods all going through one shard.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from nats.aio.client import Client as NATS

from shared import keys
from shared.tools.client import PodTracker, publish_all, publish_pod
from shared.tools.devstack import LocalStack
from shared.tools.invariants import audit, replay
from shared.tools.observe import assume_conflicts, incoming_by_shard, settle
from tests.builders import HOSTNAME, ZONE, make_node, make_pod

pytestmark = pytest.mark.e2e

# Examples per shard count: the unsharded pipeline gets the most; each sharded stack
# about 35 s more of make test (the examples differ by shard count only in routing).
EXAMPLES = {1: 80, 2: 20, 3: 20}
ZONES = ("zone-a", "zone-b", "zone-c")
TOPOLOGY_KEYS = (HOSTNAME, ZONE)


@dataclass
class PodSpec:
    cpu: str
    memory: str
    port: tuple[int, str, str] | None  # (hostPort, hostIP, protocol)
    anti: int | None  # index of the anti-affinity group, if any
    spread: int | None  # index of the spread group, if any


@dataclass
class Scenario:
    nodes: list[tuple[str, str, int, str]]  # (cpu, memory, pods, zone)
    anti_groups: list[str]  # topology key of each anti-affinity group
    spread_groups: list[tuple[int, str]]  # (maxSkew, topology key) of each spread group
    pods: list[PodSpec] = field(default_factory=list)


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    nodes = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["1", "2", "4"]),
                st.sampled_from(["1Gi", "2Gi", "4Gi"]),
                st.integers(2, 8),
                st.sampled_from(ZONES),
            ),
            min_size=2,
            max_size=6,
        )
    )
    anti_groups = draw(st.lists(st.sampled_from(TOPOLOGY_KEYS), max_size=2))
    spread_groups = draw(
        st.lists(st.tuples(st.integers(1, 2), st.sampled_from(TOPOLOGY_KEYS)), max_size=2)
    )
    port = st.tuples(
        st.sampled_from([8080, 9090]),
        st.sampled_from(["", "127.0.0.1"]),
        st.sampled_from(["TCP", "UDP"]),
    )
    pod = st.builds(
        PodSpec,
        cpu=st.sampled_from(["", "100m", "250m", "500m", "1"]),
        memory=st.sampled_from(["", "128Mi", "512Mi", "1Gi"]),
        port=st.none() | port,
        anti=st.none() | st.integers(0, len(anti_groups) - 1) if anti_groups else st.none(),
        spread=(st.none() | st.integers(0, len(spread_groups) - 1) if spread_groups else st.none()),
    )
    pods = draw(st.lists(pod, min_size=4, max_size=30))
    return Scenario(nodes, anti_groups, spread_groups, pods)


def build(scenario: Scenario, prefix: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [
        make_node(f"{prefix}-n{i}").capacity(cpu=cpu, memory=memory, pods=pods).zone(zone).obj()
        for i, (cpu, memory, pods, zone) in enumerate(scenario.nodes)
    ]
    objs = []
    for i, spec in enumerate(scenario.pods):
        pod = make_pod(f"{prefix}-p{i}").label("app", prefix)
        requests = {k: v for k, v in (("cpu", spec.cpu), ("memory", spec.memory)) if v}
        if requests:
            pod.req(**requests)
        if spec.port is not None:
            pod.host_port(*spec.port)
        if spec.anti is not None:
            group = f"{prefix}-anti{spec.anti}"
            pod.label("anti", group).anti_affinity("anti", group, scenario.anti_groups[spec.anti])
        if spec.spread is not None:
            group = f"{prefix}-spread{spec.spread}"
            max_skew, topology_key = scenario.spread_groups[spec.spread]
            pod.label("spread", group).spread(max_skew, topology_key, "spread", group)
        objs.append(pod.obj())
    return nodes, objs


def key(pod: dict[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


@pytest.fixture(scope="module", params=sorted(EXAMPLES), ids=lambda n: f"{n}-shards")
def scale_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalStack]:
    workdir: Path = tmp_path_factory.mktemp("scale") / "stack"
    stack = LocalStack(workdir, workers=4, binders=2, env={"KSCHED_LOG_LEVEL": "warning"})
    stack.shards = request.param
    try:
        stack.start_servers()
        stack.start_services()
        # 13 processes importing at once, none held back as `running` holds standbys
        stack.wait_ready(timeout=90)
        yield stack
    finally:
        stack.stop()


PREFIXES = (f"ex{i}" for i in itertools.count())


@pytest.mark.timeout(300)
def test_no_invalid_placement_with_four_workers(scale_stack: LocalStack) -> None:
    leaders = scale_stack.wait_shard_leaders("queue")
    assert all(leaders), f"a queue shard without a leader: {leaders}"
    ports = [leader.http_port for leader in leaders if leader is not None]
    before = asyncio.run(incoming_by_shard(ports))
    check_examples(scale_stack)
    # The examples' pods are spread over the shards by their names' partitions; a shard
    # that took none means the run did not exercise what it claims to.
    taken = [n - b for n, b in zip(asyncio.run(incoming_by_shard(ports)), before, strict=True)]
    assert all(taken), f"pods taken in per queue shard: {taken}"


def check_examples(stack: LocalStack) -> None:
    """Hypothesis's examples for this stack's shard count, all on this stack."""

    @settings(
        max_examples=EXAMPLES[stack.shards],
        deadline=None,
        # Shrinking re-runs the services many times; the failing example is printed whole.
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(scenario=scenarios())
    def example(scenario: Scenario) -> None:
        asyncio.run(run_example(stack, scenario, next(PREFIXES)))

    example()


async def run_example(stack: LocalStack, scenario: Scenario, prefix: str) -> None:
    nodes, pods = build(scenario, prefix)
    nc = await nats.connect(stack.nats_url)
    redis = aioredis.from_url(stack.redis_url)
    js = nc.jetstream()
    ports = [s.http_port for s in stack.services if s.name == "worker"]
    try:
        await publish_all(js, nodes)
        await wait_for_cache(redis, nodes, [], present=True)
        before = await assume_conflicts(ports)
        await schedule_and_check(nc, redis, nodes, pods)
        # --hypothesis-show-statistics shows how often workers collided at the cache
        event("assume conflicts", payload=await assume_conflicts(ports) - before)
    finally:  # also after a failure: Hypothesis runs a failing example again
        try:
            await publish_all(js, pods, "DELETED")
            await publish_all(js, nodes, "DELETED")
            await wait_for_cache(redis, nodes, pods, present=False)
        finally:
            await redis.aclose()
            await nc.close()


async def schedule_and_check(
    nc: NATS, redis: aioredis.Redis, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]
) -> None:
    tracker = PodTracker()
    await tracker.start(nc)
    by_key = {key(p): p for p in pods}
    for pod in pods:  # one at a time: the workers pop small batches, in parallel
        await publish_pod(nc.jetstream(), pod)
    commits = await settle(tracker, redis, list(by_key), timeout=60)

    assert all(tracker.pods[k].bind_count <= 1 for k in by_key), "a pod was bound twice"
    report = audit(nodes, by_key, {k: c.node for k, c in commits.items()})
    assert report.ok, report.lines()
    order = sorted(commits.values(), key=lambda c: c.placed_at)
    refused = replay(nodes, [(by_key[c.key], c.node) for c in order])
    assert refused == [], refused


async def wait_for_cache(
    redis: aioredis.Redis,
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    *,
    present: bool,
    timeout: float = 30,
) -> None:
    """Until the cache holds every one of `nodes` (present), or none of them and none
    of `pods` (not present)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    names = [n["metadata"]["name"] for n in nodes]
    pod_keys = [key(p) for p in pods]
    while loop.time() < deadline:
        held = [r is not None for r in await redis.hmget(keys.CACHE_NODEINFO, names)]
        if pod_keys:
            held += [r is not None for r in await redis.hmget(keys.CACHE_PODS, pod_keys)]
        if all(held) if present else not any(held):
            return
        await asyncio.sleep(0.02)
    raise TimeoutError(f"the cache did not {'add' if present else 'drop'} {names}")
