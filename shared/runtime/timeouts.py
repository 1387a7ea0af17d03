"""Waiting with a time limit, without losing a cancellation.

Python 3.11's `asyncio.wait_for` returns the awaited result when the task that waits
is cancelled in the same loop iteration as that result arrives: the cancellation is
swallowed and the task runs on (CPython gh-86296; 3.12 rebuilt wait_for on
`asyncio.timeout`). A leader's hold() cancelled at shutdown just as a renewal landed
went on renewing for ever, and the shutdown waited on it for ever (CI,
test_lease_silent_store). `within` waits in the calling task under `asyncio.timeout`,
which tells its own expiry from a cancel from outside and re-raises the latter."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def within(awaitable: Awaitable[T], seconds: float | None) -> T:
    """`awaitable`'s result; TimeoutError once `seconds` pass first (None: no limit).
    On timeout the awaitable is cancelled, as with wait_for."""
    async with asyncio.timeout(seconds):
        return await awaitable
