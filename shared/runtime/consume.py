"""The pull-consumer loop shared by every JetStream consumer in ksched."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import Header

from shared.runtime import failpoints, progress
from shared.runtime.progress import Progress
from shared.runtime.timeouts import within

log = logging.getLogger("ksched.consume")


# nats-py's fetch(n, timeout), when the stream holds nothing, waits for the first
# message and then for n of them or the whole timeout: a trickle of messages sat up to
# that timeout in the consumer (publish -> watcher p50 15 ms at 700 pods/s). PullFeed
# takes what the stream holds now, or else leaves one request open that returns on its
# first message and keeps delivering the rest into the queue for the next turn.
IDLE_WAIT = 1.0  # how long an open pull request lasts at the server
REPLY_WAIT = 1.0  # how long to wait for the server's answer to a no-wait request
GRACE = 0.1  # past an open request's expiry, before its end is assumed (status lost)
REFUSED_PAUSE = 0.1  # before the next request, after the server refused one

# JetStream pull statuses: the request expired; it was refused or cut (e.g. the consumer
# was deleted); an idle heartbeat. A no-wait request also ends with 404 (no messages).
_TIMEOUT, _CONFLICT, _HEARTBEAT = "408", "409", "100"

# The status header's name as a plain str: looking the enum member up hashes it in
# Python, 0.4 µs for every message that has headers (a binding's write has two).
_STATUS: str = Header.STATUS.value

BACKLOG_POLL_SECONDS = 2.0  # how often the consumer's pending count is read


_ACK_V1_TOKENS = 9  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>


def stream_sequence(msg: Msg) -> int:
    """The message's stream sequence, read off its ack subject: Msg.metadata parses
    every field and builds a datetime, a cost per message on the watcher's hot path."""
    tokens = _ack_tokens(msg)
    if tokens:
        return int(tokens[5])
    return int(msg.metadata.sequence.stream)  # the v2 form (domains): the library's parse


def delivery_sequence(msg: Msg) -> int:
    """The message's delivery sequence in its consumer: one more for every message the
    consumer sends out, redeliveries included."""
    tokens = _ack_tokens(msg)
    if tokens:
        return int(tokens[6])
    return int(msg.metadata.sequence.consumer)


def _ack_tokens(msg: Msg) -> list[str]:
    tokens = (msg.reply or "").split(".")
    if len(tokens) == _ACK_V1_TOKENS and tokens[0] == "$JS" and tokens[1] == "ACK":
        return tokens
    return []


@dataclass
class Deliveries:
    """The deliveries an ack-all consumer's one reader received, in delivery order.

    A delivery sequence that jumps means deliveries this reader never got: in flight
    when a server died and the consumer's Raft group moved to another leader, which
    carries on after them. Acking a later message would ack them away unseen, so the
    messages before the jump are handed over and the reader must then start the
    consumer again just past the last one it handled (watcher/takeover.py, rewind).
    """

    last: int = 0  # delivery sequence of the last message received (0: a new consumer)
    handled: int = 0  # stream sequence of the last message handed over

    def take(self, msgs: list[Msg]) -> tuple[list[Msg], bool]:
        """The messages up to a jump, and whether there was one."""
        for index, msg in enumerate(msgs):
            seq = delivery_sequence(msg)
            if seq > self.last + 1:
                return self._handed(msgs[:index]), True
            self.last = seq  # a lower one: the new leader sends again what we got
        return self._handed(msgs), False

    def _handed(self, msgs: list[Msg]) -> list[Msg]:
        if msgs:
            self.handled = max(self.handled, stream_sequence(msgs[-1]))
        return msgs

    def restart(self) -> None:
        """The consumer was created again: its deliveries count from 1."""
        self.last = 0


