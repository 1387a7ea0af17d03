"""What a new watcher leader knows of the Workloads and PodGroups (scheduling.k8s.io, any
version) before it consumes: their immutable fields as its predecessors accepted them.

The watcher refuses an update that changes an immutable field by comparing it with the
object it accepted last (shared/api/immutable.py). A leader that takes over resumes
past its predecessor's ack floor and has seen nothing: without this listing it would
accept such an update while the queue's and workers' informers, which have run all
along, keep the old object (they refuse the change on their own) — the stream and
ksched's copies would disagree for good. So, as with PriorityClasses, the leader reads
each subject's retained events first. Pods are not listed (too many; the informers do
not check them): a new leader judges a pod's gang fields from the pod's next event on.

Which retained event holds the accepted object: the latest that the predecessors
processed (sequence at or below the ack floor: an event processed and refused is
followed by its undo), or an undo (the watcher's own republish of the accepted object).
A later user event is not processed yet: the consumer will deliver it, and it is judged
then against the event before it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from shared.api.events import BadEvent, decode_cluster_event
from shared.api.immutable import ImmutableFields
from shared.subjects import (
    CLUSTER_STREAM,
    UNDO_HEADER,
    WORKLOAD_PODGROUPS_PREFIX,
    WORKLOADS_PREFIX,
)

log = logging.getLogger("ksched.watcher")

LISTED_PREFIXES = (WORKLOADS_PREFIX, WORKLOAD_PODGROUPS_PREFIX)


@dataclass(frozen=True)
class Retained:
    """One retained event of a subject."""

    seq: int
    data: bytes
    headers: dict[str, str] | None


def accepted(retained: Sequence[Retained], processed_through: int) -> Retained | None:
    """Of a subject's retained events (oldest first), the one holding the object as the
    watcher accepted it; None when none does (every one is still to be delivered)."""
    for event in reversed(retained):
        if event.seq <= processed_through or UNDO_HEADER in (event.headers or {}):
            return event
    return None


async def list_accepted(js: JetStreamContext, durable: str, seen: ImmutableFields) -> None:
    """Remember the accepted Workloads and PodGroups (see the module's doc)."""
    info = await js.consumer_info(CLUSTER_STREAM, durable)
    # The consumer starts just past what the predecessors processed (takeover.py).
    processed_through = max((info.config.opt_start_seq or 1) - 1, 0)
    count = 0
    for prefix in LISTED_PREFIXES:
        stream = await js.stream_info(CLUSTER_STREAM, subjects_filter=f"{prefix}.>")
        for subject in stream.state.subjects or {}:
            event = accepted(await _retained(js, subject), processed_through)
            if event is None:
                continue
            try:
                ev = decode_cluster_event(subject, event.data, event.headers, event.seq)
            except BadEvent:
                continue  # refused when it was published
            seen.remember(ev.kind, ev.obj.metadata.key, ev.raw, ev.type == "DELETED")
            count += 1
    log.info("%d workloads and pod groups known", count)


async def _retained(js: JetStreamContext, subject: str) -> list[Retained]:
    """The subject's retained events, oldest first (the stream keeps two per subject)."""
    out: list[Retained] = []
    seq = 1
    while True:
        try:
            msg = await js.get_msg(CLUSTER_STREAM, seq=seq, subject=subject, next=True)
        except NotFoundError:
            return out
        if msg.seq is None:
            return out
        out.append(Retained(msg.seq, msg.data or b"", msg.headers))
        seq = msg.seq + 1
