"""New pending pods reach the queue beside the cache's part of their batch, not after
its reply (services/watcher/outbound.py take_early): the watcher and the queue alone,
no cache to answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from nats.aio.client import Client as NATS

from shared.runtime.connections import ensure_streams
from shared.subjects import CLUSTER_STREAM, QUEUE_PENDING
from shared.tools.client import publish_node, publish_pod
from shared.tools.devstack import LocalStack, running
from shared.tools.synthetic import make_node, make_pod
from tests.e2e.state import eventually

pytestmark = pytest.mark.e2e


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    """The queue alone; the test starts the watcher (conftest's `nc` connects to it)."""
    with running(LocalStack(tmp_path / "stack"), ["queue"]) as st:
        yield st


async def pending(nc: NATS) -> dict[str, str]:
    """The queue's pending pods: key -> sub-queue."""
    msg = await nc.request(QUEUE_PENDING, b"{}", timeout=5)
    return {p["key"]: p["queue"] for p in json.loads(msg.data)["pods"]}


async def test_a_new_pending_pod_reaches_the_queue_while_the_cache_has_not_answered(
    stack: LocalStack, nc: NATS
) -> None:
    js = nc.jetstream()
    await ensure_streams(js)
    # one batch: a node (the cache's, and a move for the queue after it) and a pod
    await publish_node(js, make_node("n1"))
    await publish_pod(js, make_pod("early"))
    stack.start_service("watcher")
    stack.wait_ready()

    async def queued() -> bool:
        return (await pending(nc)).get("default/early") == "active"

    # no cache runs: the node's delivery is never answered, and the pod came all the same
    assert await eventually(queued, timeout=20)
    # the rest of the batch waits for the cache: nothing acked, so nothing is lost
    infos = await js.consumers_info(CLUSTER_STREAM)
    watchers = [c for c in infos if (c.config.durable_name or "").startswith("watcher")]
    assert all(c.ack_floor is not None and c.ack_floor.stream_seq == 0 for c in watchers)
