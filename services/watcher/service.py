"""Watcher: lists and watches the cluster stream and routes events to queue and cache.

A durable pull consumer replays the stream (the list) and then follows it (the
watch). A batch is acked only once queue and cache have accepted it, so a
restart resumes where the last accepted batch ended and loses nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import Any

from nats.aio.msg import Msg

from services.watcher.immutables import list_accepted
from services.watcher.outbound import (
    Outbound,
    PackedObject,
    door_limit,
    object_limit,
    too_large,
)
from services.watcher.takeover import rewind, rewind_point, take_over
from services.watcher.undo import undo_refused
from services.watcher.warnings import FieldWarnings
from shared.api.events import BadEvent, ClusterEvent, decode_cluster_event
from shared.api.immutable import ImmutableFields, immutable_fields
from shared.api.priority import PriorityClasses, admit_event
from shared.framework.events import EVENT_ASSIGNED_POD_DELETE
from shared.messages import CacheEvent, QueueEvent
from shared.routing import Informer, immutable_node_name, move, route, stamped
from shared.runtime import metrics
from shared.runtime.consume import Deliveries, consume_batches, stream_sequence
from shared.runtime.retry import retry_forever
from shared.runtime.rpc import request_packed
from shared.runtime.service import Runtime
from shared.sharding import QueueShard, misplaced_partition, queue_shards
from shared.stages import ROUTED, WATCHED
from shared.subjects import (
    CACHE_EVENTS,
    CLUSTER_STREAM,
    ERROR_HEADER,
    PRIORITYCLASSES_PREFIX,
    QUEUE_EVENTS,
    TRUNCATED_HEADER,
    UNDO_HEADER,
    error_subject,
    public_subject,
)
from shared.wire import Chunk, body_limit, is_msgpack

log = logging.getLogger("ksched.watcher")

BATCH = 1000
# A delivery's reply timeout, by try. For the 4-6 s until the servers drop the route
# to a host that was cut off, a request to the queue's or cache's group may still be
# handed to the old leader there and is never answered: waiting 10 s on it was most of
# the rebind after such a cut (docs/reliability.md, third pass). A receiver that is only
# slow (a burst) gets longer each time, so a chunk is sent at most twice more for it.
DELIVERY_TIMEOUTS = (3.0, 6.0, 10.0)
# The longest pause between a delivery's tries. Most failures are answered at once:
# "no responders" while a new queue or cache leader takes over and does not serve yet.
# retry_forever's 2 s pause made the watcher find it serving up to 2 s late, the last
# seconds before pods bound again after a host was killed (docs/reliability.md, "A
# killed host, looked at again"); a try costs the servers one small message.
DELIVERY_RETRY_PAUSE = 0.25


def delivery_timeout(tries: int) -> float:
    """How long the try after `tries` failed ones waits for its reply."""
    return DELIVERY_TIMEOUTS[min(tries, len(DELIVERY_TIMEOUTS) - 1)]


class Watcher:
    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.served = rt.config.scheduler_names
        self.shard = rt.settings.watcher_shard  # what of the stream is this watcher's
        # where its pods' events go (the shard of the same number) and its moves (every one)
        self.queue_shards = queue_shards(rt.settings.shards)
        self.others = metrics.WATCHER_OTHER_SHARDS.counter(rt.registry)
        self.informer = Informer(queue_shards=rt.settings.shards)
        # Workloads', PodGroups' and pods' immutable fields, as last accepted
        self.immutables = ImmutableFields()
        self.priority_classes = PriorityClasses()  # for pods' Priority admission
        self.stopping = asyncio.Event()
        self.events = metrics.WATCHER_EVENTS.counter(rt.registry)
        self._event_counters: dict[tuple[str, str], Any] = {}
        self.rejected = metrics.REJECTED_EVENTS.counter(rt.registry)
        self.field_warnings = FieldWarnings()
        self.warnings = metrics.WATCH_EVENT_WARNINGS.counter(rt.registry)
        self.deliveries = Deliveries()  # to notice deliveries lost with a NATS server
        self._leave = asyncio.Event()  # ends the current consume round
        self.filters: list[str] = []  # what its consumer takes of the stream (run)
        self.partitioned = False  # whether that is its own events alone

    async def run(self) -> None:
        # With the server's partition mapping a shard's consumer takes its own events
        # alone; without it, the whole stream, the others' acked unread.
        self.filters = self.shard.filter_subjects(self.rt.partitions)
        self.partitioned = self.rt.partitions is not None
        durable = await retry_forever(
            "take over the cluster stream",
            lambda: take_over(self.rt.takeover_js, self.rt.epoch, self.shard, self.filters),
        )
        await retry_forever("list the priority classes", self._list_priority_classes)
        await retry_forever(
            "list the workloads and pod groups",
            lambda: list_accepted(self.rt.takeover_js, durable, self.immutables),
        )
        while not self.stopping.is_set():
            await self._consume(durable)
            if not self.stopping.is_set() and not await self._rewind(durable):
                await self.stopping.wait()  # deposed: the lease's loss ends this replica

    async def _rewind(self, durable: str) -> bool:
        """Start the consumer again past the last message handled (see Deliveries);
        False when a successor deleted it."""
        js, handled = self.rt.js, self.deliveries.handled
        after = await retry_forever(
            "read the cluster stream's position", lambda: rewind_point(js, durable, handled)
        )
        if after is None:
            return False
        await retry_forever(
            "rewind the cluster stream", lambda: rewind(js, durable, after, self.filters)
        )
        self.deliveries.restart()
        return True

    async def _consume(self, durable: str) -> None:
        """Until stopped or a delivery went missing; each round on a fresh subscription,
        so that nothing the consumer sent before a rewind reaches the next round."""
        self._leave = asyncio.Event()
        if self.stopping.is_set():
            return
        psub = await self.rt.js.pull_subscribe_bind(durable, stream=CLUSTER_STREAM)
        await self.rt.start_serving()
        await consume_batches(psub, self.handle_batch, self._leave, batch=BATCH)

    async def handle_batch(self, msgs: list[Msg]) -> None:
        msgs, skipped = self.deliveries.take(msgs)
        if msgs:
            await self._handle_own(msgs)
        if skipped:
            self._leave.set()

    async def _handle_own(self, msgs: list[Msg]) -> None:
        """A shard handles its own events; the others' are acked unread (with the
        batch: the ack of its last message), as if handled. A consumer of the server's
        partitions gets nothing else."""
        if not self.shard.sharded or self.partitioned:
            await self._handle(msgs)
            return
        own = [msg for msg in msgs if self.shard.handles(msg.subject)]
        if len(own) < len(msgs):
            self.others.inc(len(msgs) - len(own))
        await self._handle(msgs, own)

    async def _handle(self, msgs: list[Msg], own: list[Msg] | None = None) -> None:
        """`own`: the messages of `msgs` this shard handles (None: all); the batch is
        acked through the last of `msgs` once they are delivered."""
        own = msgs if own is None else own
        watched = time.time()
        limit = body_limit(self.rt.nc.max_payload)
        out = Outbound(limit, self.rt.settings.shards)
        counted: Counter[tuple[str, str]] = Counter()
        for index, msg in enumerate(own):
            routed = self._decode_and_route(msg, object_limit(limit), counted)
            if isinstance(routed, str):
                await self._reject(msg, routed)
                continue
            try:
                out.add(index, *routed)
            except ValueError as err:
                await self._reject(msg, str(err))
        for (kind, etype), count in counted.items():  # one increment per batch and label
            self._events_counter(kind, etype).inc(count)
        failed = await self._deliver(out, stream_sequence(msgs[-1]), watched)
        for index, reason in sorted(failed.items()):
            await self._reject(own[index], f"not applied: {reason}")
        await retry_forever("ack", msgs[-1].ack)

    def _decode_and_route(
        self, msg: Msg, limit: int, counted: Counter[tuple[str, str]]
    ) -> tuple[list[QueueEvent], list[CacheEvent], PackedObject | None] | str:
        """The event's items for queue and cache (with its object's packing), or the
        reason it is refused."""
        seq = stream_sequence(msg)
        misplaced = misplaced_partition(msg.subject)  # published there, not mapped
        if misplaced:  # refused, and its undo (a tombstone, undo.py) is passed over
            return ([], [], None) if UNDO_HEADER in (msg.headers or {}) else misplaced
        try:
            ev = decode_cluster_event(msg.subject, msg.data, msg.headers, seq)
        except BadEvent as err:
            return str(err)
        key, deleted = ev.obj.metadata.key, ev.type == "DELETED"
        fields = immutable_fields(ev.kind, ev.raw)  # read once: judged, then remembered
        reason = too_large(
            msg.data, is_msgpack(msg.headers), ev.raw, door_limit(limit, msg.headers)
        )
        reason = reason or immutable_node_name(ev, self.informer)
        reason = reason or self.immutables.refusal(ev.kind, key, ev.raw, deleted, fields)
        reason = reason or self._admit(ev)
        if reason:
            return reason
        self.immutables.remember(ev.kind, key, ev.raw, deleted, fields)
        counted[ev.kind, ev.type] += 1
        warning = self.field_warnings.to_warn(ev)
        if warning:
            self.warnings.labels(ev.kind).inc()
            subject = public_subject(msg.subject)  # as published: no partition in it
            log.warning("warning on %s: %s", subject, warning, extra={"subject": subject})
        to_queue, to_cache = stamped(route(ev, self.served, self.informer), seq)
        for item in to_queue:
            if item["op"] == "upsert":  # what the pod weighs in a pop reply
                item["size"] = len(msg.data)
        return to_queue, to_cache, ev.packed

    def _admit(self, ev: ClusterEvent) -> str | None:
        """PriorityClasses are remembered; a pod goes through Priority admission (its
        priorityClassName resolved to spec.priority), or the reason it is refused."""
        return admit_event(self.priority_classes, ev)

    async def _list_priority_classes(self) -> None:
        """Every PriorityClass the stream holds, before consuming: a leader resumes past
        its predecessor's position and would otherwise not know the classes published
        before it."""
        js = self.rt.takeover_js
        info = await js.stream_info(CLUSTER_STREAM, subjects_filter=f"{PRIORITYCLASSES_PREFIX}.>")
        for subject in info.state.subjects or {}:
            last = await js.get_last_msg(CLUSTER_STREAM, subject)
            try:
                ev = decode_cluster_event(subject, last.data or b"", last.headers, last.seq or 0)
            except BadEvent:
                continue  # refused when it was published
            self._admit(ev)
        log.info("%d priority classes known", len(self.priority_classes))

    def _events_counter(self, kind: str, etype: str) -> Any:
        """The labelled child, looked up once per (kind, type): labels() costs more
        than the increment."""
        child = self._event_counters.get((kind, etype))
        if child is None:
            child = self._event_counters[kind, etype] = self.events.labels(kind, etype)
        return child

    async def _reject(self, msg: Msg, reason: str) -> None:
        if not self.shard.reports(msg.subject, self.partitioned):
            return  # a PriorityClass every shard reads: shard 0 reports its refusal
        self.rejected.inc()
        subject = public_subject(msg.subject)  # as published: no partition in it
        log.warning("rejected event on %s: %s", subject, reason, extra={"subject": subject})
        headers = {ERROR_HEADER: reason[:4000]}
        for key, value in (msg.headers or {}).items():
            if key.lower() == "content-type":
                headers[key] = value
        data = msg.data
        limit = body_limit(self.rt.nc.max_payload)
        if len(data) > limit:  # the event as published, cut to what fits beside the reason
            headers[TRUNCATED_HEADER] = str(len(data))
            data = data[:limit]

        async def publish() -> None:
            await self.rt.js.publish(error_subject(subject), data, headers=headers)

        async def undo() -> None:
            await undo_refused(self.rt.js, msg.subject, stream_sequence(msg), msg.headers)

        await retry_forever("publish error", publish)
        await retry_forever("undo the refused event", undo)

    async def _deliver(self, out: Outbound, through: int, watched: float) -> dict[int, str]:
        """Hand the batch to cache, then queue, each message retried until accepted;
        returns the events a receiver could not apply (by index), with the reason.
        Each also hears that the batch ends at stream sequence `through`."""
        head: dict[str, Any] = {"epoch": self.rt.epoch}
        if self.shard.sharded:  # whose epoch and `through` (shared/sharding.py lanes)
            head["shard"] = self.shard.shard
        failed: dict[int, str] = {}
        cache = self._send(CACHE_EVENTS, out.cache_chunks(head, through), out.cache_from, failed)
        marking: asyncio.Task[list[dict[str, Any]]] | None = None
        if not out.cache:  # only the sequence: beside the queue's items, not before them
            marking = asyncio.create_task(cache)
        else:
            # Cache first: a pod that leaves the queue as bound should already count on
            # its node.
            replies = await cache
            if sum(r.get("freed", 0) for r in replies) > out.assigned_pod_deletes:
                # An assumed pod was deleted and freed room (kube's
                # handleAssumedPodDeletion); its DELETED event did not say where, so the
                # hints see no object.
                out.add(-1, [move(EVENT_ASSIGNED_POD_DELETE)], [])
        # The pods' stage times go to the queue only (the cache's chunks are already packed).
        to_queue = {**head, "stamps": {WATCHED: watched, ROUTED: time.time()}}
        await asyncio.gather(
            *(self._to_queue_shard(q, out, to_queue, through, failed) for q in self.queue_shards)
        )
        if marking is not None:
            await marking
        failed.pop(-1, None)
        return failed

    async def _to_queue_shard(
        self,
        q: QueueShard,
        out: Outbound,
        head: dict[str, Any],
        through: int,
        failed: dict[int, str],
    ) -> None:
        """The batch's items for queue shard `q`: its pods' and every move; `through`
        only to the shard whose pods this watcher handles (the state marker's lane)."""
        own = q.watcher_lane == self.shard.lane
        chunks, sources = out.queue_messages(head, through if own else None, q.shard)
        await self._send(q.subject(QUEUE_EVENTS), chunks, sources, failed)

    async def _send(
        self, subject: str, chunks: list[Chunk], sources: list[int], failed: dict[int, str]
    ) -> list[dict[str, Any]]:
        replies: list[dict[str, Any]] = []
        offset = 0
        for chunk in chunks:
            reply: dict[str, Any] = {}
            tries = 0

            async def send(data: bytes = chunk.data) -> None:
                nonlocal reply, tries
                timeout, tries = delivery_timeout(tries), tries + 1
                reply = await request_packed(self.rt.nc, subject, data, timeout=timeout)

            # stopping: the batch stays unacked, and the successor delivers it
            await retry_forever(
                f"deliver to {subject}", send, max_delay=DELIVERY_RETRY_PAUSE, until=self.stopping
            )
            for index, reason in reply.get("failed", []):
                failed.setdefault(sources[offset + index], reason)
            offset += chunk.items
            replies.append(reply)
        return replies

    async def shutdown(self) -> None:
        """An unfinished batch is never acked, so it is redelivered after a restart."""
        self.stopping.set()
        self._leave.set()
