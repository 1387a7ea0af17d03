"""Queue service: the scheduling queue, served to workers over NATS, persisted in Redis.

Workers pop batches by long poll; the watcher sends pod and cluster events;
workers and binders report each attempt's outcome. Every change is written to
Redis before the reply, so a restart keeps each pending pod with its attempts,
backoff and sub-queue. The nominated pods are served on QUEUE_NOMINATED, and
the pending pods on a nats.micro inspection service (inspect.py).

A new leader takes the queue over from Redis, or rebuilds it from the log when Redis
lost it (runtime/watermark.py, rebuild.py); a leader whose writes find Redis lost
them writes the whole queue again, as a new incarnation.

With KSCHED_SHARDS > 1 the instance is one queue shard (shared/sharding.py QueueShard):
the pods of its watcher shard's partitions, under its own lease, keys, subjects and
state marker; every name above is its own, and other shards are never touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import os
import time
from collections.abc import Callable
from typing import Any

from services.queue import gangs
from services.queue.fence import Lapsed, Outcome, fence, lapse_message
from services.queue.hints import QueueingHints, hints_of, queue_sort_key
from services.queue.inspect import start_inspection, stats_reply
from services.queue.notready import NotReadyReporter
from services.queue.podinfo import BINDING
from services.queue.preenqueue import run_pre_enqueue
from services.queue.queue import QueuedPodInfo, SchedulingQueue
from services.queue.rebuild import rebuild
from services.queue.records import pack_record, pop_reply, record_of, wire_pod
from shared import keys
from shared.api.events import ClusterObject, SubjectRef
from shared.api.podgroup import SchedulingPodGroup
from shared.api.workload import Workload
from shared.framework.events import (
    ADD,
    EVENT_ASSIGNED_POD_DELETE,
    WORKLOAD,
    WORKLOAD_POD_GROUP,
    action_type,
    event_from_label,
)
from shared.framework.interface import ClusterEvent, ClusterObjects
from shared.framework.profile_map import ProfileMap
from shared.framework.snapshot import ClusterSnapshot
from shared.messages import NominatedPod, QueueEvent, Report
from shared.plugins import REGISTRY
from shared.plugins.gangscheduling import NAME as GANG_SCHEDULING
from shared.relist import read_latest, route_latest
from shared.runtime import metrics
from shared.runtime.fencing import FencedBatch
from shared.runtime.flush import Flusher
from shared.runtime.framework_metrics import record_frameworks
from shared.runtime.informer import watch_owners
from shared.runtime.moves import move_at_queue_shards
from shared.runtime.retry import retry_forever
from shared.runtime.rpc import apply_each, request_all, serve
from shared.runtime.service import Runtime
from shared.runtime.timeouts import within
from shared.runtime.watermark import (
    CHECK_SECONDS,
    StateWrites,
    incarnation_base,
    state_at_takeover,
)
from shared.stages import QUEUED
from shared.subjects import (
    CACHE_BINDING,
    QUEUE_EVENTS,
    QUEUE_GROUP,
    QUEUE_NOMINATED,
    QUEUE_POP,
    QUEUE_REPORT,
)
from shared.wire import Packed, body_limit

log = logging.getLogger("ksched.queue")


UNSCHEDULABLE_FLUSH_SECONDS = 30.0
# How often completed backoffs are flushed (kube: about every second). A finer tick
# only shortens the wait past the expiry; a pod never leaves backoff early.
TICK_SECONDS = 0.1
MAX_POP = 1000
MAX_POP_WAIT_MS = 30_000
# a pop written later than its worker's timeout less this is put back, not answered
POP_REPLY_MARGIN = 1.0
# the sub-queues scheduler_pending_pods reports
_PENDING_GAUGED = ("active", "backoff", "unschedulable", "gated")


def queue_settings(rt: Runtime) -> dict[str, float]:
    return {
        "initial_backoff": rt.config.pod_initial_backoff_seconds,
        "max_backoff": rt.config.pod_max_backoff_seconds,
        "inflight_lease": float(os.environ.get("KSCHED_QUEUE_LEASE_SECONDS", "15")),
        "binding_lease": float(os.environ.get("KSCHED_QUEUE_BINDING_LEASE_SECONDS", "120")),
    }


def cluster_event(ev: QueueEvent) -> ClusterEvent:
    """The event a move names; an unknown one is a wildcard (moves every pod) rather
    than an error the watcher would retry forever."""
    resource, action = ev.get("resource"), ev.get("action")
    if resource and action:
        try:
            return _named_event(resource, action)
        except ValueError:
            log.warning("unknown cluster event action %r, moving every pod", action)
    return event_from_label(ev.get("event") or f"{resource}{action}")


@functools.lru_cache(maxsize=256)
def _named_event(resource: str, action: str) -> ClusterEvent:
    """Checked and built once per name: every bound pod brings a move."""
    action_type(action)  # raises ValueError (not cached) for an unknown action
    return ClusterEvent(resource, action)


class QueueService:
    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        profiles = ProfileMap(rt.config, REGISTRY)
        # PodTopologySpread's hints build a pod's default constraints, whose selector
        # comes from its Services and controller: their snapshot holds them, current.
        self.objects = ClusterObjects()
        for framework in profiles.values():
            framework.set_snapshot(ClusterSnapshot([], self.objects))
        self.hints: QueueingHints = hints_of(profiles)
        self.sort_key = queue_sort_key(profiles)
        self.pre_enqueue = run_pre_enqueue(profiles)
        # GangScheduling's PreEnqueue counts each gang's pods, bound ones too.
        self.gangs_counted = any(
            GANG_SCHEDULING in fw.plugins.instances for fw in profiles.values()
        )
        self.q = self._new_queue()
        # Its own lane (shared/sharding.py): lease, Redis keys, subjects and state marker
        # of the one queue, or of queue shard s, which holds its partitions' pods only.
        self.shard = rt.settings.queue_shard
        self.lane = self.shard.lane
        self.pods_key = keys.queue_pods_key(self.lane)
        self.meta_key = keys.queue_meta_key(self.lane)
        state_keys = (self.pods_key, self.meta_key)  # what a whole write replaces
        self.state = StateWrites(self.lane, state_keys, lambda: rt.js, rt.redis, rt.fenced_writes)
        self.mark = self.state.mark
        self.flusher = Flusher(lambda: self.state.write(self._changes, self._everything))
        self.stopping = asyncio.Event()
        # events come from the watcher's leader only: a deposed one's are refused
        self.watchers = rt.watcher_floors()  # each watcher shard fenced by its epoch
        self._wake = asyncio.Event()
        self._cycle_written: int | None = None  # the scheduling cycle as Redis holds it
        self._batch_stamps: dict[str, float] = {}  # the stage times of the events applied
        # Lapsed attempts waiting for their fence, and the task fencing a batch of them.
        self._lapsed: dict[str, Lapsed] = {}
        self._fencing: asyncio.Task[None] | None = None
        reg = rt.registry
        self.pending = metrics.PENDING_PODS.gauge(reg)
        # each sub-queue's series, looked up once: set at every request and tick
        self._pending_series = {name: self.pending.labels(name) for name in _PENDING_GAUGED}
        self.incoming = metrics.QUEUE_INCOMING_PODS.counter(reg)
        self.lease_expired = metrics.QUEUE_LEASE_EXPIRED.counter(reg)
        self.inflight_events = metrics.QUEUE_INFLIGHT_EVENTS.gauge(reg)
        self.hint_errors = metrics.QUEUE_HINT_ERRORS.counter(reg)
        self.unschedulable = metrics.UNSCHEDULABLE_PODS.gauge(reg)
        self._unschedulable_seen: set[tuple[str, str]] = set()  # label sets set so far
        self.not_ready = NotReadyReporter(rt.nc)  # tells why PreEnqueue rejects a pod
        record_frameworks(profiles.values(), reg)  # PreEnqueue's durations
        self._hint_errors_seen = 0

    def _new_queue(self) -> SchedulingQueue:
        return SchedulingQueue(
            time.time,
            hints=self.hints,
            sort_key=self.sort_key,
            pre_enqueue=self.pre_enqueue,
            **queue_settings(self.rt),
        )

    async def run(self) -> None:
        await retry_forever("take the queue over", self._take_over)
        if self.gangs_counted:
            await retry_forever("list the gangs' pods", self._list_gang_members)
        # part of the takeover: its requests wait the takeover's 3 s, not 10 s, if unanswered
        js = self.rt.takeover_js
        await retry_forever(
            "watch Services, controllers and Workloads",
            lambda: watch_owners(js, self.objects, self._on_object),
        )
        self._notify()
        nc = self.rt.nc
        if self.rt.micro is not None:  # the instance's nats.micro service (discovery.py)
            self.rt.stats_data = lambda: stats_reply(self.q)
            await start_inspection(self.rt.micro, lambda: self.q, self.shard.subject)
        # Events and reports in arrival order; pops concurrently (they long-poll).
        own = self.shard.subject
        await serve(nc, own(QUEUE_EVENTS), self.on_events, queue=QUEUE_GROUP, concurrent=False)
        await serve(nc, own(QUEUE_REPORT), self.on_report, queue=QUEUE_GROUP, concurrent=False)
        # long polls
        await serve(nc, own(QUEUE_POP), self.on_pop, queue=QUEUE_GROUP, tracked=False)
        await serve(nc, own(QUEUE_NOMINATED), self.on_nominated, queue=QUEUE_GROUP)
        await self.rt.start_serving()
        last_leftover_flush = last_check = time.monotonic()
        while not self.stopping.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await within(self.stopping.wait(), TICK_SECONDS)
            if time.monotonic() - last_check >= CHECK_SECONDS:
                await self.state.check()
                last_check = time.monotonic()
            self.q.flush_backoff_completed()
            self._fence_lapsed(self.q.expire_leases())
            if time.monotonic() - last_leftover_flush >= UNSCHEDULABLE_FLUSH_SECONDS:
                self.q.flush_unschedulable_leftover()
                last_leftover_flush = time.monotonic()
            self._notify()
            if self.q.dirty or self.state.whole:
                await self.flusher.flush_quietly(log)

    def _fence_lapsed(self, lapsed: list[QueuedPodInfo]) -> None:
        """Lapsed attempts are fenced off the event loop's tick, one batch at a time."""
        for qpi in lapsed:
            if qpi.cycle:  # cycle 0: held when the queue was rebuilt, not a lapse
                self.lease_expired.inc()
                log.warning("lease lapsed, fencing the attempt", extra={"pod": qpi.key})
            self._lapsed[qpi.key] = Lapsed.of(qpi, binding=qpi.where == BINDING)
        if self._lapsed and (self._fencing is None or self._fencing.done()):
            batch, self._lapsed = list(self._lapsed.values()), {}
            self._fencing = asyncio.create_task(self._fence(batch))

    async def _fence(self, batch: list[Lapsed]) -> None:
        def message(lapsed: Lapsed) -> str:
            lease = self.q.binding_lease if lapsed.binding else self.q.inflight_lease
            return lapse_message(lapsed, lease)

        fences = await asyncio.gather(*(fence(self.rt.js, a, message(a)) for a in batch))
        fenced = [f for f in fences if f.outcome is Outcome.FENCED]
        if fenced:
            # The attempts can no longer bind: the room they hold at the cache is free,
            # and pods it turned away get another look (kube moves them when a binding
            # cycle forgets its pod).
            attempts = [[f.lapsed.key, f.lapsed.cycle] for f in fenced]
            await retry_forever(  # a lost binder's thousands of attempts: sized messages
                "forget lapsed attempts",
                lambda: request_all(self.rt.nc, CACHE_BINDING, attempts, "forget_attempts"),
            )
            self.q.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE)
            await self._move_at_other_shards(EVENT_ASSIGNED_POD_DELETE)
        for f in fences:
            if f.outcome is Outcome.FENCED:
                self.q.requeue_lapsed(f.lapsed.key, f.lapsed.cycle, f.seq)
            elif f.outcome is Outcome.RESOLVED:
                self.q.extend_lapsed(f.lapsed.key, f.lapsed.cycle)
        self._notify()
        await self.flusher.flush_quietly(log)

    async def _move_at_other_shards(self, event: ClusterEvent) -> None:
        """The room freed may fit the other queue shards' pods too."""
        await move_at_queue_shards(self.rt.nc, self.shard.shards, event, skip=self.shard)

    async def shutdown(self) -> None:
        self.stopping.set()
        self._notify()
        await self.flusher.flush_quietly(log)

    # --- handlers ---------------------------------------------------------------

    async def on_events(self, body: dict[str, Any]) -> dict[str, Any]:
        lane = await self.watchers.admit(body)
        if lane is None:
            return {"error": f"stale watcher epoch {body.get('epoch')!r} ({body.get('shard')!r})"}
        events: list[QueueEvent] = body["events"]
        self._batch_stamps = body.get("stamps") or {}
        try:
            applied, failed = apply_each(events, self._apply_new)
        finally:
            self._batch_stamps = {}  # a rebuild's listed pods have no stage times
        self.mark.through(body.get("through"), lane)
        self._notify()
        await self._written_with_woken_pops()
        return {"applied": len(applied), "failed": failed}

    async def _written_with_woken_pops(self) -> None:
        """Flush once the long polls this change woke have popped: their write then
        covers it too. Flushing first, a woken pop's own write (its pods' in-flight
        state, written before its reply) waited for this one to land and went to Redis
        after it: two round trips between a pod's arrival and its pop reply. A woken
        pop resumes on the loop's next turn (`on_pop` waits on the event itself)."""
        await asyncio.sleep(0)
        await self.flusher.flush()

    async def _list_gang_members(self) -> None:
        """Every gang's pods, pending and bound, from the log (upstream's workload
        manager fills itself from the pod informer's list): what the queue kept in Redis
        holds no bound pods. Before the queue serves events; those after the list's cut
        come as any event does."""
        relisted = route_latest(await read_latest(self.rt.js), self.rt.config.scheduler_names)
        members: gangs.Members = {}
        for ev in relisted.queue:
            gangs.observe(members, ev)
        self.objects.gang_members = members
        log.info("gang members listed: %d gangs", len(members))

    def _on_object(self, ref: SubjectRef, obj: ClusterObject | None) -> None:
        """A Workload or v1alpha2 PodGroup added or changed may let the gang pods
        PreEnqueue holds in (kube's Workload/Add, PodGroup/Add events); the tick flushes
        what moved."""
        resource = (
            WORKLOAD
            if isinstance(obj, Workload)
            else WORKLOAD_POD_GROUP
            if isinstance(obj, SchedulingPodGroup)
            else None
        )
        if obj is not None and resource is not None:
            raw = obj.model_dump(by_alias=True)
            self.q.move_all_to_active_or_backoff(ClusterEvent(resource, ADD), None, raw)

    def _apply_new(self, ev: QueueEvent) -> None:
        """Apply an event the queue does not hold yet (a rebuild listed those up to its cut)."""
        if not self.mark.holds(ev.get("seq")):
            self._apply_event(ev)

    def _apply_event(self, ev: QueueEvent) -> None:
        if self.gangs_counted:  # only GangScheduling reads them (read gang_of 2x a pod)
            gangs.observe(self.objects.gang_members, ev)  # before: PreEnqueue counts the pod
        op = ev["op"]
        if op == "upsert":
            self.q.add(ev["key"], ev.get("uid", ""), ev["pod"], ev["seq"])
            qpi = self.q.get(ev["key"])
            if qpi is not None and qpi.raw is ev["pod"]:
                qpi.size = ev.get("size", 0)
                qpi.stamps = {**self._batch_stamps, QUEUED: qpi.timestamp}
        elif op == "delete":
            self.q.delete(ev["key"])
        elif op == "assigned":
            self.q.delete(ev["key"], bound=True)  # a binding, not a removal
        elif op == "move":
            self.q.move_all_to_active_or_backoff(cluster_event(ev), ev.get("old"), ev.get("new"))
        else:
            raise ValueError(f"unknown queue op {op!r}")

    async def on_pop(self, body: dict[str, Any]) -> Packed:
        """A batch of pods, long-polled. The worker's reports of its last batch may ride
        on it: applied first (before an await, so in arrival order), and answered, like
        QUEUE_REPORT, only once written; a worker whose pop goes unanswered sends them
        again with its next pop (applying a report twice changes nothing)."""
        limit = max(1, min(int(body.get("max", 1)), MAX_POP))
        wait = max(0, min(int(body.get("wait_ms", 0)), MAX_POP_WAIT_MS)) / 1000
        received = time.monotonic()
        deadline = received + wait
        given_up = _given_up_at(received, body.get("timeout_ms"))
        extra: dict[str, Any] = {}  # the reports' answer, when the pop carries them
        if "reports" in body:
            accepted, failed = self._apply_reports(body)
            extra = {"accepted": accepted, "failed": failed}
        while True:
            popped = self.q.pop(limit, ReplyBudget(body_limit(self.rt.nc.max_payload)).fits)
            if popped:
                at = time.time()
                attempts = [(p.key, p.cycle) for p in popped]
                await self._written_or_unpopped(attempts)
                if time.monotonic() > given_up:
                    self._unpop_late(attempts)
                return self._pop_reply(popped, popped=at, **extra)
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.stopping.is_set():
                if extra:
                    await self.flusher.flush()
                return self._pop_reply([], **extra)
            # asyncio.timeout, not wait_for: wait_for runs the wait in a task of its own,
            # which took the woken pop a second turn of the loop, after the write of the
            # change that woke it had started (_written_with_woken_pops)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._wake.wait()

    async def _written_or_unpopped(self, attempts: list[tuple[str, int]]) -> None:
        """Write a pop's pods as in flight before its reply; when the write fails (Redis
        failing over), no reply goes out, so the pods go back to activeQ for the next
        pop, not held until their attempts' lease lapses (15 s by default)."""
        try:
            await self.flusher.flush()
        except BaseException:
            self._put_back(attempts, "pop not written")
            raise

    def _unpop_late(self, attempts: list[tuple[str, int]]) -> None:
        """A pop written only after its worker stopped waiting for the reply (Redis slow
        or failing over): nobody would take its pods, so they go back to activeQ rather
        than wait in flight for their attempts' lease; raises, so no reply goes out. The
        worker sends the reports it carried again."""
        self._put_back(attempts, "pop written after its worker gave up")
        raise TimeoutError("pop written after its worker gave up waiting")

    def _put_back(self, attempts: list[tuple[str, int]], why: str) -> None:
        """A pop's pods back in activeQ for the next pop (written as pending by the
        next flush)."""
        back = self.q.unpop(attempts)
        log.warning("%s, %d pods back to activeQ", why, back)
        self._notify()

    def _pop_reply(self, pods: list[QueuedPodInfo], **rest: Any) -> Packed:
        """{"pods": [QueuedPod, ...], "nominated_version", **rest}, each pod object as
        packed once for its version (records.py)."""
        wired = (wire_pod(p, _wire(p)) for p in pods)
        return pop_reply(wired, len(pods), {"nominated_version": self.q.nominator.version, **rest})

    async def on_report(self, body: dict[str, Any]) -> dict[str, Any]:
        accepted, failed = self._apply_reports(body)
        await self._written_with_woken_pops()  # pods its moves brought back
        return {"accepted": accepted, "failed": failed}

    def _apply_reports(self, body: dict[str, Any]) -> tuple[int, list[list[Any]]]:
        """{"reports": [Report, ...], "move": label}: the reports, then the move; how
        many were accepted (not stale), and [index, reason] of those that raised."""
        reports: list[Report] = body["reports"]
        applied, failed = apply_each(reports, self._apply_report)
        if body.get("move"):
            self.q.move_all_to_active_or_backoff(body["move"])
        self._notify()
        return sum(applied), failed

    def _apply_report(self, rep: Report) -> bool:
        key, cycle, outcome = rep["key"], rep["cycle"], rep["outcome"]
        if outcome == "assumed":
            return self.q.assumed(key, cycle)
        return self.q.failed(
            key,
            cycle,
            unschedulable=outcome == "unschedulable",
            message=rep.get("message", ""),
            plugins=rep.get("plugins", []),
            seq=rep.get("seq"),
            nominated_node=rep.get("nominated_node"),
            victims=rep.get("victims"),
        )

    async def on_nominated(self, body: dict[str, Any]) -> dict[str, Any]:
        """The nominated pods (of one node, or all): what the worker's
        RunFilterPluginsWithNominatedPods adds to a node before filtering. A page at a
        time, from `offset`, as many as fit the server's max payload; `next` is where
        the next page starts (absent on the last)."""
        body = body if isinstance(body, dict) else {}
        nominated = self.q.nominated_pods(body.get("node"))
        offset = max(0, int(body.get("offset") or 0))
        budget = ReplyBudget(body_limit(self.rt.nc.max_payload))
        pods: list[NominatedPod] = []
        for p in nominated[offset:]:
            if not budget.fits(p) and pods:
                break
            pod: NominatedPod = {
                "key": p.key,
                "uid": p.uid,
                "node": p.nominated_node,
                "priority": p.priority,
                "seq": p.seq,
                "pod": p.raw,
            }
            if p.victims:
                pod["victims"] = p.victims
            pods.append(pod)
        reply: dict[str, Any] = {"version": self.q.nominator.version, "pods": pods}
        if offset + len(pods) < len(nominated):
            reply["next"] = offset + len(pods)
        return reply

    def _notify(self) -> None:
        counts = self.q.counts()
        for name, series in self._pending_series.items():
            series.set(counts.get(name, 0))
        for (queue, event), n in self.q.take_incoming().items():
            self.incoming.labels(queue, event).inc(n)
        self._set_unschedulable_pods()
        for qpi in self.q.take_pre_enqueue_rejected():
            self.not_ready.rejected(qpi)
        self.inflight_events.set(self.q.inflight_events)
        if self.hints.errors > self._hint_errors_seen:
            self.hint_errors.inc(self.hints.errors - self._hint_errors_seen)
            self._hint_errors_seen = self.hints.errors
        if counts.get("active", 0) or self.stopping.is_set():
            self._wake.set()
            self._wake = asyncio.Event()

    def _set_unschedulable_pods(self) -> None:
        """The gauge from the queue's counts; label sets it no longer has go to 0 (a
        rebuilt queue starts its counts afresh)."""
        counts = self.q.unschedulable_pods()
        for label in self._unschedulable_seen - counts.keys():
            self.unschedulable.labels(*label).set(0)
        for label, n in counts.items():
            self.unschedulable.labels(*label).set(n)
        self._unschedulable_seen |= counts.keys()

    # --- persistence ------------------------------------------------------------

    async def _take_over(self) -> None:
        """The queue as Redis holds it, or rebuilt from the log when Redis lost it (or
        never held it); written back as a new incarnation before anything is served."""
        # a shard's pods come from its watcher shard alone: only that lane's ack floor
        # tells whether Redis lost its writes (the others send it moves only)
        lanes = {self.shard.watcher_lane} if self.shard.sharded else None
        # and a state kept under another shard count holds another share of the pods
        takeover = await state_at_takeover(
            self.rt.takeover_js,
            self.rt.redis,
            self.lane,
            watcher_lanes=lanes,
            shards=self.shard.shards,
        )
        self.mark.layout = takeover.layout
        if takeover.lost is None and (await self._restore() or not takeover.first):
            self.mark.start(
                takeover.incarnation, takeover.marker.applied, lanes=takeover.marker.lanes
            )
            await self.state.adopt()
        else:
            takeover.announce_rebuild(log, self.lane)
            await self._rebuild(takeover.incarnation, fence=takeover.lost is not None)
        # cycles of this incarnation: above any a lost state may have handed out
        self.q.scheduling_cycle = max(
            self.q.scheduling_cycle, incarnation_base(takeover.incarnation)
        )
        await self.flusher.flush()

    async def _rebuild(self, incarnation: int, *, fence: bool) -> None:
        """The pending pods from the log; `fence`: held until fenced (rebuild.py)."""
        relisted = route_latest(await read_latest(self.rt.js), self.rt.config.scheduler_names)
        self.q = self._new_queue()
        own = [
            ev
            for ev in relisted.queue
            if "key" not in ev or self.shard.owns(ev["key"], ev.get("gang", ""))
        ]
        held = rebuild(self.q, own, self._apply_event, fence=fence)
        log.info(
            "built from the log through sequence %d: %d pending pods, %d held to be fenced",
            relisted.cut,
            len(self.q),
            held,
        )
        self.mark.start(incarnation, relisted.cut, cut=relisted.cut)
        self.state.whole = True

    async def _restore(self) -> bool:
        """The queue as Redis holds it; False when it holds none."""
        redis = self.rt.redis
        records = await redis.hgetall(self.pods_key)
        meta = await redis.hgetall(self.meta_key)
        self.q = self._new_queue()
        self.q.restore([record_of(v) for v in records.values()])
        self.q.restore_meta(
            int(meta.get(b"scheduling_cycle", 0)), int(meta.get(b"move_request_cycle", -1))
        )
        self.q.take_dirty()
        log.info("restored %d pending pods", len(records), extra={"counts": self.q.counts()})
        return bool(records or meta)

    def _changes(self, pipe: FencedBatch) -> Callable[[], None] | None:
        """None when nothing changed since the last write: a flush that a woken pop's
        write already covered (_written_with_woken_pops) costs no round trip.

        A move alone writes nothing either: it sets the move request cycle, which no
        decision reads (queueing hints and in-flight events decide, and those are not
        persisted), so it goes to Redis with the next write. A queue shard takes the
        moves of every watcher shard, most of them in messages holding nothing else: one
        fenced round trip each, were the move request cycle written for itself."""
        dirty = self.q.take_dirty()
        cycle = self.q.scheduling_cycle
        if not dirty and cycle == self._cycle_written:
            return None
        self._queue_state(pipe, dirty)
        before, self._cycle_written = self._cycle_written, cycle

        def undo() -> None:
            self.q.dirty |= dirty
            self._cycle_written = before

        return undo

    def _everything(self, pipe: FencedBatch) -> None:
        self.q.take_dirty()
        self._cycle_written = self.q.scheduling_cycle
        self._queue_state(pipe, {key for key, _ in self.q.pending()})

    def _queue_state(self, pipe: FencedBatch, changed: set[str]) -> None:
        """The records of the `changed` pods and the queue's counters."""
        gone: list[str] = []
        records: dict[str, bytes] = {}
        for key in changed:
            qpi = self.q.get(key)
            if qpi is None:
                gone.append(key)
            else:
                records[key] = pack_record(qpi)
        if gone:  # one command per change kind, however many pods changed
            pipe.hdel(self.pods_key, *gone)
        if records:
            pipe.hset(self.pods_key, mapping=records)  # type: ignore[arg-type]
        pipe.hset(
            self.meta_key,
            mapping={
                "scheduling_cycle": self.q.scheduling_cycle,
                "move_request_cycle": self.q.move_request_cycle,
            },
        )


