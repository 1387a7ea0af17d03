"""What ksched writes when a pod's attempt fails, in one place: kube-scheduler's
handleSchedulingFailure, for the scheduling cycle (worker) and the binding cycle
(binder) alike.

PodScheduled=False with the reason (Unschedulable for a pod that fits nowhere or a
Permit rejection, SchedulerError for anything else), written conditionally on the
version the attempt used, with preemption's nomination when it chose one; the
FailedScheduling event; and the report the queue files the pod by.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client as NATS

from shared.api.podstatus import (
    EVENT_FAILED_SCHEDULING,
    REASON_SCHEDULER_ERROR,
    REASON_UNSCHEDULABLE,
    make_event,
    unschedulable_pod,
    with_nominated_node,
)
from shared.messages import Outcome, Report, report
from shared.runtime.publish import Conflict, publish_event, write_pod

log = logging.getLogger("ksched.failures")

# A status JetStream did not take for sure is sent again for this long (publish.py,
# write_pod), as a binding is: a stream leader lost with its server is replaced within
# 4-9 s, and a status dropped then leaves a pod pending with no reason until its next
# attempt (seen when a host was cut off under load).
STATUS_WRITE_PATIENCE = 30.0


@dataclass(frozen=True)
class Failure:
    """Why one attempt (pod key, cycle) failed."""

    key: str
    cycle: int
    message: str
    plugins: list[str] = field(default_factory=list)  # rejecting plugins: unschedulable
    unschedulable: bool = False  # else an error (kube's SchedulerError)

    @property
    def outcome(self) -> Outcome:
        return "unschedulable" if self.unschedulable else "error"

    @property
    def reason(self) -> str:
        return REASON_UNSCHEDULABLE if self.unschedulable else REASON_SCHEDULER_ERROR


async def record_failure(
    nc: NATS,
    raw_pod: dict[str, Any],
    seq: int,
    failure: Failure,
    nominated_node: str | None = None,
) -> Report:
    """Write the status (and preemption's nomination: a node sets it, "" clears it)
    conditionally on `seq`, publish FailedScheduling, and return the report: with the
    pod's new `seq` when ksched wrote it, and the nomination once it is written."""
    rep = report(failure.key, failure.cycle, failure.outcome, failure.message, failure.plugins)
    updated = unschedulable_pod(raw_pod, failure.message, failure.reason)
    if nominated_node is not None:  # preemption's ModeOverride
        updated = with_nominated_node(updated or raw_pod, nominated_node) or updated
    written = True
    if updated is not None:
        try:
            rep["seq"] = await write_pod(
                nc.jetstream(), updated, seq, patience=STATUS_WRITE_PATIENCE
            )
        except Conflict:
            written = False  # the pod changed meanwhile; its update re-evaluates it
        except Exception as err:
            written = False
            log.warning("status of %s not written: %s", failure.key, err)
    if written and nominated_node is not None:
        rep["nominated_node"] = nominated_node
    event = make_event(
        raw_pod, EVENT_FAILED_SCHEDULING, failure.message, warning=True, action="Scheduling"
    )
    await publish_event(nc, event)
    return rep
