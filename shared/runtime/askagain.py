"""A new leader's JetStream reads, asked again while unanswered.

A JetStream API request is answered by the leader of the stream (or consumer) it names;
one sent while that stream elects its leader (its server killed or cut off: 4-9 s in
nats-server) is never answered, even once the election is over. A takeover that waited
out its whole timeout on such a read lost up to that timeout after the election: after a
host was killed, the new watcher's listing of priority classes and the new queue's
informer waited 3 s twice each, the second time on a read sent 0.7 s before the cluster
stream had its new leader (docs/reliability.md, "A killed host, looked at again").

So a read is asked again every `again` seconds within its timeout, the earlier asks kept
pending (a slow but answering leader is not given up on), and the first answer wins: it
comes within `again` of the election. Only reads are asked twice (stream and consumer
info and names, message gets): a read changes nothing. Writes (a consumer created, a
message published) are sent once, as before: a copy landing late would make a second
consumer or message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from nats.aio.client import Client as NATS
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext

T = TypeVar("T")

# The JetStream API requests that only read (the subject after the API prefix).
READS = (
    "STREAM.INFO.",
    "STREAM.NAMES",
    "STREAM.LIST",
    "STREAM.MSG.GET.",
    "CONSUMER.INFO.",
    "CONSUMER.NAMES.",
    "CONSUMER.LIST.",
    "DIRECT.GET.",
)


def is_read(subject: str, prefix: str) -> bool:
    """Whether the API request on `subject` only reads (asking it twice is harmless)."""
    api = subject.removeprefix(f"{prefix}.")
    return api != subject and api.startswith(READS)


async def first_answer(
    ask: Callable[[float], Coroutine[Any, Any, T]], timeout: float, again: float
) -> T:
    """The first answer to `ask(left)`, asked again every `again` seconds until one comes
    or `timeout` passes (then nats' TimeoutError); each ask gets the time left. An error
    that is an answer (no responders, an API error) ends it at once: the caller decides."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    asking: set[asyncio.Task[T]] = set()
    try:
        while (left := deadline - loop.time()) > 0:
            asking.add(asyncio.create_task(ask(left)))
            done, asking = await asyncio.wait(
                asking, timeout=min(again, left), return_when=asyncio.FIRST_COMPLETED
            )
            answered = _answer(done)
            if answered is not None:
                return answered.result()  # the value, or the error the server answered
        raise NatsTimeoutError
    finally:
        for task in asking:
            task.cancel()
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: no "never retrieved" at collection


def _answer(done: set[asyncio.Task[T]]) -> asyncio.Task[T] | None:
    """A finished ask that is an answer (a value or an error), not its own timeout."""
    answers = [t for t in done if not isinstance(t.exception(), NatsTimeoutError)]
    return answers[0] if answers else None


class AskingAgain(JetStreamContext):
    """A JetStream context whose API reads are asked again every `again` seconds until
    answered (module docstring); everything else is nats-py's own."""

    def __init__(self, nc: NATS, *, timeout: float, again: float) -> None:
        super().__init__(nc, timeout=timeout)
        self._again = again

    async def _api_request(
        self, req_subject: str, req: bytes = b"", timeout: float = 5
    ) -> dict[str, Any]:
        ask = super()._api_request
        if not is_read(req_subject, self._prefix):
            return await ask(req_subject, req, timeout=timeout)
        return await first_answer(
            lambda left: ask(req_subject, req, timeout=left), timeout, self._again
        )
