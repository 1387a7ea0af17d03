"""A worker's refresh read a page at a time against a real Redis (shared/snapshot.py,
snapshot_delta.lua): no call reads more nodes than a page, and the snapshot ends the
same as one read whole, across runs of one generation longer than a page, runs that
cross a page's end, nodes that change, go and come between pages, and the cache's state
rewritten in another incarnation between pages."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shared.snapshot
from shared import keys
from shared.framework.types import NodeInfo, PodInfo
from shared.snapshot import Snapshot
from shared.tools.synthetic import make_node, make_pod
from shared.wire import pack, unpack
from tests.conftest import Server

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("small_page")]

PAGE = 7
NAME = re.compile(rb"n\d{3}")  # the nodes' names: each node a call returns
Hook = Callable[[int], Awaitable[None]]


class Cache:
    """Writes as the cache service does: each write gives its nodes one new generation,
    stores their records and the cache's generation, in one incarnation."""

    def __init__(self, redis: aioredis.Redis, incarnation: int = 1) -> None:
        self.redis = redis
        self.incarnation = incarnation
        self.generation = 0
        self.versions: dict[str, int] = {}

    async def write(self, names: list[str], gone: list[str] | None = None) -> None:
        gone = gone or []
        self.generation += 1
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(keys.state_key("cache"), "incarnation", self.incarnation)
        for name in names:
            version = self.versions[name] = self.versions.get(name, 0) + 1
            pipe.hset(keys.CACHE_NODEINFO, name, pack(_record(name, version, self.generation)))
        if gone:
            pipe.hdel(keys.CACHE_NODEINFO, *gone)
        pipe.zadd(keys.CACHE_GENERATIONS, dict.fromkeys([*names, *gone], self.generation))
        pipe.set(keys.CACHE_GENERATION, self.generation)
        await pipe.execute()

    async def rewrite(self, incarnation: int, names: list[str]) -> None:
        """Another incarnation of the state (a new leader rebuilt it): only `names`."""
        await self.redis.delete(keys.CACHE_NODEINFO, keys.CACHE_GENERATIONS)
        self.incarnation, self.generation = incarnation, 0
        await self.write(names)


def _record(name: str, version: int, generation: int) -> dict[str, Any]:
    info = NodeInfo(name)
    info.set_node(make_node(name, cpu="4"))
    info.add_pod(PodInfo.of(make_pod(f"{name}-v{version}", cpu="100m"), version))
    info.generation = generation
    return info.to_record()


class Calls:
    """`snapshot`'s script calls: how many nodes each returned, and the nodes as Redis
    held them right after it (what a refresh that ends there must hold); `between`
    (call number) runs after each, as a cache write landing between pages."""

    def __init__(
        self, snapshot: Snapshot, redis: aioredis.Redis, between: Hook | None = None
    ) -> None:
        self.counts: list[int] = []
        self.after: dict[str, tuple[int, list[str]]] = {}
        self._script = snapshot._script
        self._redis = redis
        self._between = between
        snapshot._script = self._call  # type: ignore[assignment]

    async def _call(self, **kwargs: Any) -> Any:
        flat = await self._script(**kwargs)
        self.after = await in_redis(self._redis)
        self.counts.append(sum(1 for x in flat if isinstance(x, bytes) and NAME.fullmatch(x)))
        if self._between is not None:
            await self._between(len(self.counts))
        return flat


async def in_redis(redis: aioredis.Redis) -> dict[str, tuple[int, list[str]]]:
    """Each node's generation and pods as Redis holds them."""
    records = await redis.hgetall(keys.CACHE_NODEINFO)
    return {name.decode(): _held(unpack(rec)) for name, rec in records.items()}


def _held(record: dict[str, Any]) -> tuple[int, list[str]]:
    info = NodeInfo.from_record(record, None)
    return info.generation, sorted(info.pods)


def held(snapshot: Snapshot) -> dict[str, tuple[int, list[str]]]:
    return {name: (info.generation, sorted(info.pods)) for name, info in snapshot.nodes.items()}


def names(first: int, n: int) -> list[str]:
    return [f"n{i:03d}" for i in range(first, first + n)]


