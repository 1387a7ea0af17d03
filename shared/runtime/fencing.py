"""Fencing a leader's writes with its lease epoch (runtime/lease.py).

Epochs come from leader election's compare-and-set in the NATS KV bucket
(runtime/leasestore.py); Redis only remembers the newest one a leader wrote with
(`ksched:lease:<service>:epoch`, raised "set if greater" by shared/lua/fenced_write.lua).
A write below it is refused; the leader raises it at acquisition, at every renewal and
with every write, so a Redis that lost the key (a failover to a lagging replica, a
wipe) has the current epoch back within a retry period, or sooner.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from importlib.resources import files
from itertools import chain
from typing import Any

import msgpack
import redis.asyncio as aioredis
from redis.commands.core import AsyncScript
from redis.exceptions import ResponseError

from shared import keys
from shared.runtime.lease import Lease
from shared.runtime.leasestore import LeaseStore
from shared.sharding import delivery_lane

_FENCED_WRITE = files("shared.lua").joinpath("fenced_write.lua").read_text()


class Fenced(RuntimeError):
    """A newer leader exists: this process's writes are refused."""


# The script object of each client, made once: register_script hashes the script's text
# (SHA-1 of 3 kB) and builds the object again at every call, once per request served.
_SCRIPTS: weakref.WeakKeyDictionary[aioredis.Redis, AsyncScript] = weakref.WeakKeyDictionary()


def _script(redis: aioredis.Redis) -> AsyncScript:
    script = _SCRIPTS.get(redis)
    if script is None:
        script = _SCRIPTS[redis] = redis.register_script(_FENCED_WRITE)
    return script


async def _fenced_write(redis: aioredis.Redis, keys_: list[str], args: list[Any]) -> None:
    """One fenced_write call; Fenced when Redis has seen a newer epoch."""
    try:
        await _script(redis)(keys=keys_, args=args)
    except ResponseError as err:
        if "FENCED" not in str(err):
            raise
        raise Fenced(str(err)) from err


async def raise_epoch(redis: aioredis.Redis, service: str, epoch: int) -> None:
    """Bring Redis's epoch up to `epoch` (an empty fenced batch); Fenced when it has
    seen a newer one."""
    await _fenced_write(redis, [keys.lease_epoch_key(service)], [epoch])


async def epoch_floor(redis: aioredis.Redis, service: str) -> int:
    """The newest epoch Redis has seen for `service` (0: none)."""
    return int(await redis.get(keys.lease_epoch_key(service)) or 0)


# A batch travels packed (fenced_write.lua's packed form): redis-py encodes and frames
# every argument in Python, a dear step per field of a batch of hundreds of pod
# records and dearer than the write itself for a small one; msgpack packs all at once.
PACKED = "+"
_RAW = msgpack.Packer(use_bin_type=False)  # the format Redis's cmsgpack reads


def _encoded(value: Any) -> bytes:
    """An argument as redis-py would send it (its Encoder.encode)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"not a Redis argument: {type(value).__name__}")
    return repr(value).encode()


def pack_args(args: list[Any]) -> bytes:
    """Arguments as one msgpack array of strings, each as redis-py would have sent it."""
    return _RAW.pack(
        [
            a if a.__class__ is bytes else a.encode() if a.__class__ is str else _encoded(a)
            for a in args
        ]
    )


class FencedBatch:
    """Collects writes like a redis-py pipeline (the commands queue and cache use) and
    applies them in one fenced_write call: all, in order, or none when fenced.

    Refused before it is sent when this leader's lease is not current by its own clock
    (runtime/lease.py, Lease.current: e.g. the process was frozen past its renew
    deadline); Redis refuses it when a newer epoch wrote there. Either way `fence`
    deposes the leader at once."""

    def __init__(
        self, redis: aioredis.Redis, service: str, lease: Lease, fence: Callable[[], None]
    ) -> None:
        self._redis = redis
        self._service = service
        self._lease = lease
        self._fence = fence
        self._keys: list[str] = [keys.lease_epoch_key(service)]
        self._index: dict[str, int] = {}
        self._args: list[Any] = [lease.epoch]

    def _op(self, cmd: str, key: str, stride: int, args: list[Any]) -> None:
        index = self._index.get(key)
        if index is None:
            self._keys.append(key)
            index = self._index[key] = len(self._keys)
        self._args += [cmd, index, stride, len(args), *args]

    def hset(
        self,
        name: str,
        key: str | None = None,
        value: Any = None,
        mapping: dict[Any, Any] | None = None,
    ) -> None:
        args: list[Any] = [] if key is None else [key, value]
        args += chain.from_iterable((mapping or {}).items())
        self._op("HSET", name, 2, args)

    def hdel(self, name: str, *fields: str) -> None:
        self._op("HDEL", name, 1, list(fields))

    def zadd(self, name: str, mapping: dict[str, float]) -> None:
        args: list[Any] = []
        for member, score in mapping.items():
            args += [score, member]
        self._op("ZADD", name, 2, args)

    def set(self, name: str, value: Any) -> None:
        self._op("SET", name, 0, [value])

    def delete(self, name: str) -> None:
        self._op("DEL", name, 0, [])

    def expect(self, name: str, mapping: dict[str, Any]) -> None:
        """A precondition, first in the batch: hash `name` holds these field values, or
        nothing is written and execute raises the script's EXPECTED error."""
        args: list[Any] = []
        for field, value in mapping.items():
            args += [field, value]
        self._op("EXPECT", name, 2, args)

    def incr(self, name: str) -> None:
        self._op("INCR", name, 0, [])

    async def execute(self) -> None:
        epoch = self._args[0]
        if epoch != self._lease.epoch or not self._lease.current(time.monotonic()):
            self._fence()
            raise Fenced(f"{self._service}: lease of epoch {epoch} not current")
        args = [epoch, PACKED, pack_args(self._args[1:])] if len(self._args) > 1 else [epoch]
        try:
            await _fenced_write(self._redis, self._keys, args)
        except Fenced as err:
            self._fence()
            raise Fenced(f"{self._service}: {err}") from err


class EpochFloor:
    """Admits requests from the current leader of another service (the watcher's
    deliveries to queue and cache) and refuses a deposed one's: its epoch is older
    than the latest handed out. The lease bucket is read only when an epoch not seen
    yet comes: the bucket, not Redis, since it never goes back to an older epoch."""

    def __init__(self, store: LeaseStore, service: str) -> None:
        self._store = store
        self._service = service
        self._current = -1

    async def admit(self, epoch: Any) -> bool:
        if isinstance(epoch, bool) or not isinstance(epoch, int):
            return False
        if epoch == self._current:
            return True
        if epoch < self._current:
            return False
        # Newer than any seen: it must be the latest handed out (a forged one is not).
        self._current = await self._store.epoch(self._service)
        return epoch == self._current


class WatcherFloors:
    """Admits a delivery to queue or cache from the current leader of the watcher shard
    it names (its `shard`, none from an unsharded watcher: shared/sharding.py), each
    shard fenced by its own lease's epoch."""

    def __init__(self, store: LeaseStore) -> None:
        self._store = store
        self._floors: dict[str, EpochFloor] = {}

    async def admit(self, body: dict[str, Any]) -> str | None:
        """The delivery's lane, or None when it is refused (a deposed leader's epoch,
        or no shard number)."""
        lane = delivery_lane(body)
        if lane is None:
            return None
        floor = self._floors.get(lane)
        if floor is None:
            floor = self._floors[lane] = EpochFloor(self._store, lane)
        return lane if await floor.admit(body.get("epoch", 0)) else None
