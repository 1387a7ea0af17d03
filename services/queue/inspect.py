"""The queue's inspection API: endpoints of its `nats.micro` service `ksched-queue`
(discoverable with $SRV.PING, $SRV.INFO and $SRV.STATS), answering JSON so that
`nats req` can read it.

  pending  kube's PendingPods: every pending pod with its sub-queue, attempts,
           backoff expiry, rejecting plugins and last message, and the sub-queue
           counts. Request (optional JSON): {"queue": "<sub-queue>", "limit": N}.
           With queue shards each shard answers for its own pods; `merge_pending`
           makes their replies one (shared/tools/client.py queue_pending asks them all).
  stats    the sub-queue sizes and the queue's counters.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

from nats.micro.request import Request
from nats.micro.service import Service

from services.queue.queue import WHERES, QueuedPodInfo, SchedulingQueue
from shared.subjects import QUEUE_PENDING, QUEUE_STATS
from shared.wire import dump_json

DEFAULT_LIMIT = 1000


def pending_entry(qpi: QueuedPodInfo) -> dict[str, Any]:
    return {
        "key": qpi.key,
        "queue": qpi.where,
        "priority": qpi.priority,
        "attempts": qpi.attempts,
        "timestamp": qpi.timestamp,
        "backoff_expiry": qpi.backoff_expiry,
        "unschedulable_plugins": list(qpi.unschedulable_plugins),
        "message": qpi.message,
        "nominated_node": qpi.nominated_node,
        "cycle": qpi.cycle,
    }


def pending_reply(q: SchedulingQueue, request: dict[str, Any]) -> dict[str, Any]:
    where = request.get("queue")
    if where is not None and where not in WHERES:
        raise ValueError(f"queue must be one of {list(WHERES)}, got {where!r}")
    pods = q.pending_pods(where)
    counts = q.counts()
    return {
        "pods": [pending_entry(p) for p in pods[: pending_limit(request)]],
        "total": len(pods),
        "counts": counts,
        "summary": pending_summary(counts),
    }


def pending_limit(request: dict[str, Any]) -> int:
    return max(int(request.get("limit", DEFAULT_LIMIT)), 0)


def pending_summary(counts: dict[str, int]) -> str:
    """kube's PendingPods summary line."""
    return (
        f"activeQ:{counts.get('active', 0)}; backoffQ:{counts.get('backoff', 0)}; "
        f"unschedulablePods:{counts.get('unschedulable', 0) + counts.get('gated', 0)}"
    )


def merge_pending(replies: list[dict[str, Any]], request: dict[str, Any]) -> dict[str, Any]:
    """Every queue shard's `pending` reply as one (shared/sharding.py): their pods, each
    shard's in its own order, up to the request's limit; totals and counts summed."""
    counts: Counter[str] = Counter()
    for reply in replies:
        counts.update(reply.get("counts") or {})
    pods = [p for reply in replies for p in reply.get("pods") or []]
    return {
        "pods": pods[: pending_limit(request)],
        "total": sum(int(reply.get("total", 0)) for reply in replies),
        "counts": dict(counts),
        "summary": pending_summary(counts),
    }


def stats_reply(q: SchedulingQueue) -> dict[str, Any]:
    return {
        "counts": q.counts(),
        "scheduling_cycle": q.scheduling_cycle,
        "move_request_cycle": q.move_request_cycle,
        "inflight_events": q.inflight_events,
        "nominated": len(q.nominator),
        "hint_errors": q.hints.errors if q.hints is not None else 0,
    }


def _body(req: Request) -> dict[str, Any]:
    if not req.data.strip():
        return {}
    body = json.loads(req.data)
    if not isinstance(body, dict):
        raise ValueError("the request must be a JSON object")
    return body


async def start_inspection(
    svc: Service, queue: Callable[[], SchedulingQueue], subject: Callable[[str], str]
) -> None:
    """Add the endpoints to the queue instance's micro service (runtime/discovery.py),
    answering for whatever queue `queue()` returns at request time, on the subjects
    `subject` gives (a queue shard's own: sharding.py QueueShard.subject)."""

    async def pending(req: Request) -> None:
        try:
            reply = pending_reply(queue(), _body(req))
        except ValueError as err:
            await req.respond_error("400", str(err))
            return
        await req.respond(dump_json(reply))

    async def stats(req: Request) -> None:
        await req.respond(dump_json(stats_reply(queue())))

    await svc.add_endpoint(name="pending", subject=subject(QUEUE_PENDING), handler=pending)
    await svc.add_endpoint(name="stats", subject=subject(QUEUE_STATS), handler=stats)
