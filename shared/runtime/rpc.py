"""Internal request/reply over core NATS with msgpack bodies."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from shared.runtime import progress
from shared.runtime.progress import Progress
from shared.wire import DecodeError, pack, unpack

log = logging.getLogger("ksched.rpc")

Handler = Callable[[Any], Awaitable[Any]]


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
                await msg.respond(pack(reply))
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
    msg = await nc.request(subject, pack(payload), timeout=timeout)
    reply = unpack(msg.data)
    if isinstance(reply, dict) and "error" in reply and len(reply) == 1:
        raise RemoteError(f"{subject}: {reply['error']}")
    return reply