class ReplyBudget:
    """Admits pods into one pop reply while it stays within the server's max payload:
    a burst of large pods is handed out over several pops, never in a reply the
    server refuses (its pods would sit in flight until their leases lapsed)."""

    ROOM = 64 * 1024  # the reply's other fields
    PER_POD = 512  # a QueuedPod's fields beside the pod object

    def __init__(self, limit: int) -> None:
        self.left = limit - self.ROOM

    def fits(self, qpi: QueuedPodInfo) -> bool:
        if not qpi.size:
            qpi.size = len(qpi.packed_raw())
        need = qpi.size + len(qpi.key) + self.PER_POD
        need += sum(len(v) + 8 for v in qpi.victims)  # a preemptor's victims travel with it
        if need > self.left:
            return False
        self.left -= need
        return True


def _wire(p: QueuedPodInfo) -> dict[str, Any]:
    """The QueuedPod but for its pod object, which records.wire_pod splices in."""
    wired: dict[str, Any] = {
        "key": p.key,
        "uid": p.uid,
        "seq": p.seq,
        "attempts": p.attempts,
        "cycle": p.cycle,
        "initial_attempt_ts": p.initial_attempt_timestamp or 0.0,
        "nominated_node": p.nominated_node,
        "stamps": p.stamps,
    }
    if p.victims and p.nominated_node:
        wired["victims"] = p.victims
    return wired


def _given_up_at(received: float, timeout_ms: Any) -> float:
    """When the worker whose pop arrived at `received` (monotonic) stops waiting for the
    reply, less a margin for the reply's way back; never, for a pop that does not say.
    Measured from the handler's start, not a wall clock sent along: a host whose clock
    is ahead would otherwise put back every pop."""
    if not isinstance(timeout_ms, int) or timeout_ms <= 0:
        return math.inf
    return received + max(0.0, timeout_ms / 1000 - POP_REPLY_MARGIN)
