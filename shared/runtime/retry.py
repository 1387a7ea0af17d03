"""Retry an async action until it succeeds: the servers will come back."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from shared.runtime.timeouts import within

T = TypeVar("T")

log = logging.getLogger("ksched.retry")


class Stopped(Exception):
    """The service stops: the action was given up between tries."""


async def retry_forever(
    what: str,
    action: Callable[[], Awaitable[T]],
    *,
    max_delay: float = 2.0,
    until: asyncio.Event | None = None,
) -> T:
    """The action's result, once it succeeds. With `until`, a failed action is not tried
    again once the event is set (raises Stopped): a service that stops gives up work its
    successor redoes (an unacked batch is redelivered) instead of retrying it through
    its whole shutdown grace against peers that are stopping too."""
    delay = 0.05
    while True:
        try:
            return await action()
        except asyncio.CancelledError:
            raise
        except Exception as err:
            if until is not None and until.is_set():
                raise Stopped(f"{what}: {err}") from err
            log.warning("%s failed (%s); retrying", what, err)
            if until is None:
                await asyncio.sleep(delay)
            else:
                with contextlib.suppress(TimeoutError):
                    await within(until.wait(), delay)
            delay = min(delay * 2, max_delay)
