"""The Redis side of leader election (runtime/lease.py) and of fencing a leader's writes.

The lease is one Redis hash per service, taken and renewed by one Lua script (so
a try is atomic) and expired by Redis itself. The leader's writes go through
`FencedBatch`, one Lua script that checks the epoch first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from importlib.resources import files
from typing import Any

import redis.asyncio as aioredis
from redis import Redis as SyncRedis
from redis.exceptions import ResponseError

from shared import keys
from shared.runtime.lease import Lease, LeaseConfig, Observed, Role

log = logging.getLogger("ksched.leaderelection")

_LUA = files("shared.lua")
_ACQUIRE = _LUA.joinpath("lease_acquire.lua").read_text()
_RELEASE = _LUA.joinpath("lease_release.lua").read_text()
_FENCED_WRITE = _LUA.joinpath("fenced_write.lua").read_text()


class Fenced(RuntimeError):
    """A newer leader exists: this process's writes are refused."""


Stalled = Callable[[float], str | None]  # runtime/progress.py Progress.stalled


class LeaderElector:
    """Stands by and takes the lease on the event loop; renews it from a thread of its
    own when given a synchronous client (`renewer`), as kube's elector runs beside the
    scheduling loop: a handler that holds the loop for a while (a large assume batch
    on a busy machine) must not cost the lease. Fencing still guards every write.

    A live thread is not progress: before each renewal the leader asks `stalled`
    (runtime/progress.py, given the monotonic time) and, found stalled at two
    renewals in a row, releases its lease at once and counts it as lost."""

    def __init__(
        self,
        redis: aioredis.Redis,
        service: str,
        identity: str,
        config: LeaseConfig,
        renewer: SyncRedis | None = None,
        stalled: Stalled | None = None,
    ) -> None:
        self.redis = redis
        self.service = service
        self.lease = Lease(config, identity)
        self.lost = asyncio.Event()
        self._keys = [keys.lease_key(service), keys.lease_epoch_key(service)]
        self._acquire = redis.register_script(_ACQUIRE)
        self._release = redis.register_script(_RELEASE)
        self._write = redis.register_script(_FENCED_WRITE)
        self._renewer = renewer
        self._acquire_sync = renewer.register_script(_ACQUIRE) if renewer is not None else None
        self._release_sync = renewer.register_script(_RELEASE) if renewer is not None else None
        self._stalled = stalled

    def _args(self) -> list[str | int]:
        lease = self.lease
        return [lease.identity, lease.epoch, int(lease.config.lease_duration * 1000)]

    def _conclude(self, raw: list[Any] | None, err: Exception | None) -> None:
        if err is not None:
            log.warning("%s lease: try failed: %s", self.service, err)
            self.lease.failed(time.monotonic())
        elif raw is not None:
            self.lease.observe(time.monotonic(), _observed(raw))

    async def try_once(self) -> None:
        budget = max(self.lease.budget(time.monotonic()), 0.1)
        try:
            raw = await asyncio.wait_for(self._acquire(keys=self._keys, args=self._args()), budget)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            self._conclude(None, err)
        else:
            self._conclude(raw, None)
        if self.lease.role is Role.LOST:
            self.lost.set()

    async def acquire(self) -> None:
        """Stand by until this process leads."""
        log.info("%s: standing by for the lease as %s", self.service, self.lease.identity)
        while True:
            await self.try_once()
            if self.lease.leading:
                log.info("%s: leading with epoch %d", self.service, self.lease.epoch)
                return
            await asyncio.sleep(self.lease.next_try_in(time.monotonic()))

    async def hold(self) -> None:
        """Renew every retry period; return once the lease is lost."""
        if self._renewer is None:
            while not self.lost.is_set():
                await asyncio.sleep(self.lease.next_try_in(time.monotonic()))
                reason = self._stall()
                if reason is not None:
                    self._giving_up(reason)
                    await self.release()
                    self.lease.give_up()
                    self.lost.set()
                    break
                await self.try_once()
        else:
            stop = threading.Event()
            loop = asyncio.get_running_loop()
            renewing = threading.Thread(
                target=self._renew_forever, args=(loop, stop), name="lease", daemon=True
            )
            renewing.start()
            try:
                await self.lost.wait()
            finally:
                stop.set()
        log.error(
            "%s: leader election lost (epoch %d, holder now %r)",
            self.service,
            self.lease.epoch,
            self.lease.holder,
        )

    def _renew_forever(self, loop: asyncio.AbstractEventLoop, stop: threading.Event) -> None:
        assert self._acquire_sync is not None
        while not stop.wait(self.lease.next_try_in(time.monotonic())):
            reason = self._stall()
            if reason is not None:
                self._giving_up(reason)
                self._release_now()
                self.lease.give_up()
                self._tell_loop(loop, stop)
                return
            try:
                raw = self._acquire_sync(keys=self._keys, args=self._args())
            except Exception as err:
                self._conclude(None, err)
            else:
                self._conclude(raw, None)
            if self.lease.role is Role.LOST:
                loop.call_soon_threadsafe(self.lost.set)
                return

    def _stall(self) -> str | None:
        """Why this leader must give its lease up (runtime/lease.py Lease.stalled)."""
        if self._stalled is None:
            return None
        reason = self._stalled(time.monotonic())
        return reason if self.lease.stalled(reason) else None

    def _giving_up(self, reason: str) -> None:
        log.error(
            "%s: no progress, giving up the lease (epoch %d): %s",
            self.service,
            self.lease.epoch,
            reason,
            extra={"reason": reason},
        )

    def _release_args(self) -> list[str | int]:
        return [self.lease.identity, self.lease.epoch]

    def _release_now(self) -> None:
        """From the lease thread: hand the lease back so a standby takes over at its
        next try (else it lapses by itself within a lease duration)."""
        assert self._release_sync is not None
        try:
            self._release_sync(keys=self._keys[:1], args=self._release_args())
            log.info("%s: lease released", self.service)
        except Exception as err:
            log.warning("%s: lease release failed: %s", self.service, err)

    def _tell_loop(self, loop: asyncio.AbstractEventLoop, stop: threading.Event) -> None:
        """Set `lost` on the loop, which then aborts the service. A loop that does not
        take it within the renew deadline is blocked for good: exit from here, as the
        loop would (its successor already leads; fencing refuses the rest)."""
        with contextlib.suppress(RuntimeError):  # the loop is closed: the process ends
            loop.call_soon_threadsafe(self.lost.set)
        if stop.wait(self.lease.config.renew_deadline):
            return
        log.critical("%s: the event loop is blocked and cannot stop; exiting", self.service)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(1)

    async def release(self) -> None:
        if not self.lease.leading:
            return
        try:
            await self._release(keys=self._keys[:1], args=self._release_args())
            log.info("%s: lease released", self.service)
        except Exception as err:  # it lapses by itself
            log.warning("%s: lease release failed: %s", self.service, err)

    def close(self) -> None:
        if self._renewer is not None:
            self._renewer.close()

    def batch(self) -> FencedBatch:
        """A batch of writes that lands only while this leader's epoch is current."""
        return FencedBatch(self, self._keys[1])

    def fence(self) -> None:
        """Redis refused our epoch: stop at once, whatever the renew loop believes."""
        self.lease.role = Role.LOST
        self.lost.set()


