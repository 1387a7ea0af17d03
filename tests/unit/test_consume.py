"""The pull-consumer loop: an empty fetch is not a batch."""

from __future__ import annotations

import asyncio

import pytest
from nats.aio.msg import Msg

from shared.runtime.consume import consume_batches, stream_sequence


class Fetches:
    """Stands in for a PullSubscription: returns the given fetch results in turn."""

    def __init__(self, results: list[list[Msg]], stopping: asyncio.Event) -> None:
        self.results, self.stopping = results, stopping

    async def fetch(self, batch: int, timeout: float) -> list[Msg]:
        if len(self.results) == 1:
            self.stopping.set()
        return self.results.pop(0)

    async def unsubscribe(self) -> None:
        return None


async def test_an_empty_fetch_is_skipped_not_handed_over() -> None:
    stopping = asyncio.Event()
    msg = Msg(None, subject="s")  # type: ignore[arg-type]
    handled: list[list[Msg]] = []

    async def handle(msgs: list[Msg]) -> None:
        msgs[-1]  # the handlers ack the last message of a batch
        handled.append(msgs)

    psub = Fetches([[], [msg], []], stopping)
    await consume_batches(psub, handle, stopping, batch=10)  # type: ignore[arg-type]
    assert handled == [[msg]]


@pytest.mark.parametrize(
    "reply",
    [
        "$JS.ACK.KSCHED_CLUSTER.watcher-1.1.4711.42.1700000000000000000.3",
        "$JS.ACK._.ACCHASH.KSCHED_CLUSTER.watcher-1.2.987654.42.1700000000000000000.0.tok",
    ],
)
def test_stream_sequence_reads_what_the_library_reads(reply: str) -> None:
    msg = Msg(None, subject="s", reply=reply)  # type: ignore[arg-type]
    assert stream_sequence(msg) == msg.metadata.sequence.stream
    assert stream_sequence(msg) in (4711, 987654)
