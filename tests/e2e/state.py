"""Conditions on the stack's Redis state, which no event announces: polled until they hold."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio as aioredis

from shared import keys
from shared.wire import unpack


async def assumed_pods(client: aioredis.Redis) -> dict[str, dict[str, Any]]:
    records = [unpack(v) for v in (await client.hgetall(keys.CACHE_PODS)).values()]
    return {r["key"]: r for r in records if r["state"] == "assumed"}


async def eventually(predicate: Callable[[], Awaitable[bool]], timeout: float) -> bool:
    """Poll a condition on Redis state (no event tells when it changes)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if await predicate():
            return True
        await asyncio.sleep(0.1)
    return False
