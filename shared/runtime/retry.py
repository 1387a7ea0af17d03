"""Retry an async action until it succeeds: the servers will come back."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("ksched.retry")


async def retry_forever(
    what: str, action: Callable[[], Awaitable[object]], *, max_delay: float = 2.0
) -> None:
    delay = 0.05
    while True:
        try:
            await action()
            return
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log.warning("%s failed (%s); retrying", what, err)
            await asyncio.sleep(delay)
            delay = min(delay * 2, max_delay)
