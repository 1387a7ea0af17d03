"""WaitOnPermit in a binder: the pods a Permit plugin told to wait, held here.

A waiting pod's bind request stays unacked while it waits (its resources stay
assumed at the cache), kept alive with in-progress acks. Its verdicts live at
the cache, with the assumption: a binder asks for them when it starts holding
the pod and hears of changes on PERMIT_VERDICTS. So a binder killed meanwhile
loses nothing: the request is redelivered to another binder, which asks the
cache again and waits for what is left of the deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from nats.aio.msg import Msg

from shared.framework.waiting_pods import WaitingPod, WaitingPods
from shared.messages import BindRequest, PermitState
from shared.runtime.rpc import request
from shared.runtime.service import Runtime
from shared.runtime.timeouts import within
from shared.subjects import CACHE_PERMIT

log = logging.getLogger("ksched.binder.permit")

PROGRESS_SECONDS = 2.0  # in-progress acks, well within the consumer's first backoff
LOST_ASSUMPTION = "the pod's assumption is gone from the cache (forgotten, expired or replaced)"


@dataclass
class Held:
    msg: Msg
    req: BindRequest
    wp: WaitingPod


Decided = Callable[[list[Held]], Awaitable[None]]


class PermitWaiter:
    """kube's waitingPods map of one binder replica, with the I/O around it."""

    def __init__(self, rt: Runtime, on_decided: Decided) -> None:
        self.rt = rt
        self.on_decided = on_decided
        self.waiting = WaitingPods()
        self.held: dict[str, Held] = {}
        self._wake = asyncio.Event()

    def __len__(self) -> int:
        return len(self.held)

    async def hold(self, batch: list[tuple[Msg, BindRequest]]) -> None:
        """Start waiting (register first, then ask: a verdict published in between
        reaches the registered pod either way)."""
        for msg, req in batch:
            previous = self.held.get(req["key"])
            if previous is not None and previous.req["cycle"] == req["cycle"]:
                previous.msg = msg  # our own request, redelivered: keep waiting
                continue
            if previous is not None:  # an older attempt: the new one replaced it
                self._release(previous)
                await _quietly(previous.msg.ack)
            wp = WaitingPod(
                req["key"],
                req["uid"],
                req["cycle"],
                req["node"],
                dict(req.get("permit_waits") or {}),
                started=req["assumed_at"],
            )
            self.waiting.add(wp)
            self.held[wp.key] = Held(msg, req, wp)
        query = [[msg_req["key"], msg_req["cycle"]] for _, msg_req in batch]
        try:
            reply = await request(self.rt.nc, CACHE_PERMIT, {"query": query}, timeout=10)
            await self.apply(reply["states"])
        except Exception as err:  # verdicts still come on PERMIT_VERDICTS; deadlines hold
            log.warning("permit query failed: %s", err)
        self._wake.set()

    async def apply(self, states: list[PermitState]) -> None:
        """Verdicts from the cache for the assumptions we hold."""
        for st in states:
            held = self.held.get(st["key"])
            if held is None or held.req["cycle"] != st["cycle"]:
                continue
            if not st["assumed"]:
                held.wp.reject("", LOST_ASSUMPTION)
            elif st["rejected"]:
                plugin, message = st["rejected"]
                held.wp.reject(plugin, message)
            else:
                for plugin in st["allowed"]:
                    held.wp.allow(plugin)
        await self._resolve()

    async def run(self, stopping: asyncio.Event) -> None:
        """Time out waiting pods and keep their requests alive, until `stopping`."""
        last_progress = time.monotonic()
        while not stopping.is_set():
            deadline = self.waiting.next_deadline()
            timeout = PROGRESS_SECONDS
            if deadline is not None:
                timeout = min(timeout, max(deadline - time.time(), 0.0) + 0.01)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await within(self._wake.wait(), timeout)
            self.waiting.expire(time.time())
            await self._resolve()
            if time.monotonic() - last_progress >= PROGRESS_SECONDS:
                last_progress = time.monotonic()
                await asyncio.gather(*(_quietly(h.msg.in_progress) for h in self.held.values()))

    async def hand_back(self) -> None:
        """At shutdown: let another binder take the waiting pods at once."""
        for held in list(self.held.values()):
            self._release(held)
            await _quietly(held.msg.nak)

    async def _resolve(self) -> None:
        decided = [self.held[wp.key] for wp in self.waiting.decided()]
        for held in decided:
            self._release(held)
        if decided:
            await self.on_decided(decided)

    def _release(self, held: Held) -> None:
        self.waiting.remove(held.wp.key)
        self.held.pop(held.wp.key, None)


async def _quietly(action: Callable[[], Awaitable[None]]) -> None:
    try:
        await action()
    except Exception as err:  # the request is redelivered if this mattered
        log.debug("ack action failed: %s", err)
