"""Coalesced write-behind: many callers, one writer, nobody replies before its write lands."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable


class Flusher:
    """Callers change in-memory state, then `await flush()`.

    One write at a time persists everything dirty at that moment, so a burst of
    concurrent requests costs one Redis round trip, and a later write never
    overtakes an earlier one (which could leave an older view in Redis).
    """

    def __init__(self, write: Callable[[], Awaitable[None]]) -> None:
        self._write = write
        self._lock = asyncio.Lock()
        self._requested = 0
        self._done = 0

    async def flush(self) -> None:
        self._requested += 1
        ticket = self._requested
        async with self._lock:
            if self._done >= ticket:
                return  # a write that started after our change already covered it
            covered = self._requested
            await self._write()
            self._done = covered

    async def flush_quietly(self, log: logging.Logger) -> None:
        """Flush from a background loop: a failed write is logged and retried next time."""
        try:
            await self.flush()
        except Exception as err:
            log.warning("write to redis failed (will retry): %s", err)