def _observed(raw: list[Any]) -> Observed:
    acquired, epoch, holder, pttl = raw
    return Observed(
        acquired=bool(acquired),
        epoch=int(epoch),
        holder=holder.decode() if isinstance(holder, bytes) else str(holder),
        remaining=int(pttl) / 1000,
    )


class FencedBatch:
    """Collects writes like a redis-py pipeline (the commands queue and cache use) and
    applies them in one fenced_write call: all, in order, or none when fenced."""

    def __init__(self, elector: LeaderElector, epoch_key: str) -> None:
        self._elector = elector
        self._keys: list[str] = [epoch_key]
        self._index: dict[str, int] = {}
        self._args: list[Any] = [elector.lease.epoch]

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
        for field, val in (mapping or {}).items():
            args += [field, val]
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
        elector = self._elector
        if elector.lost.is_set():
            raise Fenced(f"{elector.service}: not leading")
        try:
            await elector._write(keys=self._keys, args=self._args)
        except ResponseError as err:
            if "FENCED" not in str(err):
                raise
            elector.fence()
            raise Fenced(f"{elector.service}: {err}") from err


class EpochFloor:
    """Admits requests from the current leader of another service (the watcher's
    deliveries to queue and cache) and refuses a deposed one's: its epoch is older
    than the latest handed out. Redis is read only when an epoch not seen yet comes."""

    def __init__(self, redis: aioredis.Redis, service: str) -> None:
        self._redis = redis
        self._key = keys.lease_epoch_key(service)
        self._current = -1

    async def admit(self, epoch: Any) -> bool:
        if isinstance(epoch, bool) or not isinstance(epoch, int):
            return False
        if epoch == self._current:
            return True
        if epoch < self._current:
            return False
        # Newer than any seen: it must be the latest handed out (a forged one is not).
        self._current = int(await self._redis.get(self._key) or 0)
        return epoch == self._current
