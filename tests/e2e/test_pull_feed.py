"""PullFeed against a real nats-server: batches come as soon as a message is there,
in stream order, and an open request that ends empty hands nothing over."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig

from shared.runtime import consume
from shared.runtime.consume import PullFeed, consume_batches
from shared.tools.servers import Server

pytestmark = pytest.mark.e2e

STREAM, SUBJECT = "FEED", "feed.x"


@pytest.fixture
async def js(nats_server: Server) -> AsyncIterator[JetStreamContext]:
    client: NATS = await nats.connect(f"nats://127.0.0.1:{nats_server.port}")
    js = client.jetstream()
    await js.add_stream(name=STREAM, subjects=[SUBJECT])
    yield js
    await client.close()


async def feed(js: JetStreamContext, batch: int) -> PullFeed:
    psub = await js.pull_subscribe(SUBJECT, durable="c", stream=STREAM)
    return PullFeed(psub, batch)


def numbers(msgs: list[Msg]) -> list[int]:
    return [int(m.data) for m in msgs]


async def test_what_the_stream_holds_comes_in_order_a_batch_at_a_time(
    js: JetStreamContext,
) -> None:
    for i in range(25):
        await js.publish(SUBJECT, str(i).encode())
    f = await feed(js, batch=10)
    got = [numbers(await f.next_batch()) for _ in range(3)]
    assert got == [list(range(10)), list(range(10, 20)), list(range(20, 25))]


async def test_an_idle_feed_returns_on_the_first_message_not_after_its_request(
    js: JetStreamContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nats-py's fetch(n) waits for n messages or its whole timeout once the first came;
    here the open request lasts 30 s and one message must not wait for it."""
    monkeypatch.setattr(consume, "IDLE_WAIT", 30.0)
    f = await feed(js, batch=100)
    waiting = asyncio.create_task(f.next_batch())
    await asyncio.sleep(0.2)
    await js.publish(SUBJECT, b"1")
    assert numbers(await asyncio.wait_for(waiting, 10)) == [1]
    # The request stays open: later messages come through it, still in order.
    for i in range(2, 6):
        await js.publish(SUBJECT, str(i).encode())
    got: list[int] = []
    while len(got) < 4:
        got += numbers(await asyncio.wait_for(f.next_batch(), 10))
    assert got == [2, 3, 4, 5]


async def test_a_request_that_ends_empty_hands_nothing_over_and_the_next_one_works(
    js: JetStreamContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consume, "IDLE_WAIT", 0.3)
    psub = await js.pull_subscribe(SUBJECT, durable="c", stream=STREAM)
    stopping = asyncio.Event()
    handled: list[list[int]] = []

    async def handle(msgs: list[Msg]) -> None:
        handled.append(numbers(msgs))
        stopping.set()

    consumer = asyncio.create_task(consume_batches(psub, handle, stopping, batch=10))
    await asyncio.sleep(1.0)  # a few open requests expire with nothing
    await js.publish(SUBJECT, b"7")
    await asyncio.wait_for(consumer, 10)
    assert handled == [[7]]


async def test_a_refused_request_is_not_repeated_in_a_busy_loop(
    js: JetStreamContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consumer that takes one waiting request: a second feed's requests are refused
    at once (409 Exceeded MaxWaiting), and it pauses between them instead of spinning."""
    monkeypatch.setattr(consume, "IDLE_WAIT", 30.0)  # the first feed's request outlasts the test
    config = ConsumerConfig(max_waiting=1)
    first = await js.pull_subscribe(SUBJECT, durable="c", stream=STREAM, config=config)
    waiting = asyncio.create_task(PullFeed(first, 10).next_batch())
    await asyncio.sleep(0.2)  # its request is the one that waits
    second = PullFeed(await js.pull_subscribe_bind("c", stream=STREAM), 10)
    sent = 0
    request = second._request

    async def counted(body: dict[str, object]) -> None:
        nonlocal sent
        sent += 1
        await request(body)

    second._request = counted  # type: ignore[method-assign]
    loop = asyncio.get_running_loop()
    end = loop.time() + 1.0
    while loop.time() < end:
        assert await asyncio.wait_for(second.next_batch(), 5) == []
    assert sent <= 30, sent
    await js.publish(SUBJECT, b"3")  # the first feed is unaffected
    assert numbers(await asyncio.wait_for(waiting, 5)) == [3]
