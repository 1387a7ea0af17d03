"""Watcher: lists and watches the cluster stream and routes events to queue and cache.

A durable pull consumer replays the stream (the list) and then follows it (the
watch). A batch is acked only once queue and cache have accepted it, so a
restart resumes where the last accepted batch ended and loses nothing.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from nats.aio.msg import Msg
from prometheus_client import Counter

from services.watcher.routing import Informer, move, route
from services.watcher.takeover import take_over
from shared.api.events import BadEvent, decode_cluster_event
from shared.framework.events import ASSIGNED_POD, EVENT_ASSIGNED_POD_DELETE
from shared.messages import CacheEvent, QueueEvent
from shared.runtime.consume import consume_batches, stream_sequence
from shared.runtime.retry import retry_forever
from shared.runtime.rpc import request
from shared.runtime.service import Runtime
from shared.subjects import (
    CACHE_EVENTS,
    CLUSTER_STREAM,
    ERROR_HEADER,
    QUEUE_EVENTS,
    error_subject,
)

log = logging.getLogger("ksched.watcher")

BATCH = 1000


class Watcher:
    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.served = rt.config.scheduler_names
        self.informer = Informer()
        self.stopping = asyncio.Event()
        self.events = Counter(
            "ksched_watcher_events_total",
            "Cluster events routed",
            ["kind", "type"],
            registry=rt.registry,
        )
        self._event_counters: dict[tuple[str, str], Any] = {}
        self.rejected = Counter(
            "ksched_rejected_events_total", "Events refused as malformed", registry=rt.registry
        )

    async def run(self) -> None:
        durable = ""

        async def take_over_stream() -> None:
            nonlocal durable
            durable = await take_over(self.rt.js, self.rt.epoch)

        await retry_forever("take over the cluster stream", take_over_stream)
        psub = await self.rt.js.pull_subscribe_bind(durable, stream=CLUSTER_STREAM)
        self.rt.serving.set()
        await consume_batches(psub, self.handle_batch, self.stopping, batch=BATCH)

    async def handle_batch(self, msgs: list[Msg]) -> None:
        to_queue: list[QueueEvent] = []
        to_cache: list[CacheEvent] = []
        for msg in msgs:
            routed = await self._decode_and_route(msg)
            if routed:
                to_queue.extend(routed[0])
                to_cache.extend(routed[1])
        await self._deliver(to_queue, to_cache)
        await retry_forever("ack", msgs[-1].ack)

    async def _decode_and_route(self, msg: Msg) -> tuple[list[QueueEvent], list[CacheEvent]] | None:
        seq = stream_sequence(msg)
        try:
            ev = decode_cluster_event(msg.subject, msg.data, msg.headers, seq)
        except BadEvent as err:
            await self._reject(msg, str(err))
            return None
        self._events_counter(ev.kind, ev.type).inc()
        return route(ev, self.served, self.informer)

    def _events_counter(self, kind: str, etype: str) -> Any:
        """The labelled child, looked up once per (kind, type): labels() costs more
        than the increment."""
        child = self._event_counters.get((kind, etype))
        if child is None:
            child = self._event_counters[kind, etype] = self.events.labels(kind, etype)
        return child

    async def _reject(self, msg: Msg, reason: str) -> None:
        self.rejected.inc()
        log.warning("rejected event on %s: %s", msg.subject, reason, extra={"subject": msg.subject})
        headers = {ERROR_HEADER: reason[:4000]}
        for key, value in (msg.headers or {}).items():
            if key.lower() == "content-type":
                headers[key] = value

        async def publish() -> None:
            await self.rt.js.publish(error_subject(msg.subject), msg.data, headers=headers)

        await retry_forever("publish error", publish)

    async def _deliver(self, to_queue: list[QueueEvent], to_cache: list[CacheEvent]) -> None:
        """Hand the batch to cache, then queue, retrying until each accepts it."""
        nc = self.rt.nc
        freed = 0

        async def to_cache_service() -> None:
            nonlocal freed
            if to_cache:
                reply = await request(
                    nc, CACHE_EVENTS, {"events": to_cache, "epoch": self.rt.epoch}, timeout=10
                )
                freed = reply.get("freed", 0)

        # Cache first: a pod that leaves the queue as bound should already count on its node.
        await retry_forever("deliver to cache", to_cache_service)
        if freed > _assigned_pod_deletes(to_queue):
            # An assumed pod was deleted and freed room (kube's handleAssumedPodDeletion);
            # its DELETED event did not say where, so the hints see no object.
            to_queue.append(move(EVENT_ASSIGNED_POD_DELETE))
        if to_queue:
            body = {"events": to_queue, "epoch": self.rt.epoch}
            await retry_forever(
                "deliver to queue", lambda: request(nc, QUEUE_EVENTS, body, timeout=10)
            )

    async def shutdown(self) -> None:
        """An unfinished batch is never acked, so it is redelivered after a restart."""
        self.stopping.set()


def _assigned_pod_deletes(to_queue: list[QueueEvent]) -> int:
    return sum(
        1
        for e in to_queue
        if e["op"] == "move" and e.get("resource") == ASSIGNED_POD and e.get("action") == "Delete"
    )
