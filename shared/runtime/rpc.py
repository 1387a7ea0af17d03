"""Internal request/reply over core NATS with msgpack bodies."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from shared.runtime import progress
from shared.runtime.progress import Progress
from shared.wire import Chunk, DecodeError, Packed, body_limit, pack, pack_chunks, unpack

log = logging.getLogger("ksched.rpc")

Handler = Callable[[Any], Awaitable[Any]]
T = TypeVar("T")


class RemoteError(RuntimeError):
    """The service answered with an error."""


async def serve(
    nc: NATS,
    subject: str,
    handler: Handler,
    *,
    queue: str = "",
    concurrent: bool = True,
    tracked: bool = True,
    tracker: Progress | None = None,
) -> Subscription:
    """Answer requests on `subject`; a bad request gets an error reply, never a crash.
    A handler's reply is packed, unless it is Packed already.

    `concurrent` runs each request in its own task (needed for long polls);
    otherwise requests are handled one after another in arrival order.

    Each handler call is a unit of work of the process's progress tracker
    (`tracker`, else the one the runtime installed; runtime/progress.py): one that
    lasts past the stall limit makes the service unhealthy and a leader give up
    its lease. A long poll waits by design, so its subject is served with
    `tracked=False` (the queue's pop, which waits up to 30 s for pods).
    """
    tasks: set[asyncio.Task[None]] = set()
    tracker = tracker if tracker is not None else progress.current()
    what = f"answering a request on {subject}"

    async def tracked_call(body: Any) -> Any:
        with tracker.work(what):
            return await handler(body)

    call: Handler = tracked_call if tracked else handler

    async def answer(msg: Msg) -> None:
        try:
            reply = await call(unpack(msg.data))
        except DecodeError as err:
            reply = {"error": str(err)}
        except Exception as err:
            log.exception("handler for %s failed", subject)
            reply = {"error": f"{type(err).__name__}: {err}"}
        if msg.reply:
            try:
                await msg.respond(reply if isinstance(reply, Packed) else pack(reply))
            except Exception as err:  # requester gone or connection lost: it will retry
                log.warning("reply on %s failed: %s", subject, err)

    async def on_msg(msg: Msg) -> None:
        if not concurrent:
            await answer(msg)
            return
        task = asyncio.create_task(answer(msg))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    return await nc.subscribe(subject, queue=queue, cb=on_msg, pending_msgs_limit=65536)


async def request(nc: NATS, subject: str, payload: Any, timeout: float = 5.0) -> Any:
    return await request_packed(nc, subject, pack(payload), timeout)


async def request_packed(nc: NATS, subject: str, data: bytes, timeout: float = 5.0) -> Any:
    msg = await nc.request(subject, data, timeout=timeout)
    reply = unpack(msg.data)
    if isinstance(reply, dict) and "error" in reply and len(reply) == 1:
        raise RemoteError(f"{subject}: {reply['error']}")
    return reply


def chunks_for(
    nc: NATS, items: list[Any], field: str, head: dict[str, Any] | None = None
) -> list[Chunk]:
    """`{**head, field: items}` as messages that fit this connection's server."""
    return pack_chunks((pack(i) for i in items), field, body_limit(nc.max_payload), head)


async def request_all(
    nc: NATS,
    subject: str,
    items: list[Any],
    field: str,
    head: dict[str, Any] | None = None,
    timeout: float = 5.0,
) -> list[Any]:
    """Send `{**head, field: items}` in as many requests as the server's max payload
    needs, one after another (the receiver applies them in order); the replies, in
    order. A failed request raises: the caller retries the whole (receivers apply
    batches idempotently)."""
    chunks = chunks_for(nc, items, field, head)
    return [await request_packed(nc, subject, c.data, timeout) for c in chunks]


def apply_each(items: list[Any], apply: Callable[[Any], T]) -> tuple[list[T], list[list[Any]]]:
    """Apply a batch's items one by one: the results of those that went through, and
    [index, reason] for each that raised. One poison item so never fails the batch
    around it, which its sender would otherwise re-send forever."""
    results: list[T] = []
    failed: list[list[Any]] = []
    for index, item in enumerate(items):
        try:
            results.append(apply(item))
        except Exception as err:
            log.exception("item %d of a batch failed", index)
            failed.append([index, f"{type(err).__name__}: {err}"])
    return results, failed
