"""The watcher alone, its queue and cache played by the test over NATS: the next batch's
cache part goes out while the queue still holds the batch before it, and the order each
receiver sees, and the acks, stay those of the stream."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from shared.runtime.watermark import watcher_acked
from shared.subjects import CACHE_EVENTS, QUEUE_EVENTS
from shared.tools.client import publish_node, publish_pod
from shared.tools.devstack import LocalStack, running
from shared.tools.synthetic import make_node, make_pod
from shared.wire import pack, unpack
from tests.e2e.state import eventually

pytestmark = pytest.mark.e2e

WAIT = 20.0  # seconds, for what the watcher does next on a loaded machine


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    """The watcher alone (conftest's `nc` connects to its NATS)."""
    with running(LocalStack(tmp_path / "stack"), ["watcher"]) as st:
        yield st


class Receiver:
    """Queue or cache, as the test plays it: every message it received (with whether
    the queue was held then), answered at once unless it is the queue's and held."""

    def __init__(self, held: asyncio.Event | None = None) -> None:
        self.held = held  # set: replies wait (the queue busy with a batch)
        self.seen: list[tuple[dict[str, Any], bool]] = []

    def holding(self) -> bool:
        return self.held is not None and self.held.is_set()

    async def watch(self, msg: Msg) -> None:
        """Each message when it arrives (the replying subscription takes them in turn)."""
        self.seen.append((unpack(msg.data), self.holding()))

    async def answer(self, msg: Msg) -> None:
        while self.holding():
            await asyncio.sleep(0.01)
        events = unpack(msg.data)["events"]
        await msg.respond(pack({"applied": len(events), "freed": 0, "failed": []}))

    def carrying(self, what: str) -> list[bool]:
        """For each message whose items name `what`: whether the queue was held then."""
        return [held for body, held in self.seen if what in repr(body["events"])]


async def test_the_next_batch_reaches_the_cache_while_the_queue_holds_the_one_before(
    stack: LocalStack, nc: NATS
) -> None:
    held = asyncio.Event()
    queue, cache = Receiver(held), Receiver()
    for subject, receiver in ((QUEUE_EVENTS, queue), (CACHE_EVENTS, cache)):
        await nc.subscribe(subject, cb=receiver.watch)
        await nc.subscribe(subject, cb=receiver.answer)
    js = nc.jetstream()

    held.set()
    await publish_pod(js, make_pod("pod-first"))  # a pending pod: the queue's alone
    assert await eventually(lambda: _true(queue.carrying("pod-first")), WAIT)
    last = await publish_node(js, make_node("node-next"))  # a batch of its own, the cache's first

    # Old: the watcher waited for the queue's reply before it fetched the next batch.
    assert await eventually(lambda: _true(cache.carrying("node-next")), WAIT)
    assert held.is_set()
    held.clear()

    # The queue hears of the node only after it answered the batch before: never overtaken.
    assert await eventually(lambda: _true(queue.carrying("node-next")), WAIT)
    assert queue.carrying("node-next") == [False]
    assert await eventually(lambda: _acked_through(nc, last), WAIT)


async def _true(values: list[bool]) -> bool:
    return bool(values)


async def _acked_through(nc: NATS, seq: int) -> bool:
    return await watcher_acked(nc.jetstream()) >= seq
