"""Listing the log: what queue and cache rebuild their state from when Redis lost it.

- `read_latest`: the latest event of every subject of the cluster stream, through an
  ephemeral ordered consumer that starts at the last message per subject (the
  informer's List). It reads on until it has caught up with the stream, so the list
  is consistent at a cut: every subject's last event up to the cut, none after.
- `route_latest`: those events through admission and the watcher's routing
  (shared/routing.py), as if the watcher saw each object added: the queue's and
  the cache's items, in stream order, each stamped with its event's sequence.
- `read_in_flight`: the bind work queue's requests (the assumptions whose binding
  cycle has not finished), each with its message's sequence. The queue is a work
  queue, so no second consumer may read it: its messages are fetched one by one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy
from nats.js.errors import NotFoundError

from shared.api.events import BadEvent, ClusterEvent, decode_cluster_event
from shared.api.models import Pod, PriorityClass
from shared.api.priority import PriorityClasses, admit_event
from shared.messages import BindRequest, CacheEvent, QueueEvent, requests_in
from shared.routing import TERMINAL_PHASES, Informer, route, stamped
from shared.runtime.timeouts import within
from shared.sharding import misplaced_partition, stored_pod_subject
from shared.subjects import (
    BIND_STREAM,
    BIND_SUBJECT,
    CLUSTER_STREAM,
    WHOLE_STREAM,
)
from shared.wire import unpack

# A list that stops making progress for this long failed (the caller retries it).
LIST_STALL_SECONDS = 30.0
REQUEST_FIELDS = ("key", "uid", "seq", "node", "cycle", "pod", "profile")


@dataclass(frozen=True)
class Entry:
    """One subject's latest message."""

    seq: int
    data: bytes
    headers: Mapping[str, str] | None


@dataclass
class Latest:
    cut: int  # the stream sequence the list is consistent at
    entries: dict[str, Entry] = field(default_factory=dict)  # subject -> latest message


@dataclass
class Relisted:
    """The latest events, routed."""

    cut: int
    queue: list[QueueEvent] = field(default_factory=list)
    cache: list[CacheEvent] = field(default_factory=list)

    def pending(self) -> dict[str, tuple[str, int]]:
        """The pods waiting to be scheduled: key -> (uid, sequence of their version)."""
        return {e["key"]: (e["uid"], e["seq"]) for e in self.queue if e["op"] == "upsert"}


async def read_latest(js: JetStreamContext) -> Latest:
    """The cluster stream's latest event per subject, consistent at a cut."""
    info = await js.stream_info(CLUSTER_STREAM)
    if not info.state.messages:
        return Latest(info.state.last_seq)
    latest = Latest(0)
    caught_up = asyncio.Event()
    progress = asyncio.Event()

    async def on_msg(msg: Msg) -> None:
        if caught_up.is_set():
            return  # past the cut
        meta = msg.metadata
        if not misplaced_partition(msg.subject):  # refused there, never a pod
            latest.entries[msg.subject] = Entry(meta.sequence.stream, msg.data, msg.headers)
        progress.set()
        if not meta.num_pending:
            latest.cut = meta.sequence.stream
            caught_up.set()

    sub = await js.subscribe(
        WHOLE_STREAM,
        stream=CLUSTER_STREAM,
        cb=on_msg,
        ordered_consumer=True,
        deliver_policy=DeliverPolicy.LAST_PER_SUBJECT,
    )
    try:
        while not caught_up.is_set():  # every message sets progress, the last one both
            progress.clear()
            try:
                await within(progress.wait(), LIST_STALL_SECONDS)
            except TimeoutError:
                raise TimeoutError(f"listing {CLUSTER_STREAM} made no progress") from None
    finally:
        await sub.unsubscribe()
    return latest


def route_latest(latest: Latest, served: frozenset[str]) -> Relisted:
    """The latest events as the watcher would route them, had it seen each object
    added: PriorityClasses first (admission resolves pods' classes by them), then
    everything in stream order. Events the watcher refuses are left out (it undoes
    them on their subject, after the cut: that arrives as any event does)."""
    events = _decoded(latest)
    classes = PriorityClasses()
    for ev in events:
        if isinstance(ev.obj, PriorityClass):
            admit_event(classes, ev)
    informer = Informer()
    out = Relisted(latest.cut)
    for ev in events:
        if isinstance(ev.obj, PriorityClass) or admit_event(classes, ev) is not None:
            continue
        to_queue, to_cache = stamped(route(ev, served, informer), ev.seq)
        for item in to_queue:
            if item["op"] == "upsert":  # what the pod weighs in a pop reply
                item["size"] = len(latest.entries[ev.subject].data)
        out.queue += to_queue
        out.cache += to_cache
    return out


def _decoded(latest: Latest) -> list[ClusterEvent]:
    events = []
    for subject, entry in sorted(latest.entries.items(), key=lambda item: item[1].seq):
        try:
            events.append(decode_cluster_event(subject, entry.data, entry.headers, entry.seq))
        except BadEvent:
            continue  # refused when it was published
    return events


async def pending_pods(js: JetStreamContext, pod_keys: set[str]) -> dict[str, tuple[str, int]]:
    """Which of these pods are pending now, by their subject's last event: key -> (uid,
    sequence of that version)."""

    async def latest(key: str) -> tuple[str, ClusterEvent | None]:
        namespace, _, name = key.partition("/")
        subject = stored_pod_subject(namespace, name)
        try:
            last = await js.get_last_msg(CLUSTER_STREAM, subject)
            return key, decode_cluster_event(subject, last.data or b"", last.headers, last.seq or 0)
        except (NotFoundError, BadEvent):
            return key, None

    pending = {}
    for key, ev in await asyncio.gather(*(latest(k) for k in sorted(pod_keys))):
        if ev is None or ev.type == "DELETED" or not isinstance(ev.obj, Pod):
            continue
        if not ev.obj.spec.node_name and ev.obj.status.phase not in TERMINAL_PHASES:
            pending[key] = (ev.obj.metadata.uid, ev.seq)
    return pending


async def read_in_flight(js: JetStreamContext) -> list[tuple[int, BindRequest]]:
    """The bind requests waiting on the bind work queue or held by binders, with the
    sequence of the message each came in; unreadable ones are left out (the binders
    dead-letter them)."""
    info = await js.stream_info(BIND_STREAM)
    found: list[tuple[int, BindRequest]] = []
    seq, last = info.state.first_seq, info.state.last_seq
    while info.state.messages and seq <= last:
        try:
            msg = await js.get_msg(BIND_STREAM, seq=seq, subject=BIND_SUBJECT, next=True)
        except NotFoundError:
            break  # none left at or after seq
        assert msg.seq is not None
        try:
            reqs = requests_in(unpack(msg.data or b""))
        except ValueError:
            reqs = []
        found += [(msg.seq, _request(r)) for r in reqs if _readable(r)]
        seq = msg.seq + 1
    return found


def _readable(req: dict[str, Any]) -> bool:
    return all(f in req for f in REQUEST_FIELDS) and isinstance(req["pod"], dict)


def _request(req: dict[str, Any]) -> BindRequest:
    return req  # type: ignore[return-value]  # the fields checked by _readable
