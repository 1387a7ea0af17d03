"""Retry an async action until it succeeds: the servers will come back."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

log = logging.getLogger("ksched.retry")


async def retry_forever(
    what: str, action: Callable[[], Awaitable[T]], *, max_delay: float = 2.0
) -> T:
    """The action's result, once it succeeds."""
    delay = 0.05
    while True:
        try:
            return await action()
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log.warning("%s failed (%s); retrying", what, err)
            await asyncio.sleep(delay)
            delay = min(delay * 2, max_delay)
