"""A pop whose write fails (Redis failing over, or refusing writes) hands nothing out:
its pods go out with the next pop, not after their attempts' lease lapses. Seen in the
HA compose shape: the pods popped as the Redis primary died waited the full 15 s."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from pathlib import Path

import nats.errors
import pytest
import redis.asyncio as aioredis
from nats.aio.client import Client as NATS

from shared.runtime.rpc import RemoteError, request
from shared.subjects import QUEUE_PENDING, QUEUE_POP
from shared.tools.devstack import LocalStack, running
from tests.e2e.test_pop_reports import add_pods

pytestmark = pytest.mark.e2e

LEASE_SECONDS = 600  # far past the test: a pod held in flight would not come back


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    """The queue alone (conftest's `nc` connects to it), with a long attempt lease."""
    env = {"KSCHED_QUEUE_LEASE_SECONDS": str(LEASE_SECONDS)}
    with running(LocalStack(tmp_path / "stack", env=env), ["queue"]) as st:
        yield st


async def where(nc: NATS) -> dict[str, str]:
    msg = await nc.request(QUEUE_PENDING, b"{}", timeout=5)
    return {p["key"]: p["queue"] for p in json.loads(msg.data)["pods"]}


async def test_a_pop_not_written_hands_its_pods_to_the_next_pop(
    stack: LocalStack, nc: NATS
) -> None:
    await add_pods(nc, ["a", "b"])
    redis = aioredis.Redis.from_url(stack.redis_url)
    try:
        # a primary without the replica it needs refuses every write (NOREPLICAS), as a
        # failing-over Redis does, at once and every time
        await redis.config_set("min-replicas-to-write", 1)
        with pytest.raises(RemoteError, match="NOREPLICAS"):
            await request(nc, QUEUE_POP, {"max": 2, "wait_ms": 0})
        assert await where(nc) == {"default/a": "active", "default/b": "active"}
        await redis.config_set("min-replicas-to-write", 0)
        again = await request(nc, QUEUE_POP, {"max": 2, "wait_ms": 2000})
        assert sorted(p["key"] for p in again["pods"]) == ["default/a", "default/b"]
        assert {p["attempts"] for p in again["pods"]} == {1}  # the lost pop did not count
    finally:
        await redis.config_set("min-replicas-to-write", 0)
        await redis.aclose()


async def test_a_pop_written_after_its_worker_gave_up_is_put_back(
    stack: LocalStack, nc: NATS
) -> None:
    await add_pods(nc, ["a", "b"])
    assert stack.redis is not None
    redis_proc = stack.redis.proc
    redis_proc.send_signal(signal.SIGSTOP)  # the queue's write waits, unanswered
    try:
        with pytest.raises(nats.errors.TimeoutError):
            # the worker's own timeout, said in the pop: it stops waiting after 1.5 s
            await request(nc, QUEUE_POP, {"max": 2, "wait_ms": 0, "timeout_ms": 1500}, 1.5)
        await asyncio.sleep(1.0)  # the write still waits past that
    finally:
        redis_proc.send_signal(signal.SIGCONT)  # now it lands, after the worker gave up
    again = await request(nc, QUEUE_POP, {"max": 2, "wait_ms": 5000}, 10)
    assert sorted(p["key"] for p in again["pods"]) == ["default/a", "default/b"]
    log = "".join(s.log_path.read_text() for s in stack.services if s.name == "queue")
    assert "pop written after its worker gave up, 2 pods back to activeQ" in log
