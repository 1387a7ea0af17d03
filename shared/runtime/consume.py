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
                msgs = await psub.fetch(batch, timeout=1)
            except (TimeoutError, NatsTimeoutError):
                continue
            except Exception as err:
                log.warning("fetch failed: %s", err)
                await asyncio.sleep(0.5)
                continue
            await handle(msgs)
    finally:
        # Without this, draining the connection waits on the idle pull subscription.
        with contextlib.suppress(Exception):
            await psub.unsubscribe()
