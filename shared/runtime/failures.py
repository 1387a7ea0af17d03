"""What ksched writes when a pod's attempt fails: PodScheduled=False and FailedScheduling.

Used by the binder: a failed binding cycle and a dead-lettered bind request. The
worker writes the same condition and event for a failed scheduling cycle with code
of its own (services/worker/service.py, `_record_failure` and `_write_status`),
where kube-scheduler's handleSchedulingFailure serves both cycles.
"""

from __future__ import annotations

import logging
from typing import Any

from nats.aio.client import Client as NATS

from shared.api.podstatus import EVENT_FAILED_SCHEDULING, make_event, unschedulable_pod
from shared.runtime.publish import Conflict, publish_event, write_pod

log = logging.getLogger("ksched.failures")


async def record_failure(
    nc: NATS, raw_pod: dict[str, Any], seq: int, message: str, reason: str
) -> int | None:
    """Write the condition (conditional on `seq`, the version the attempt used) and publish
    the event; returns the pod's new sequence if the condition was written."""
    new_seq = None
    updated = unschedulable_pod(raw_pod, message, reason)
    if updated is not None:
        try:
            new_seq = await write_pod(nc.jetstream(), updated, seq)
        except Conflict:
            pass  # the pod changed meanwhile; its update re-evaluates it
        except Exception as err:
            meta = raw_pod.get("metadata") or {}
            log.warning(
                "status of %s/%s not written: %s", meta.get("namespace"), meta.get("name"), err
            )
    event = make_event(raw_pod, EVENT_FAILED_SCHEDULING, message, warning=True, action="Scheduling")
    await publish_event(nc, event)
    return new_seq