@pytest.fixture
def small_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages of PAGE nodes (raising=False: the test runs, and fails, on a tree that
    does not page)."""
    monkeypatch.setattr(shared.snapshot, "REFRESH_PAGE", PAGE, raising=False)


async def seed(cache: Cache) -> None:
    """A run of one generation three pages long (a cache's first write), runs that cross
    a page's end, and single nodes."""
    await cache.write(names(0, 3 * PAGE + 2))
    await cache.write(names(100, 5))
    await cache.write(names(200, 4))
    for name in names(300, 3):
        await cache.write([name])


async def seeded(redis: aioredis.Redis, *, warm: bool) -> tuple[Cache, Snapshot]:
    """A cache that wrote `seed`, and a snapshot (that read it already: `warm`)."""
    cache = Cache(redis)
    await seed(cache)
    snapshot = Snapshot(redis)
    if warm:
        await snapshot.refresh()
    return cache, snapshot


async def refresh(snapshot: Snapshot, redis: aioredis.Redis, between: Hook | None = None) -> Calls:
    """`snapshot.refresh()`, none of whose calls read more than a page."""
    calls = Calls(snapshot, redis, between)
    await snapshot.refresh()
    assert max(calls.counts) <= shared.snapshot.REFRESH_PAGE
    return calls


async def test_a_first_refresh_reads_every_node_a_page_at_a_time(redis: aioredis.Redis) -> None:
    cache, snapshot = await seeded(redis, warm=False)
    calls = await refresh(snapshot, redis)
    assert len(calls.counts) > 1
    assert held(snapshot) == await in_redis(redis)
    assert snapshot.generation == cache.generation

    # The steady state: a few changed nodes, one call.
    await cache.write(["n001", "n101"])
    calls.counts.clear()
    await snapshot.refresh()
    assert calls.counts == [2]
    assert held(snapshot) == await in_redis(redis)


async def test_nodes_changing_between_pages_are_read_at_their_latest(redis: aioredis.Redis) -> None:
    cache, snapshot = await seeded(redis, warm=False)

    async def between(call: int) -> None:
        if call == 1:  # nodes of the long run, read already, move on: the rest shift
            await cache.write(names(0, 5))
        elif call == 2:  # read and not yet read, and one gone
            await cache.write(["n003", "n020", "n102", "n201"], gone=["n010"])
        elif call == 4:  # a new node, past the cursor
            await cache.write(["n400"])

    calls = await refresh(snapshot, redis, between)
    assert held(snapshot) == calls.after
    assert len(calls.counts) > 4  # the writes landed between pages
    assert "n010" not in snapshot.nodes
    assert snapshot.generation == cache.generation


async def test_nodes_asked_for_by_name_count_in_the_page(redis: aioredis.Redis) -> None:
    cache, snapshot = await seeded(redis, warm=True)
    await cache.write(names(0, 3))
    stale = names(100, 5) + names(200, 4) + names(300, 3)
    snapshot._stale.update(stale)  # the feed left them out of step
    for name in stale:
        del snapshot.nodes[name]  # so that the test sees them read again
    await refresh(snapshot, redis)
    assert held(snapshot) == await in_redis(redis)


async def test_another_incarnation_between_pages_starts_the_read_over(
    redis: aioredis.Redis,
) -> None:
    cache, snapshot = await seeded(redis, warm=True)
    await cache.rewrite(2, names(0, 2 * PAGE))  # another leader's state, read whole

    async def between(call: int) -> None:
        if call == 1:
            await cache.rewrite(3, names(50, 2 * PAGE + 3))

    calls = await refresh(snapshot, redis, between)
    assert snapshot.incarnation == 3
    assert held(snapshot) == calls.after


# Random writes (many nodes to a generation), a random page, writes landing between the
# pages: the paged read ends as Redis holds the nodes.
writes = st.lists(
    st.tuples(st.sets(st.integers(0, 29), min_size=1, max_size=30), st.booleans()),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    before=writes,
    meanwhile=writes,
    page_size=st.integers(1, 9),
    warm=st.booleans(),
)
def test_a_paged_read_equals_the_nodes_in_redis(
    redis_server: Server,
    monkeypatch: pytest.MonkeyPatch,
    before: list[tuple[set[int], bool]],
    meanwhile: list[tuple[set[int], bool]],
    page_size: int,
    warm: bool,
) -> None:
    monkeypatch.setattr(shared.snapshot, "REFRESH_PAGE", page_size, raising=False)
    asyncio.run(_paged_read(redis_server, before, meanwhile, warm))


async def _paged_read(
    server: Server,
    before: list[tuple[set[int], bool]],
    meanwhile: list[tuple[set[int], bool]],
    warm: bool,
) -> None:
    redis = aioredis.Redis(port=server.port)
    try:
        await redis.flushdb()
        cache = Cache(redis)
        await cache.write(names(0, 30))
        snapshot = Snapshot(redis)
        if warm:
            await snapshot.refresh()
        for chosen, delete in before:
            await _write(cache, chosen, delete)

        async def between(call: int) -> None:
            if call <= len(meanwhile):
                await _write(cache, *meanwhile[call - 1])

        calls = await refresh(snapshot, redis, between)
        assert held(snapshot) == calls.after
    finally:
        await redis.aclose()


async def _write(cache: Cache, chosen: set[int], delete: bool) -> None:
    """A write of the `chosen` nodes: deleted (those present), or changed (and added)."""
    chosen_names = [f"n{i:03d}" for i in sorted(chosen)]
    if delete:
        present = [n for n in chosen_names if await cache.redis.hexists(keys.CACHE_NODEINFO, n)]
        if present:
            await cache.write([], gone=present)
    else:
        await cache.write(chosen_names)
