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
on the pod version the rejection was decided on; a pod changed meanwhile is
re-evaluated on its update. Not done (KEP-5501 beta): the 5 s delay before writing
and the clearing of the condition once PreEnqueue passes; a pod let through is
attempted next, and its attempt writes PodScheduled.
"""

from __future__ import annotations

import asyncio
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

log = logging.getLogger("ksched.queue")

MAX_IN_FLIGHT = 64  # writes at once: a burst of gated pods must not flood NATS


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
    """Writes rejections off the queue's event path: one task drains what is pending,
    MAX_IN_FLIGHT at a time; a pod rejected again before its turn is written once."""

    def __init__(self, nc: NATS) -> None:
        self._nc = nc
        self._pending: dict[str, _Rejection] = {}
        self._task: asyncio.Task[None] | None = None

    def rejected(self, qpi: QueuedPodInfo) -> None:
        plugin = qpi.unschedulable_plugins[0] if qpi.unschedulable_plugins else ""
        self._pending[qpi.key] = _Rejection(qpi.raw, qpi.raw_seq, plugin, qpi.message)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain())

    async def _drain(self) -> None:
        while self._pending:
            keys = list(self._pending)[:MAX_IN_FLIGHT]
            batch = [self._pending.pop(k) for k in keys]
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