class PullFeed:
    """Batches of up to `batch` messages from a pull subscription, each as soon as one
    message is there: its queued messages; else what the stream holds (a no-wait
    request); else the first message of a request left open for IDLE_WAIT. An open
    request with credit left is reused, not doubled."""

    def __init__(self, psub: JetStreamContext.PullSubscription, batch: int) -> None:
        self._psub = psub
        self._queue: asyncio.Queue[Msg] = psub._sub._pending_queue
        self.batch = batch
        self._open_until = 0.0  # when the open request expires at the server
        self._credit = 0  # messages it may still deliver (counted down, conservatively)
        self._refused = False  # the server refused or cut a request (409)

    async def next_batch(self) -> list[Msg]:
        msgs = self._take_queued()
        if msgs:
            return msgs
        if self._refused:  # e.g. 409 Exceeded MaxWaiting: ask again, but not at once
            self._refused = False
            await asyncio.sleep(REFUSED_PAUSE)
        if not self._open():
            msgs = await self._ready()
            if msgs:
                return msgs
            await self._request({"batch": self.batch, "expires": int(IDLE_WAIT * 1e9)})
            self._open_until = time.monotonic() + IDLE_WAIT
            self._credit = self.batch
        return await self._first()

    def _open(self) -> bool:
        return self._credit > 0 and time.monotonic() < self._open_until

    def _ended(self) -> None:
        self._open_until, self._credit = 0.0, 0

    def _take_queued(self, msgs: list[Msg] | None = None) -> list[Msg]:
        """`msgs` topped up from the queue, to at most a batch."""
        msgs = [] if msgs is None else msgs
        while len(msgs) < self.batch and not self._queue.empty():
            self._keep(self._queue.get_nowait(), msgs)
        return msgs

    def _keep(self, msg: Msg, msgs: list[Msg]) -> str | None:
        """Add a message to `msgs`, or return its status (408 and 409 end the request)."""
        self._psub._sub._pending_size -= len(msg.data)
        status = msg.headers.get(_STATUS) if msg.headers else None
        if status is None:
            msgs.append(msg)
            self._credit -= 1
            return None
        if status in (_TIMEOUT, _CONFLICT):
            self._ended()
            self._refused = status == _CONFLICT
        return status

    async def _request(self, body: dict[str, object]) -> None:
        await self._psub._nc.publish(
            self._psub._nms, json.dumps(body).encode(), self._psub._deliver
        )

    async def _ready(self) -> list[Msg]:
        """What the stream holds now: a no-wait request, read until the server says it
        has no more (a status) or the batch is full."""
        await self._request({"batch": self.batch, "no_wait": True})
        msgs: list[Msg] = []
        while len(msgs) < self.batch:
            # Messages arrive by the socket read, many at once: those already queued are
            # taken without a wait (asyncio.wait_for costs a task and a timer each).
            queued = not self._queue.empty()
            msg = self._queue.get_nowait() if queued else await self._get(REPLY_WAIT)
            if msg is None or self._keep(msg, msgs) not in (None, _HEARTBEAT):
                break
        return msgs

    async def _first(self) -> list[Msg]:
        """The open request's first message and whatever came with it; [] when it ended
        without one (its expiry, or a lost connection)."""
        msgs: list[Msg] = []
        while not msgs:
            msg = await self._get(self._open_until - time.monotonic() + GRACE)
            if msg is None:
                self._ended()
                return []
            if self._keep(msg, msgs) in (_TIMEOUT, _CONFLICT):
                return []
        return self._take_queued(msgs)

    async def _get(self, timeout: float) -> Msg | None:
        if timeout <= 0:
            return None
        try:
            return await within(self._queue.get(), timeout)
        except TimeoutError:
            return None


async def consume_batches(
    psub: JetStreamContext.PullSubscription,
    handle: Callable[[list[Msg]], Awaitable[None]],
    stopping: asyncio.Event,
    *,
    batch: int,
    tracker: Progress | None = None,
) -> None:
    """Fetch up to `batch` messages at a time and hand them over until `stopping` is set.

    A lost connection is waited out (nats-py reconnects); the batch being
    handled when the loop stops is finished first. Each `handle` call is a unit of
    work of the process's progress tracker (`tracker`, else the one the runtime
    installed), and the consumer's pending count its backlog (runtime/progress.py).
    """
    tracker = tracker if tracker is not None else progress.current()
    consumer = f"consumer {psub._consumer}"
    handling = f"handling a batch from {consumer}"
    polling = asyncio.create_task(_poll_backlog(psub, tracker, consumer))
    stopped = asyncio.create_task(stopping.wait())
    feed = PullFeed(psub, batch)
    try:
        while not stopping.is_set():
            # A stop ends the wait for the next batch at once (nothing is handed over
            # yet, and what the server sent meanwhile is redelivered unacked), rather
            # than at the open request's expiry, which took a stopping service's
            # whole shutdown grace.
            fetch = asyncio.ensure_future(feed.next_batch())
            await asyncio.wait({fetch, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not fetch.done():
                fetch.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await fetch
                break
            try:
                msgs = fetch.result()
            except Exception as err:
                log.warning("fetch failed: %s", err)
                await asyncio.sleep(0.5)
                continue
            # An open request that ended without a message gives none: nothing to hand
            # over (the handlers ack the batch's last message).
            if msgs:
                with tracker.work(handling):
                    await failpoints.hit("consume.handle")
                    await handle(msgs)
    finally:
        polling.cancel()
        stopped.cancel()
        tracker.backlog(consumer, 0)
        # Without this, draining the connection waits on the idle pull subscription.
        with contextlib.suppress(Exception):
            await psub.unsubscribe()


async def _poll_backlog(
    psub: JetStreamContext.PullSubscription, tracker: Progress, consumer: str
) -> None:
    """The consumer's pending messages as the tracker's backlog, every few seconds; a
    failed read keeps the last count (a backlog nothing drains stays one)."""
    while True:
        try:
            info = await psub.consumer_info()
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log.debug("consumer info of %s: %s", consumer, err)
        else:
            tracker.backlog(consumer, info.num_pending or 0)
        await asyncio.sleep(BACKLOG_POLL_SECONDS)
