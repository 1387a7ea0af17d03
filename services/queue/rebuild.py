"""The queue rebuilt from the log, when Redis lost it (docs/reliability.md, "Redis
data loss").

The pending pods are the cluster stream's latest unassigned pods of the served
profiles (shared/relist.py), added as the watcher's deliveries would add them. Their
attempts, backoffs and sub-queues are gone with the lost state, as after kube-
scheduler's restart (every pending pod back in activeQ); unlike that restart, the
lost state may have handed any of them out to a worker or binder that is still at
it. So every pod ready to go out is first held and fenced (queue.py
`lapse_unknown_attempts`, fence.py): its subject is written once more, so that an
attempt the lost state knew of can no longer bind, before the pod goes out again.
A queue built before any incarnation of it (a first start) has handed out nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from services.queue.queue import SchedulingQueue
from shared.messages import QueueEvent


def rebuild(
    q: SchedulingQueue,
    events: list[QueueEvent],
    apply: Callable[[QueueEvent], object],
    *,
    fence: bool,
) -> int:
    """Add the pending pods of `events` (through `apply`, the service's own) to an empty
    queue and, when a lost state may have handed them out (`fence`), hold every one
    that could go out; returns how many are held."""
    for ev in events:
        if ev["op"] == "upsert":  # the others only move pods an empty queue does not have
            apply(ev)
    return q.lapse_unknown_attempts() if fence else 0
