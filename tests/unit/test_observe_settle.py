"""settle (shared/tools/observe.py) against a real Redis: the cache's commits and the
bindings seen must agree, except for pods the cache already forgot because they were
deleted, which this process hears of a moment later. With a preemptor evicting every
200 ms on a loaded machine there was never a moment with no eviction in flight, and a
PreemptionAsync bench run waited out its whole timeout with every pod long bound."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from shared import keys
from shared.tools.client import PodTracker, PodView
from shared.tools.observe import CACHE_ADDED, settle
from shared.wire import pack


async def commit(redis: aioredis.Redis, key: str, node: str, state: str = CACHE_ADDED) -> None:
    await redis.hset(keys.CACHE_PODS, key, pack({"node": node, "state": state, "placed_at": 1}))


def bound(tracker: PodTracker, key: str, node: str) -> None:
    tracker.pods[key] = PodView(node=node, scheduled="True")


async def test_agreeing_commits_and_bindings_settle(redis: aioredis.Redis) -> None:
    tracker = PodTracker()
    bound(tracker, "m/a", "n1")
    await commit(redis, "m/a", "n1")
    assert set(await settle(tracker, redis, ["m/a"], timeout=5)) == {"m/a"}


async def test_evictions_always_in_flight_do_not_hold_a_settle_back(
    redis: aioredis.Redis,
) -> None:
    """A victim every 100 ms, each forgotten by the cache 150 ms before this process
    hears of its deletion: at any moment one eviction is in flight. The pods that
    stay bound agree, so it settles."""
    tracker = PodTracker()
    bound(tracker, "m/a", "n1")
    await commit(redis, "m/a", "n1")
    victims = [f"m/victim-{i}" for i in range(100)]
    for key in victims:
        bound(tracker, key, "n2")
        await commit(redis, key, "n2")
    loop = asyncio.get_running_loop()

    def heard(key: str) -> None:
        tracker.pods[key].deleted = True
        tracker.changed.set()

    async def evict() -> None:
        for key in victims:
            await redis.hdel(keys.CACHE_PODS, key)  # the cache applied the deletion
            loop.call_later(0.15, heard, key)
            await asyncio.sleep(0.1)

    evicting = asyncio.create_task(evict())
    await asyncio.sleep(0.3)  # evictions under way
    try:
        settled = await settle(tracker, redis, ["m/a", *victims], timeout=5)
    finally:
        evicting.cancel()
    assert "m/a" in settled
    assert not any(tracker.pods[k].deleted for k in settled)


@pytest.mark.parametrize(
    "cache_state",
    [
        pytest.param(None, id="bound, and the cache holds no commit"),
        pytest.param(("n2", CACHE_ADDED), id="committed to another node"),
        pytest.param(("n1", "assumed"), id="never confirmed"),
    ],
)
async def test_a_disagreement_that_is_no_deletion_never_settles(
    redis: aioredis.Redis, cache_state: tuple[str, str] | None
) -> None:
    tracker = PodTracker()
    bound(tracker, "m/a", "n1")
    if cache_state is not None:
        await commit(redis, "m/a", *cache_state)
    with pytest.raises(TimeoutError):
        await settle(tracker, redis, ["m/a"], timeout=0.5)
