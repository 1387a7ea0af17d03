"""Fencing a lapsed attempt through the pod's own subject, before the pod goes out again.

A worker or binder frozen past its lease (SIGSTOP, a long GC, a partition) may wake
and finish its attempt: a bind conditional on the pod version it scheduled. Were the
pod scheduled again at that same version, the cache would have moved its room to the
new attempt's node, and the late bind could land on the old node's freed room.

So before a lapsed pod returns to activeQ, the queue writes it once more, conditional
on the latest version it knows: PodScheduled=False with reason SchedulerError, as
kube-scheduler records a failed binding. That version is then no longer the
subject's last, so every write of the lapsed attempt fails as a conflict, and the
cache may forget the attempt's room. If the write itself conflicts, the subject has
moved on already: by a binding or a deletion (the watcher will deliver it; the pod
waits for that), or by another update (the attempt can no longer land either).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum

from nats.js import JetStreamContext

from services.queue.queue import QueuedPodInfo
from shared.api.podstatus import REASON_SCHEDULER_ERROR, unschedulable_pod
from shared.runtime.publish import Conflict, write_pod
from shared.sharding import stored_pod_subject
from shared.subjects import CLUSTER_STREAM
from shared.wire import decode_user_payload

log = logging.getLogger("ksched.queue")


class Outcome(Enum):
    FENCED = "fenced"  # the attempt can no longer write: schedule the pod again
    RESOLVED = "resolved"  # the pod was bound or deleted meanwhile: wait for the watcher
    FAILED = "failed"  # NATS did not answer: the lease lapses again and we retry


@dataclass(frozen=True)
class Lapsed:
    """What a fence needs of a lapsed pod, taken when it lapsed."""

    key: str
    cycle: int
    seq: int  # the latest version the queue knows: the fence's precondition
    raw: dict[str, object]
    binding: bool  # it lapsed waiting for its binder (else for its worker)

    @classmethod
    def of(cls, qpi: QueuedPodInfo, binding: bool) -> Lapsed:
        return cls(qpi.key, qpi.cycle, qpi.seq, qpi.raw, binding)


@dataclass(frozen=True)
class Fence:
    lapsed: Lapsed
    outcome: Outcome
    seq: int | None = None  # the subject's sequence after the fence


def lapse_message(lapsed: Lapsed, lease_seconds: float) -> str:
    if not lapsed.cycle:  # held when the queue was rebuilt (lapse_unknown_attempts)
        return "scheduler state lost in Redis and rebuilt from the log: attempt abandoned"
    if lapsed.binding:
        return f"binding did not complete within {lease_seconds:g}s"
    return f"scheduling attempt did not complete within {lease_seconds:g}s"


async def fence(js: JetStreamContext, lapsed: Lapsed, message: str) -> Fence:
    raw = dict(lapsed.raw)
    updated = unschedulable_pod(raw, message, REASON_SCHEDULER_ERROR) or raw
    try:
        seq = await write_pod(js, updated, lapsed.seq)
        return Fence(lapsed, Outcome.FENCED, seq)
    except Conflict:
        return await _moved_on(js, lapsed)
    except Exception as err:
        log.warning("fence of %s failed: %s", lapsed.key, err, extra={"pod": lapsed.key})
        return Fence(lapsed, Outcome.FAILED)


async def _moved_on(js: JetStreamContext, lapsed: Lapsed) -> Fence:
    """The subject is past the version the queue knows: bound, deleted, or updated."""
    namespace, _, name = lapsed.key.partition("/")
    try:
        last = await js.get_last_msg(CLUSTER_STREAM, stored_pod_subject(namespace, name))
        event = decode_user_payload(last.data or b"", last.headers)
    except Exception as err:  # the subject may be gone (purged), or hold no JSON
        log.warning("fence of %s: latest version unread: %s", lapsed.key, err)
        return Fence(lapsed, Outcome.FAILED)
    if not isinstance(event, dict):
        return Fence(lapsed, Outcome.FENCED, int(last.seq or 0))  # not a pod: no binding
    obj = event.get("object")
    spec = obj.get("spec") if isinstance(obj, dict) else None
    bound = isinstance(spec, dict) and bool(spec.get("nodeName"))
    if event.get("type") == "DELETED" or bound:
        return Fence(lapsed, Outcome.RESOLVED)
    return Fence(lapsed, Outcome.FENCED, int(last.seq or 0))
