"""Validation at the door, seen from outside: what the API server's validation refuses
goes to ksched.errors and never becomes a pod anywhere; fields its schema does not know
are warned about and the pod is scheduled, as for a client without strict validation."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any

import pytest
import redis.asyncio as aioredis
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from shared import keys
from shared.subjects import ERRORS_STREAM, error_subject, pod_subject
from shared.tools.cli.live import queue_pending
from shared.tools.client import PodTracker, publish_node, publish_pod
from shared.tools.devstack import LocalStack
from shared.tools.synthetic import make_node, make_pod
from tests.e2e.state import eventually
from tests.e2e.test_real_input import error_reason

pytestmark = pytest.mark.e2e


def watcher_metrics(stack: LocalStack) -> str:
    watcher = stack.leader("watcher")
    assert watcher is not None
    with urllib.request.urlopen(f"http://127.0.0.1:{watcher.http_port}/metrics", timeout=5) as r:
        return str(r.read().decode())


async def bind_one_more(nc: NATS, tracker: PodTracker, name: str) -> None:
    """Publish a pod and wait for its binding: the watcher, which reads the stream in
    order, has then handled every event published before it."""
    await publish_pod(nc.jetstream(), make_pod(name))
    assert await tracker.wait_until(lambda t: f"default/{name}" in t.bound(), timeout=30)


async def publish_on_a_node(nc: NATS, pod: dict[str, Any]) -> JetStreamContext:
    """A node "n1", then the pod."""
    js = nc.jetstream()
    await publish_node(js, make_node("n1"))
    await publish_pod(js, pod)
    return js


async def test_a_pod_without_containers_is_refused_and_never_becomes_a_pod(
    stack: LocalStack, nc: NATS, tracker: PodTracker
) -> None:
    empty = make_pod("empty")
    del empty["spec"]["containers"]
    js = await publish_on_a_node(nc, empty)
    reason = await error_reason(js, pod_subject("default", "empty"))
    assert reason == 'Pod "empty" is invalid: spec.containers: Required value'
    await bind_one_more(nc, tracker, "after")

    assert "default/empty" not in tracker.bound()
    assert "default/empty" not in tracker.unschedulable()  # no status written: no attempt
    pending = await queue_pending(nc)  # every queue shard's
    assert "default/empty" not in {p["key"] for p in pending["pods"]}
    client = aioredis.from_url(stack.redis_url)
    try:
        # the cache holds the pod published after it, never the refused one
        assert await eventually(lambda: client.hexists(keys.CACHE_PODS, "default/after"), 30)
        assert not await client.hexists(keys.CACHE_PODS, "default/empty")
    finally:
        await client.aclose()


async def test_a_pod_with_an_unknown_field_is_scheduled_and_warned_about_once(
    stack: LocalStack, nc: NATS, tracker: PodTracker
) -> None:
    typo = make_pod("typo")
    typo["spec"]["nodeSelecter"] = {"disk": "ssd"}  # the API server would drop it: no constraint
    js = await publish_on_a_node(nc, typo)
    assert await tracker.wait_until(lambda t: t.bound().get("default/typo") == "n1", timeout=30)
    # Past the binding too, which echoes the typo: warned about once, and ordinary pods
    # and ksched's writes about them bring no warning.
    await bind_one_more(nc, tracker, "plain")

    metrics = await asyncio.to_thread(watcher_metrics, stack)
    assert 'ksched_watch_event_warnings_total{kind="pod"} 1.0' in metrics
    watcher = stack.leader("watcher")
    assert watcher is not None
    warned = [
        json.loads(line)["msg"]
        for line in watcher.log_path.read_text().splitlines()
        if "warning on" in line
    ]
    assert warned == [
        'warning on ksched.cluster.pods.default.typo: unknown field "spec.nodeSelecter"'
    ]
    stream = await js.stream_info(
        ERRORS_STREAM, subjects_filter=error_subject(pod_subject("default", "typo"))
    )
    assert not stream.state.subjects
