"""The I/O side of leader election (runtime/lease.py).

Each try reads the service's lease record from the NATS KV bucket
(runtime/leasestore.py), lets the state machine decide, and writes with a
compare-and-set on the revision it read. Once a write lands, the leader raises its
epoch in Redis, where its writes are fenced (runtime/fencing.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum

import nats.errors
import redis.asyncio as aioredis
from nats.js.errors import NoStreamResponseError, ServiceUnavailableError

from shared.runtime.fencing import Fenced, FencedBatch, epoch_floor, raise_epoch
from shared.runtime.lease import Lease, LeaseConfig, LeaseRecord, Role
from shared.runtime.leasestore import LeaseStore, Outraced
from shared.runtime.timeouts import within

log = logging.getLogger("ksched.leaderelection")

Stalled = Callable[[float], str | None]  # runtime/progress.py Progress.stalled

# What a read of the lease bucket raises when no answer came: none in time (lost with its
# server, or sent while the bucket's Raft group had no leader), no responder, or 503.
UNANSWERED = (
    TimeoutError,
    nats.errors.NoRespondersError,
    NoStreamResponseError,
    ServiceUnavailableError,
)
# A try that failed with one of these heard nothing from the bucket (unanswered, or the
# connection to it down): no verdict against the holder (runtime/lease.py Lease.failed).
SILENT = (
    *UNANSWERED,
    OSError,  # TimeoutError included: the try's budget spent on reads nobody answered
    nats.errors.ConnectionClosedError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.NoServersError,
    nats.errors.StaleConnectionError,
)


@dataclass
class LeaseClients:
    """Where an elector's tries go: the lease bucket, and the Redis whose fence its
    epoch raises; `close` closes what was opened for these clients alone."""

    store: LeaseStore
    redis: aioredis.Redis
    close: Callable[[], Awaitable[None]] | None = None


# Opens clients of their own in the running event loop (the lease thread's).
OpenClients = Callable[[], Awaitable[LeaseClients]]
GetClients = Callable[[], Awaitable[LeaseClients]]


class Held(Enum):
    """How renewing ended."""

    STOPPED = "stopped"  # asked to stop (the service stops, or was fenced)
    LOST = "lost"  # taken over, or not renewed within the renew deadline
    GAVE_UP = "gave up"  # released for want of progress


class LeaderElector:
    """Stands by and takes the lease on the service's event loop; renews it from a
    thread of its own when given `renewer` (which opens the thread's own NATS
    connection and Redis client: nats-py is asyncio only, so the thread runs an event
    loop of its own), as kube's elector runs beside the scheduling loop: a handler that
    holds the loop for a while must not cost the lease. Fencing still guards every
    write.

    A live thread is not progress: before each renewal the leader asks `stalled`
    (runtime/progress.py, given the monotonic time) and, found stalled at two
    renewals in a row, releases its lease at once and counts it as lost."""

    def __init__(
        self,
        clients: LeaseClients,
        service: str,
        identity: str,
        config: LeaseConfig,
        renewer: OpenClients | None = None,
        stalled: Stalled | None = None,
    ) -> None:
        self.clients = clients
        self.service = service
        self.lease = Lease(config, identity)
        self.lost = asyncio.Event()
        self._renewer = renewer
        self._stalled = stalled
        # When the running try last asked the bucket (its read, sent again every half
        # retry period): what an unanswered try that overran its budget keeps the lease
        # current from (runtime/lease.py Lease.failed).
        self._asked = 0.0
        self._raising: asyncio.Task[None] | None = None  # the epoch raise in flight

    async def _loop_clients(self) -> LeaseClients:
        return self.clients

    # --- one try ---------------------------------------------------------------------

    async def try_once(self) -> None:
        await self._try(self._loop_clients)
        if self.lease.role is Role.LOST:
            self.lost.set()

    async def _try(self, clients: GetClients) -> None:
        started = self._asked = time.monotonic()
        budget = max(self.lease.budget(started), 0.1)
        try:
            await within(self._attempt(clients, started), budget)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log.warning("%s lease: try failed: %s", self.service, str(err) or type(err).__name__)
            ended = time.monotonic()
            if not isinstance(err, SILENT):
                self.lease.failed(ended)
                return
            # Silent until it ended, unless it overran its budget (the thread was frozen
            # or starved mid-try): then only its last ask is known to be in time.
            overran = ended - started > budget + self.lease.config.retry_period / 2
            self.lease.failed(ended, started, self._asked if overran else ended)

    async def _attempt(self, get: GetClients, started: float) -> None:
        """kube's tryAcquireOrRenew: read, decide, compare-and-set; read again within the
        try when the write went unanswered for half a retry period or found the
        revision moved (client-go too retries a conflict until the renew deadline)."""
        clients, lease = await get(), self.lease
        while True:
            record, revision = await self._read(clients.store)
            if not lease.read(time.monotonic(), record, revision):
                return
            renewing = lease.leading
            floor = 0 if renewing else await self._floor(clients.redis)
            claim = lease.claim(time.time(), floor)
            landed = await self._write(clients.store, claim, revision)
            if landed is not None:
                break
        lease.wrote(started, claim, landed)
        if renewing:
            self._raise_epoch_apart(clients.redis)
        else:  # a new term: its epoch in Redis at once where it answers
            await self._raise_epoch(clients.redis)

    async def _write(self, store: LeaseStore, claim: LeaseRecord, revision: int) -> int | None:
        """The claim's new revision; None when the write went unanswered for half a retry
        period, or found the revision moved. A write lost when the bucket's Raft leader
        stepped down (a frozen server thawing into a group that had elected another)
        used to be waited on until the renew deadline, while a standby that met the
        same silence took over a lease duration less the renew deadline after the
        bucket answered it. Either way the next read says whose the record is: a copy
        of ours that landed late reads as our own term and is renewed, another's term
        is a loss (runtime/lease.py Lease.read)."""
        self._asked = time.monotonic()
        pace = self.lease.config.retry_period / 2
        try:
            return await within(store.write(self.service, claim, revision), pace)
        except Outraced as err:
            log.info("%s lease: %s; reading again", self.service, err)
        except UNANSWERED as err:
            log.warning(
                "%s lease: write unanswered (%s); reading again",
                self.service,
                str(err) or type(err).__name__,
            )
        return None

    async def _read(self, store: LeaseStore) -> tuple[LeaseRecord | None, int]:
        """The lease record, asked for again every half retry period until one of the
        reads is answered (the try's budget bounds the whole). A read lost with its
        NATS server, or sent while the bucket had no Raft leader, is never answered:
        waiting on it spent a leader's whole renew deadline on one request and cost it
        the lease, though the bucket answered again long before. Earlier reads stay
        pending, so a slow bucket is not asked in vain; a read changes nothing, so
        asking twice is safe. A write is not asked again: an unanswered one is followed
        by a read (`_write`)."""
        pace = self.lease.config.retry_period / 2
        asking: set[asyncio.Task[tuple[LeaseRecord | None, int]]] = set()
        try:
            while True:
                asked = self._asked = time.monotonic()
                asking.add(asyncio.create_task(store.read(self.service)))
                while (left := asked + pace - time.monotonic()) > 0:
                    if not asking:  # all refused at once (no leader yet): pace them
                        await asyncio.sleep(left)
                        break
                    done, asking = await asyncio.wait(
                        asking, timeout=left, return_when=asyncio.FIRST_COMPLETED
                    )
                    if not done:
                        break
                    answered = _answer(done)
                    if answered is not None:
                        return answered
                log.debug("%s lease: read unanswered; asking again", self.service)
        finally:
            for task in asking:
                task.cancel()
                if task.done() and not task.cancelled():
                    task.exception()  # retrieved: no "never retrieved" at collection

    async def _floor(self, redis: aioredis.Redis) -> int:
        """The newest epoch Redis has seen, for a takeover to start above it; 0 when
        Redis does not answer (the bucket's epochs are what count)."""
        try:
            return await within(epoch_floor(redis, self.service), 1.0)
        except Exception as err:
            log.warning("%s lease: no epoch floor from redis: %s", self.service, err)
            return 0

    def _raise_epoch_apart(self, redis: aioredis.Redis) -> None:
        """A renewal raises the epoch in a task of its own, one at a time, not within
        the try. A silent Redis (its primary's host cut off) held each try that had
        renewed until its budget ran out: counted unanswered as if the lease store were
        silent, renewals only every renew deadline, and the raise cancelled each time
        before redis-py could time out and reconnect to the new primary. A new leader
        raises it before serving all the same (fence_raised)."""
        loop, raising = asyncio.get_running_loop(), self._raising
        if raising is not None and not raising.done() and raising.get_loop() is loop:
            return  # the last one is still on its way
        self._raising = loop.create_task(self._raise_epoch(redis))

    async def _stop_raising(self) -> None:
        """The lease thread's raise in flight ends with the thread's loop."""
        raising, self._raising = self._raising, None
        if raising is not None and raising.get_loop() is asyncio.get_running_loop():
            raising.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await raising

    async def _raise_epoch(self, redis: aioredis.Redis) -> None:
        """Write our epoch into Redis, set if greater: after a Redis failover that lost
        it, a deposed leader's writes are refused again from here on."""
        try:
            await raise_epoch(redis, self.service, self.lease.epoch)
        except Fenced as err:  # a newer epoch than the bucket's: our writes will say
            log.error("%s lease: redis knows a newer epoch: %s", self.service, err)
        except Exception as err:  # Redis is away: the next renewal or write raises it
            log.warning("%s lease: could not raise redis's epoch: %s", self.service, err)

    # --- standing by, holding, releasing -----------------------------------------------

    async def acquire(self) -> None:
        """Stand by until this process leads."""
        log.info("%s: standing by for the lease as %s", self.service, self.lease.identity)
        while True:
            await self.try_once()
            if self.lease.leading:
                log.info("%s: leading with epoch %d", self.service, self.lease.epoch)
                return
            await asyncio.sleep(self.lease.next_try_in(time.monotonic()))

    async def fence_raised(self) -> None:
        """Before a new leader serves: its epoch in Redis, asked until it lands (the
        raise at acquisition is let go when Redis is away). A predecessor that kept its
        lease through a silent lease store (runtime/lease.py) may still be writing; from
        here on Redis refuses its writes, so nothing it writes lands after this leader
        has read its state. Fenced (a newer epoch exists): this leader is deposed."""
        delay = self.lease.config.retry_period / 2
        while not self.lost.is_set():
            try:
                await raise_epoch(self.clients.redis, self.service, self.lease.epoch)
                return
            except Fenced as err:
                log.error("%s lease: redis knows a newer epoch: %s", self.service, err)
                self.fence()
                return
            except Exception as err:
                log.warning("%s lease: raising redis's epoch failed: %s", self.service, err)
                await _set_within(self.lost, delay)

    async def hold(self) -> None:
        """Renew every retry period; return once the lease is lost."""
        if self._renewer is None:
            if await self._renew(self._loop_clients, self.lost) is not Held.STOPPED:
                self.lost.set()
            await self._stop_raising()
        else:
            await self._hold_from_thread(self._renewer)
        log.error(
            "%s: leader election lost (epoch %d): %s",
            self.service,
            self.lease.epoch,
            self.lease.lost_because or "stopped",
            extra={"reason": self.lease.lost_because},
        )

    async def _hold_from_thread(self, renewer: OpenClients) -> None:
        loop = asyncio.get_running_loop()
        apart = asyncio.new_event_loop()
        stop = asyncio.Event()  # of the thread's loop: set through call_soon_threadsafe
        ended = loop.create_future()
        renewing = threading.Thread(
            target=self._renew_apart,
            args=(apart, stop, renewer, loop, ended),
            name="lease",
            daemon=True,
        )
        renewing.start()
        try:
            await self.lost.wait()
        finally:
            with contextlib.suppress(RuntimeError):  # the thread's loop has closed
                apart.call_soon_threadsafe(stop.set)
            # The thread's last try must end before anyone else touches the lease
            # (a release at shutdown writes at the revision it saw).
            with contextlib.suppress(Exception):
                await within(asyncio.shield(ended), self.lease.config.renew_deadline)

    async def _renew(self, get: GetClients, stop: asyncio.Event) -> Held:
        """Renew until `stop` is set or the lease is lost (given up for want of progress
        included: then released first)."""
        while not await _set_within(stop, self.lease.next_try_in(time.monotonic())):
            reason = self._stall()
            if reason is not None:
                self._giving_up(reason)
                with contextlib.suppress(Exception):
                    await self._release(await get())
                self.lease.give_up()
                return Held.GAVE_UP
            await self._try(get)
            if self.lease.role is Role.LOST:
                return Held.LOST
        return Held.STOPPED

    def _renew_apart(
        self,
        apart: asyncio.AbstractEventLoop,
        stop: asyncio.Event,
        renewer: OpenClients,
        loop: asyncio.AbstractEventLoop,
        ended: asyncio.Future[None],
    ) -> None:
        """The lease thread: renews on its own event loop with its own clients."""
        try:
            apart.run_until_complete(self._renew_with(renewer, stop, loop))
        finally:
            apart.close()
            with contextlib.suppress(RuntimeError):  # the service's loop has closed
                loop.call_soon_threadsafe(_resolve, ended)

    async def _renew_with(
        self, renewer: OpenClients, stop: asyncio.Event, loop: asyncio.AbstractEventLoop
    ) -> None:
        opened: list[LeaseClients] = []

        async def get() -> LeaseClients:
            if not opened:  # at the first try: a failure to connect is a failed try
                opened.append(await renewer())
            return opened[0]

        try:
            held = await self._renew(get, stop)
            if held is not Held.STOPPED:
                with contextlib.suppress(RuntimeError):  # the loop is closed: it ends
                    loop.call_soon_threadsafe(self.lost.set)
            if held is Held.GAVE_UP:
                await self._exit_unless_stopped(stop)
        finally:
            await self._stop_raising()
            for clients in opened:
                if clients.close is not None:
                    with contextlib.suppress(Exception):
                        await clients.close()

    async def _exit_unless_stopped(self, stop: asyncio.Event) -> None:
        """`lost` is set on the service's loop, which then aborts the service. A loop
        that has not stopped this thread within the renew deadline is blocked for good:
        exit from here, as the loop would (its successor may lead already; fencing
        refuses the rest)."""
        if await _set_within(stop, self.lease.config.renew_deadline):
            return
        log.critical("%s: the event loop is blocked and cannot stop; exiting", self.service)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(1)

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

    async def _release(self, clients: LeaseClients) -> None:
        """Hand the lease back (kube's ReleaseOnCancel) so that a standby takes over at
        its next try instead of after a lease duration: the record, still ours at the
        revision read, without a holder. Else it lapses by itself."""
        lease = self.lease
        record, revision = await clients.store.read(self.service)
        if not lease.read(time.monotonic(), record, revision):
            return
        released = lease.released(time.time())
        if released is not None:
            await clients.store.write(self.service, released, revision)
            log.info("%s: lease released (epoch %d)", self.service, lease.epoch)

    async def release(self) -> None:
        """At shutdown: release the lease if this process leads; it leads no more."""
        if not self.lease.leading:
            return
        try:
            await within(self._release(self.clients), self.lease.config.retry_period)
        except Exception as err:  # it lapses by itself
            log.warning("%s: lease release failed: %s", self.service, err)
        self.lease.give_up("released at shutdown")

    def batch(self) -> FencedBatch:
        """A batch of writes that lands only while this leader's epoch is current."""
        return FencedBatch(self.clients.redis, self.service, self.lease, self.fence)

    def fence(self) -> None:
        """A write was refused: stop at once, whatever the renew loop believes."""
        self.lease.fenced()
        self.lost.set()


async def _set_within(event: asyncio.Event, seconds: float) -> bool:
    """Whether `event` is set within `seconds`."""
    with contextlib.suppress(TimeoutError):
        await within(event.wait(), seconds)
    return event.is_set()


def _answer(
    done: set[asyncio.Task[tuple[LeaseRecord | None, int]]],
) -> tuple[LeaseRecord | None, int] | None:
    """The first answer among finished reads; None when each was refused or timed out
    (any other error is raised: it is not for asking again)."""
    errors = [err for err in (task.exception() for task in done) if err is not None]
    for err in errors:
        if not isinstance(err, UNANSWERED):
            raise err
    answers = [task.result() for task in done if task.exception() is None]
    return answers[0] if answers else None


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
