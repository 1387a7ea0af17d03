"""The pull-consumer loop shared by every JetStream consumer in ksched."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext

log = logging.getLogger("ksched.consume")


# nats-py's fetch(n) returns at once what the stream has ready; but when nothing is
# ready it waits until n messages came or the timeout passed, so a trickle of
# messages would sit there for up to the whole timeout. So: take what is ready (or
# what comes within READY_WAIT); when idle, wait for a single message only, and
# take the rest that came with it on the next turn.
READY_WAIT = 0.02
IDLE_WAIT = 1.0


_ACK_V1_TOKENS = 9  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>


def stream_sequence(msg: Msg) -> int:
    """The message's stream sequence, read off its ack subject: Msg.metadata parses
    every field and builds a datetime, a cost per message on the watcher's hot path."""
    tokens = (msg.reply or "").split(".")
    if len(tokens) == _ACK_V1_TOKENS and tokens[0] == "$JS" and tokens[1] == "ACK":
        return int(tokens[5])
    return int(msg.metadata.sequence.stream)  # the v2 form (domains): the library's parse


async def _fetch(psub: JetStreamContext.PullSubscription, batch: int) -> list[Msg]:
    try:
        return await psub.fetch(batch, timeout=READY_WAIT)
    except (TimeoutError, NatsTimeoutError):
        return await psub.fetch(1, timeout=IDLE_WAIT)


async def consume_batches(
    psub: JetStreamContext.PullSubscription,
    handle: Callable[[list[Msg]], Awaitable[None]],
    stopping: asyncio.Event,
    *,
    batch: int,
) -> None:
    """Fetch up to `batch` messages at a time and hand them over until `stopping` is set.

    A lost connection is waited out (nats-py reconnects); the batch being
    handled when the loop stops is finished first.
    """
    try:
        while not stopping.is_set():
            try:
                msgs = await _fetch(psub, batch)
            except (TimeoutError, NatsTimeoutError):
                continue
            except Exception as err:
                log.warning("fetch failed: %s", err)
                await asyncio.sleep(0.5)
                continue
            # nats-py's fetch can return no message when a status reply of an earlier,
            # expired pull request arrives late: nothing to hand over (the handlers ack
            # the batch's last message, and the watcher died on an empty one).
            if msgs:
                await handle(msgs)
    finally:
        # Without this, draining the connection waits on the idle pull subscription.
        with contextlib.suppress(Exception):
            await psub.unsubscribe()
