"""Binder: the binding cycle, run by any number of replicas sharing one durable consumer.

For each assumed pod: write the binding (the pod with spec.nodeName and
PodScheduled=True) on its subject, conditional on the version that was
scheduled; then FinishBinding at the cache, or on conflict Forget and requeue.
The message is acked only after the outcome is recorded, so a binder killed
mid-bind leaves it to be redelivered to another.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig
from prometheus_client import Counter

from shared.api.events import decode_cluster_event
from shared.api.podstatus import EVENT_SCHEDULED, bound_pod, make_event, scheduled_message
from shared.messages import BindRequest, Report
from shared.runtime.consume import consume_batches
from shared.runtime.publish import Conflict, publish_event, write_pod
from shared.runtime.retry import retry_forever
from shared.runtime.rpc import request
from shared.runtime.service import Runtime
from shared.subjects import (
    BIND_STREAM,
    BIND_SUBJECT,
    BINDER_CONSUMER,
    CACHE_BINDING,
    CLUSTER_STREAM,
    QUEUE_REPORT,
    pod_subject,
)
from shared.wire import DecodeError, unpack

log = logging.getLogger("ksched.binder")

BATCH = 256


@dataclass
class BindOutcome:
    req: BindRequest
    ok: bool
    message: str = ""


class Binder:
    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.stopping = asyncio.Event()
        self.binds = Counter(
            "ksched_binds_total", "Binding attempts by result", ["result"], registry=rt.registry
        )

    async def run(self) -> None:
        psub = await self.rt.js.pull_subscribe(
            BIND_SUBJECT,
            durable=BINDER_CONSUMER,
            stream=BIND_STREAM,
            config=ConsumerConfig(
                ack_policy=AckPolicy.EXPLICIT,
                ack_wait=30,
                max_deliver=10,
                max_ack_pending=20_000,
            ),
        )
        self.rt.serving.set()
        await consume_batches(psub, self.handle_batch, self.stopping, batch=BATCH)

    async def shutdown(self) -> None:
        self.stopping.set()

    async def handle_batch(self, msgs: list[Msg]) -> None:
        work: list[tuple[Msg, BindRequest]] = []
        for msg in msgs:
            try:
                work.append((msg, unpack(msg.data)))
            except DecodeError as err:
                log.error("undecodable bind request dropped: %s", err)
                await msg.term()
        outcomes = await asyncio.gather(*(self.bind(req) for _, req in work))
        await self._record(outcomes)
        await asyncio.gather(*(msg.ack() for msg, _ in work), return_exceptions=True)

    async def bind(self, req: BindRequest) -> BindOutcome:
        try:
            await write_pod(self.rt.js, bound_pod(req["pod"], req["node"]), req["seq"])
        except Conflict as err:
            if await self._already_bound(req):
                return BindOutcome(req, True)  # a redelivery of a bind that went through
            return BindOutcome(req, False, f"Binding rejected: {err}")
        except Exception as err:
            return BindOutcome(req, False, f"Binding rejected: {err}")
        return BindOutcome(req, True)

    async def _already_bound(self, req: BindRequest) -> bool:
        meta = req["pod"]["metadata"]
        subject = pod_subject(meta["namespace"], meta["name"])
        try:
            last = await self.rt.js.get_last_msg(CLUSTER_STREAM, subject)
            ev = decode_cluster_event(subject, last.data or b"", last.headers, last.seq or 0)
        except Exception:
            return False
        spec: Any = getattr(ev.obj, "spec", None)
        return (
            ev.type != "DELETED"
            and getattr(spec, "node_name", "") == req["node"]
            and (ev.obj.metadata.uid == req["uid"])
        )

    async def _record(self, outcomes: list[BindOutcome]) -> None:
        finish = [[o.req["key"], o.req["uid"]] for o in outcomes if o.ok]
        forget = [[o.req["key"], o.req["uid"]] for o in outcomes if not o.ok]
        body = {"finish": finish, "forget": forget}
        await retry_forever(
            "record binding at cache", lambda: request(self.rt.nc, CACHE_BINDING, body)
        )
        failed: list[Report] = [
            {"key": o.req["key"], "cycle": o.req["cycle"], "outcome": "error", "message": o.message}
            for o in outcomes
            if not o.ok
        ]
        if failed:
            # Forgetting an assumption frees room: pods waiting for it get another look.
            report = {"reports": failed, "move": "AssignedPodDelete"}
            await retry_forever(
                "report to queue", lambda: request(self.rt.nc, QUEUE_REPORT, report)
            )
        for o in outcomes:
            self.binds.labels("ok" if o.ok else "error").inc()
            if not o.ok:
                log.info("binding failed: %s", o.message, extra={"pod": o.req["key"]})
        await asyncio.gather(*(self._scheduled_event(o.req) for o in outcomes if o.ok))

    async def _scheduled_event(self, req: BindRequest) -> None:
        message = scheduled_message(req["pod"], req["node"])
        event = make_event(req["pod"], EVENT_SCHEDULED, message, warning=False, action="Binding")
        await publish_event(self.rt.js, event)
