"""Binder: the binding cycle, run by any number of replicas sharing one durable consumer.

For each assumed pod (kube-scheduler's bindingCycle): WaitOnPermit if Permit
said Wait (permit.py), then PreBind, Bind (DefaultBinder: the conditional
publish of the bound pod), PostBind; then FinishBinding at the cache. On any
failure: Unreserve, Forget at the cache, PodScheduled=False and a
FailedScheduling event, and a report that requeues the pod. The message is
acked only after the outcome is recorded, so a binder killed mid-bind leaves it
to be redelivered to another. Requests that cannot be bound at all (undecodable,
or delivered MAX_DELIVER times without an outcome) are dead letters: published
on BIND_DEAD_LETTER with the reason, and their pods forgotten and requeued.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig

from services.binder import podgroups
from services.binder.permit import Held, PermitWaiter
from shared.api.events import decode_cluster_event
from shared.api.podstatus import (
    EVENT_SCHEDULED,
    bound_pod,
    make_event,
    scheduled_message,
)
from shared.framework.cycle_state import CycleState
from shared.framework.diagnosis import Diagnosis, FitError
from shared.framework.events import EVENT_ASSIGNED_POD_DELETE, event_label
from shared.framework.handle import HandleProviders
from shared.framework.profile_map import ProfileMap
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import PodInfo
from shared.messages import BindRequest, Report, attempt_of_message_id, report, requests_in
from shared.plugins import REGISTRY
from shared.runtime import metrics, progress
from shared.runtime.consume import consume_batches
from shared.runtime.failures import Failure, record_failure
from shared.runtime.framework_metrics import record_frameworks
from shared.runtime.lease import identity
from shared.runtime.permits import send_permit_signals
from shared.runtime.publish import Conflict, publish_event, write_pod
from shared.runtime.retry import retry_forever
from shared.runtime.rpc import request, request_all
from shared.runtime.service import Runtime
from shared.sharding import QueueShard, by_pod_owner, pod_gang, queue_shards, stored_pod_subject
from shared.stages import BINDING, Stamps, encode
from shared.subjects import (
    BIND_DEAD_LETTER,
    BIND_STREAM,
    BIND_SUBJECT,
    BINDER_CONSUMER,
    BOUND_BY_HEADER,
    CACHE_BINDING,
    CLUSTER_STREAM,
    ERROR_HEADER,
    MSG_ID_HEADER,
    PERMIT_VERDICTS,
    QUEUE_REPORT,
    STAGES_HEADER,
)
from shared.wire import unpack

log = logging.getLogger("ksched.binder")

BATCH = 256
# Batches in their binding cycle at once. One at a time, a pod that arrived while the
# batch before it recorded its outcome (a request to the cache, the Scheduled events)
# waited for that record: a fixed wait per pod at low rates. Binds are independent (the
# consumer acks each message), so the next batch starts while the last one records.
BATCHES_IN_FLIGHT = 4
# The bind work queue's redelivery, set on purpose:
# - BACKOFF (its first step is the ack wait): a binder killed mid-bind has its requests
#   redelivered to another binder after 5 s; a request that keeps killing binders is
#   spaced out more and more rather than taking the fleet down in a tight loop. Live
#   binders keep long work (a batch, a Permit wait) alive with in-progress acks.
# - MAX_DELIVER: the 5th delivery of a request that never got an outcome is a dead
#   letter, not another try: its pod is forgotten and requeued (a fresh attempt).
BACKOFF = [5.0, 10.0, 20.0, 40.0]
MAX_DELIVER = 5
# A binding JetStream did not take for sure is sent again for this long (publish.py,
# write_pod) rather than failed: a NATS server lost with a stream's leader costs a new
# election (4-9 s), and a failed bind would forget an assumption that may have landed.
WRITE_PATIENCE = 30.0
REQUIRED_FIELDS = ("key", "uid", "seq", "node", "cycle", "pod", "profile", "assumed_at")


@dataclass
class BindOutcome:
    req: BindRequest
    ok: bool
    message: str = ""
    plugin: str = ""  # the Permit plugin that rejected the pod: an unschedulable outcome


class Binder:
    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.stopping = asyncio.Event()
        # DefaultBinder writes the binding through this service's publish.
        self.frameworks = ProfileMap(
            rt.config, REGISTRY, HandleProviders(bind_pod=self.write_binding)
        )
        self.permit = PermitWaiter(rt, self._on_permit_decided)
        self.bound_by = {BOUND_BY_HEADER: identity()}
        # The stage times of the pods in their binding cycle, by pod key: DefaultBinder
        # hands write_binding the pod only, and the binding carries them (STAGES_HEADER).
        self._stamps: dict[str, Stamps] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(BATCHES_IN_FLIGHT)
        reg = rt.registry
        self.binds = metrics.BINDS.counter(reg)
        self.dead_letters = metrics.BIND_DEAD_LETTERS.counter(reg)
        self.waiting_gauge = metrics.BINDER_WAITING_PODS.gauge(reg)
        self.waiting_gauge.set_function(lambda: len(self.permit))
        record_frameworks(self.frameworks.values(), reg)

    async def run(self) -> None:
        config = ConsumerConfig(
            durable_name=BINDER_CONSUMER,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=BACKOFF[0],
            backoff=BACKOFF,
            max_deliver=MAX_DELIVER,
            max_ack_pending=20_000,
        )
        try:  # create, or bring an existing consumer to this config
            await self.rt.js.add_consumer(BIND_STREAM, config)
        except Exception as err:
            log.warning("bind consumer config not applied: %s", err)
        psub: Any = None

        async def bind_consumer() -> None:
            # on a cluster, the consumer's replicas may still be electing a leader
            nonlocal psub
            psub = await self.rt.js.pull_subscribe(
                BIND_SUBJECT, durable=BINDER_CONSUMER, stream=BIND_STREAM, config=config
            )

        await retry_forever("subscribe to the bind work queue", bind_consumer)
        await self.rt.nc.subscribe(PERMIT_VERDICTS, cb=self._on_verdicts)
        await self.rt.start_serving()
        waiter = asyncio.create_task(self.permit.run(self.stopping))
        await consume_batches(psub, self._start_batch, self.stopping, batch=BATCH)
        await waiter
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.permit.hand_back()

    async def shutdown(self) -> None:
        self.stopping.set()

    # --- intake -----------------------------------------------------------------

    async def _start_batch(self, msgs: list[Msg]) -> None:
        """Hand a batch to its own task once a slot is free (BATCHES_IN_FLIGHT); the
        consumer loop then fetches the next one."""
        await self._slots.acquire()
        task = asyncio.create_task(self._tracked_batch(msgs))
        self._tasks.add(task)
        task.add_done_callback(self._batch_done)

    async def _tracked_batch(self, msgs: list[Msg]) -> None:
        with progress.current().work("binding a batch"):  # a stuck bind shows as a stall
            await self.handle_batch(msgs)

    def _batch_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._slots.release()
        if not task.cancelled() and task.exception() is not None:
            # Its messages stay unacked: redelivered after the ack wait, as after a crash.
            log.error("batch failed", exc_info=task.exception())

    async def handle_batch(self, msgs: list[Msg]) -> None:
        now: list[tuple[Msg, BindRequest]] = []
        waiting: list[tuple[Msg, BindRequest]] = []
        for msg in msgs:
            for req in await self._admit(msg):
                (waiting if req.get("permit_waits") else now).append((msg, req))
        if waiting:
            await self.permit.hold(waiting)
        if now:
            ready = list({id(m): m for m, _ in now}.values())  # a batch's message, once
            async with _kept_alive(ready):
                outcomes = await asyncio.gather(*(self.binding_cycle(req) for _, req in now))
                await self._record(list(outcomes))
            await asyncio.gather(*(m.ack() for m in ready), return_exceptions=True)

    async def _admit(self, msg: Msg) -> list[BindRequest]:
        """The message's requests (a BindBatch's, or the one BindRequest); none when it
        went to the dead letters."""
        body: Any = None
        try:
            body = unpack(msg.data)
            reqs = self._requests(body)
        except Exception as err:
            reason = f"undecodable bind request: {err}"
            await self._dead_letter(msg, reason, requests_in(body), "undecodable")
            return []
        delivered = _num_delivered(msg)
        if delivered >= MAX_DELIVER:
            reason = f"delivered {delivered} times without an outcome"
            await self._dead_letter(msg, reason, [dict(r) for r in reqs], "max_deliver")
            return []
        return reqs

    def _requests(self, body: Any) -> list[BindRequest]:
        batch = isinstance(body, dict) and "requests" in body
        reqs = body["requests"] if batch else [body]
        if not isinstance(reqs, list) or not reqs:
            raise ValueError("a batch must hold requests")
        for req in reqs:
            missing = [f for f in REQUIRED_FIELDS if f not in req]
            if missing:
                raise ValueError(f"missing {', '.join(missing)}")
            if req["profile"] not in self.frameworks:
                raise ValueError(f"no profile {req['profile']!r}")
            if batch and req.get("permit_waits"):  # waiting pods are held by message
                raise ValueError("a batch may not hold pods waiting on Permit")
        return reqs

    async def _on_verdicts(self, msg: Msg) -> None:
        try:
            states = unpack(msg.data)["states"]
            await self.permit.apply(states)
        except Exception as err:
            log.warning("bad permit verdicts: %s", err)

    # --- the binding cycle ------------------------------------------------------

    async def binding_cycle(self, req: BindRequest) -> BindOutcome:
        """PreBind, Bind, PostBind; Unreserve on failure (the caller forgets and requeues)."""
        fw = self.frameworks[req["profile"]]
        try:
            pod = PodInfo.lazy(req["pod"], req["seq"])  # validated by the watcher on entry
        except Exception as err:
            return BindOutcome(req, False, f"cannot read pod: {err}")
        state = fw.new_cycle_state()
        node = req["node"]
        status = await fw.run_pre_bind_plugins(state, pod, node)
        if status.ok:
            self._stamps[req["key"]] = {**req.get("stamps", {}), BINDING: time.time()}
            try:
                status = await fw.run_bind_plugins(state, pod, node)
            finally:
                self._stamps.pop(req["key"], None)
        if not status.ok:
            fw.run_reserve_plugins_unreserve(state, pod, node)
            return BindOutcome(req, False, status.message() or "binding failed")
        await fw.run_post_bind_plugins(state, pod, node)
        return BindOutcome(req, True)

    async def write_binding(self, pod: PodInfo, node: str) -> Status:
        """DefaultBinder: publish the bound pod conditional on the scheduled version. A
        redelivered bind that already went through is recognised, not written twice."""
        stamps = self._stamps.get(pod.key)
        headers = {**self.bound_by, STAGES_HEADER: encode(stamps)} if stamps else self.bound_by
        try:
            await write_pod(
                self.rt.js,
                bound_pod(pod.raw, node),
                pod.version,
                patience=WRITE_PATIENCE,
                headers=headers,
            )
        except Conflict as err:
            if await self._already_bound(pod, node):
                return SUCCESS
            return Status(Code.ERROR, [f"Binding rejected: {err}"])
        except Exception as err:
            return Status(Code.ERROR, [f"Binding rejected: {err}"])
        return SUCCESS

    async def _already_bound(self, pod: PodInfo, node: str) -> bool:
        meta = pod.pod.metadata
        subject = stored_pod_subject(meta.namespace, meta.name)
        try:
            last = await self.rt.js.get_last_msg(CLUSTER_STREAM, subject)
            ev = decode_cluster_event(subject, last.data or b"", last.headers, last.seq or 0)
        except Exception:
            return False
        spec: Any = getattr(ev.obj, "spec", None)
        return (
            ev.type != "DELETED"
            and getattr(spec, "node_name", "") == node
            and ev.obj.metadata.uid == meta.uid
        )

    async def _on_permit_decided(self, decided: list[Held]) -> None:
        """Allowed pods go on to bind, rejected ones fail; off the permit loop."""
        task = asyncio.create_task(self._finish_waiting(decided))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish_waiting(self, decided: list[Held]) -> None:
        async def outcome(held: Held) -> BindOutcome:
            status = held.wp.status
            if status is not None and status.ok:
                return await self.binding_cycle(held.req)
            return self._permit_rejected(held, status)

        msgs = [h.msg for h in decided]
        async with _kept_alive(msgs):
            outcomes = await asyncio.gather(*(outcome(h) for h in decided))
            await self._record(list(outcomes))
        await asyncio.gather(*(m.ack() for m in msgs), return_exceptions=True)

    def _permit_rejected(self, held: Held, status: Status | None) -> BindOutcome:
        """Rejected or timed out while waiting: Unreserve (which may reject the pod's
        gang), and an unschedulable outcome naming the plugin."""
        req = held.req
        fw = self.frameworks[req["profile"]]
        message = status.message() if status is not None else "rejected while waiting on permit"
        plugin = status.plugin if status is not None else ""
        with contextlib.suppress(Exception):
            fw.run_reserve_plugins_unreserve(CycleState(), PodInfo.of(req["pod"]), req["node"])
        if plugin:  # kube reports a Permit rejection as a FitError on the pod's node
            diagnosis = Diagnosis({req["node"]: status or Status()}, {plugin})
            message = FitError(req["key"], 1, diagnosis).message()
        return BindOutcome(req, False, message, plugin)

    # --- recording --------------------------------------------------------------

    async def _record(self, outcomes: list[BindOutcome]) -> None:
        await send_permit_signals(self.rt.nc, self.frameworks.values())
        finish = [[o.req["key"], o.req["uid"]] for o in outcomes if o.ok]
        # Forget this attempt's assumption only: by uid, a later attempt of the same pod
        # (re-assumed after a lease expiry while this one waited) would go too.
        forget = [[o.req["key"], o.req["cycle"]] for o in outcomes if not o.ok]
        body = {"finish": finish, "forget_attempts": forget}
        await retry_forever(
            "record binding at cache", lambda: request(self.rt.nc, CACHE_BINDING, body)
        )
        failed = [o for o in outcomes if not o.ok]
        reports = await asyncio.gather(*(self._failure_report(o) for o in failed))
        if reports:
            await self._requeue(list(reports), {o.req["key"]: o.req["pod"] for o in failed})
        for o in outcomes:
            self.binds.labels("ok" if o.ok else "error").inc()
        await asyncio.gather(*(self._scheduled_event(o.req) for o in outcomes if o.ok))
        groups = podgroups.wanted_conditions(
            (o.req["pod"], o.ok, o.message, o.plugin) for o in outcomes
        )
        if groups:  # only pods of v1alpha2 PodGroups
            await podgroups.report(self.rt.js, groups)

    async def _failure_report(self, o: BindOutcome) -> Report:
        """PodScheduled=False and FailedScheduling, as handleSchedulingFailure writes them."""
        log.info("binding failed: %s", o.message, extra={"pod": o.req["key"]})
        plugins = [o.plugin] if o.plugin else []
        failure = Failure(o.req["key"], o.req["cycle"], o.message, plugins, bool(o.plugin))
        return await record_failure(self.rt.nc, o.req["pod"], o.req["seq"], failure)

    async def _requeue(self, reports: list[Report], pods: Mapping[str, Any]) -> None:
        """Each report to its pod's queue shard (shared/sharding.py, by the raw pod in
        `pods` when there is one: a gang's pods are its gang's shard's); the move with
        it, as forgetting an assumption frees room: pods waiting for it get another look,
        on every shard."""
        head = {"move": event_label(EVENT_ASSIGNED_POD_DELETE)}
        shards = queue_shards(self.rt.settings.shards)
        split = by_pod_owner(len(shards), reports, lambda r: r["key"], lambda r: _gang(pods, r))
        for shard in shards:
            send = functools.partial(self._report, shard, split.get(shard.shard, []), head)
            await retry_forever("report to queue", send)

    async def _report(self, shard: QueueShard, reports: list[Report], head: dict[str, Any]) -> None:
        subject = shard.subject(QUEUE_REPORT)
        if reports:
            await request_all(self.rt.nc, subject, reports, "reports", head)
        else:  # the move alone
            await request(self.rt.nc, subject, {**head, "reports": []})

    async def _scheduled_event(self, req: BindRequest) -> None:
        message = scheduled_message(req["pod"], req["node"])
        event = make_event(req["pod"], EVENT_SCHEDULED, message, warning=False, action="Binding")
        # One Scheduled per binding, however often its request is delivered.
        await publish_event(self.rt.nc, event, once_as=f"{req['uid']}@{req['seq']}/Scheduled")

    # --- dead letters -------------------------------------------------------------

    async def _dead_letter(
        self, msg: Msg, reason: str, reqs: list[dict[str, Any]], kind: str
    ) -> None:
        """Publish the message with the reason, forget its attempts, requeue their pods."""
        self.dead_letters.labels(kind).inc()
        attempts = _attempts(reqs) or [a for a in [_attempt_of(msg)] if a is not None]
        log.error("bind request dead-lettered: %s", reason, extra={"pods": len(attempts)})
        headers = {ERROR_HEADER: reason[:4000]}
        await retry_forever(
            "publish dead letter",
            lambda: self.rt.js.publish(BIND_DEAD_LETTER, msg.data, headers=headers),
        )
        if attempts:
            body: dict[str, Any] = {"forget_attempts": [list(a) for a in attempts]}
            await retry_forever("forget at cache", lambda: request(self.rt.nc, CACHE_BINDING, body))
            by_attempt = {(r.get("key"), r.get("cycle")): r for r in reqs}
            reports = [
                await self._dead_report(key, cycle, reason, by_attempt.get((key, cycle)))
                for key, cycle in attempts
            ]
            pods = {str(r.get("key")): r["pod"] for r in reqs if isinstance(r.get("pod"), dict)}
            await self._requeue(reports, pods)
        try:
            await msg.term()
        except Exception as err:  # redelivered: dead-lettered again, harmlessly
            log.warning("dead letter not terminated: %s", err)

    async def _dead_report(
        self, key: str, cycle: int, reason: str, req: dict[str, Any] | None
    ) -> Report:
        failure = Failure(key, cycle, reason)
        if req is not None and isinstance(req.get("pod"), dict) and isinstance(req.get("seq"), int):
            rep = await record_failure(self.rt.nc, req["pod"], req["seq"], failure)
            rep.setdefault("seq", req["seq"])
            return rep
        return report(key, cycle, "error", reason)


def _gang(pods: Mapping[str, Any], rep: Report) -> str:
    """The gang of a report's pod (its queue shard's), "" for none or an unknown pod."""
    raw = pods.get(rep["key"])
    return pod_gang(raw) if isinstance(raw, dict) else ""


def _attempts(reqs: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [
        (r["key"], r["cycle"])
        for r in reqs
        if isinstance(r.get("key"), str) and isinstance(r.get("cycle"), int)
    ]


def _num_delivered(msg: Msg) -> int:
    try:
        return int(msg.metadata.num_delivered)
    except Exception:
        return 1


def _attempt_of(msg: Msg) -> tuple[str, int] | None:
    """(pod key, cycle) from the message id the worker sets."""
    return attempt_of_message_id((msg.headers or {}).get(MSG_ID_HEADER, ""))


@contextlib.asynccontextmanager
async def _kept_alive(msgs: list[Msg]) -> AsyncIterator[None]:
    """In-progress acks while a batch is worked on, so slow work is not redelivered."""

    async def beat() -> None:
        while True:
            await asyncio.sleep(BACKOFF[0] / 3)
            await asyncio.gather(*(m.in_progress() for m in msgs), return_exceptions=True)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
