"""What a pod that a PreEnqueue plugin rejects tells its users (KEP-5501, "Reflect
PreEnqueue rejections in Pod status"): such a pod is never attempted, so no
FailedScheduling says why it waits.

- Rejected by SchedulingGates: PodScheduled=False, reason SchedulingGated, with
  kube-apiserver's message. kube-apiserver sets that condition on every pod created with
  gates; ksched has no API server, so the queue writes it. KEP-5501 leaves it as it is
  (the scheduler finds the same condition on the pod and writes nothing), so no event.
- Rejected by any other PreEnqueue plugin: PodScheduled=False, reason
  NotReadyForScheduling, with the plugin's message, and an event of that reason.

Written once per reason: a pod whose condition already says the same is left alone
(KEP-5501's de-duplication against the pod's own status). Each write is conditional
on the pod version the rejection was decided on, so a pod changed meanwhile is not
written (its update runs PreEnqueue again). A NotReadyForScheduling write waits
NOT_READY_DELAY first, KEP-5501's delay against transient rejections: a pod updated
within it (let in, or rejected for another reason) is not written for the old one.
Not done: clearing the condition once PreEnqueue passes; a pod let through is
attempted next, and its attempt writes PodScheduled.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from typing import Any, NamedTuple

from nats.aio.client import Client as NATS

from services.queue.podinfo import QueuedPodInfo
from shared.api.podstatus import (
    REASON_NOT_READY_FOR_SCHEDULING,
    REASON_SCHEDULING_GATED,
    SCHEDULING_GATED_MESSAGE,
    make_event,
    with_condition,
)
from shared.plugins.schedulinggates import NAME as SCHEDULING_GATES
from shared.runtime.publish import Conflict, publish_event, write_pod
from shared.runtime.timeouts import within

log = logging.getLogger("ksched.queue")

MAX_IN_FLIGHT = 64  # writes at once: a burst of gated pods must not flood NATS
NOT_READY_DELAY = 5.0  # KEP-5501's hardcoded delay before a NotReadyForScheduling write


class NotReady(NamedTuple):
    """What to write for a rejected pod: the pod with its condition, and the event."""

    pod: dict[str, Any]
    event: dict[str, Any] | None


def not_ready(raw: dict[str, Any], plugin: str, message: str) -> NotReady | None:
    """The pod's PodScheduled condition and event for a PreEnqueue rejection by
    `plugin`; None when the pod already says so."""
    if plugin == SCHEDULING_GATES:
        gated = with_condition(raw, "False", REASON_SCHEDULING_GATED, SCHEDULING_GATED_MESSAGE)
        return None if gated is None else NotReady(gated, None)
    updated = with_condition(raw, "False", REASON_NOT_READY_FOR_SCHEDULING, message)
    if updated is None:
        return None
    event = make_event(
        raw, REASON_NOT_READY_FOR_SCHEDULING, message, warning=True, action="Scheduling"
    )
    return NotReady(updated, event)


class _Rejection(NamedTuple):
    raw: dict[str, Any]
    seq: int  # of `raw`: the write is conditional on it
    plugin: str
    message: str


class NotReadyReporter:
    """Writes rejections off the queue's event path: one task writes those due,
    MAX_IN_FLIGHT at a time; a pod rejected again before its turn is written once,
    for its latest rejection."""

    def __init__(self, nc: NATS, delay: float = NOT_READY_DELAY) -> None:
        self._nc = nc
        self._delay = delay
        self._latest: dict[str, _Rejection] = {}  # key -> its rejection to write
        self._due: list[tuple[float, int, str, _Rejection]] = []  # heap by due time
        self._order = itertools.count()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def rejected(self, qpi: QueuedPodInfo) -> None:
        plugin = qpi.unschedulable_plugins[0] if qpi.unschedulable_plugins else ""
        rejection = _Rejection(qpi.raw, qpi.raw_seq, plugin, qpi.message)
        # SchedulingGated stands for what kube-apiserver writes when the pod is created
        delay = 0.0 if plugin == SCHEDULING_GATES else self._delay
        due = asyncio.get_running_loop().time() + delay
        self._latest[qpi.key] = rejection
        heapq.heappush(self._due, (due, next(self._order), qpi.key, rejection))
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain())

    async def idle(self) -> None:
        """Until every rejection handed over is written or dropped."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while self._due:
            wait = self._due[0][0] - loop.time()
            if wait > 0:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await within(self._wake.wait(), wait)
                continue
            batch: list[_Rejection] = []
            while self._due and self._due[0][0] <= loop.time() and len(batch) < MAX_IN_FLIGHT:
                _, _, key, rejection = heapq.heappop(self._due)
                if self._latest.get(key) is rejection:  # else rejected again since
                    del self._latest[key]
                    batch.append(rejection)
            await asyncio.gather(*(self._write(r) for r in batch))

    async def _write(self, rejection: _Rejection) -> None:
        report = not_ready(rejection.raw, rejection.plugin, rejection.message)
        if report is None:
            return
        try:
            await write_pod(self._nc.jetstream(), report.pod, rejection.seq)
        except Conflict:
            return  # the pod changed: PreEnqueue runs again on its update if it matters
        except Exception as err:
            log.warning("PreEnqueue rejection of a pod not written: %s", err)
            return
        if report.event is not None:
            await publish_event(self._nc, report.event)
