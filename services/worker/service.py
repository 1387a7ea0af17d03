"""Worker: the scheduling cycle of scheduleOne, for batches of pods, in parallel lanes.

pop a batch -> refresh the snapshot -> for each pod: Filter, Score, select host,
assume locally (PostFilter preemption for a pod that fits nowhere) -> commit the
batch's assumptions at the cache (commit.py; validated there) -> Permit (permit.py)
-> hand the committed pods to binders -> record failures (and preemption's act
phase, preempt.py) -> report to the queue. A refused assume is a conflict: refresh
and retry that pod, bounded. Beside the lanes, the worker answers operators' what-if
requests (whatif.py).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time

from nats.aio.msg import Msg

from services.worker.attempt import Attempt, queued_report
from services.worker.commit import Committer
from services.worker.permit import PermitPhase
from services.worker.pops import Outcomes, Pops, lane_batch, lane_shards
from services.worker.preempt import PreemptionPhase, watch_pdbs
from services.worker.whatif import WhatIf
from shared.api.podstatus import scheduler_name, with_nominated_node
from shared.config import OPPORTUNISTIC_BATCHING
from shared.framework.diagnosis import FitError
from shared.framework.events import EVENT_ASSIGNED_POD_DELETE, event_label
from shared.framework.interface import ClusterObjects
from shared.framework.opportunistic_batch import SNAPSHOT_CHANGED, OpportunisticBatch
from shared.framework.profile_map import ProfileMap
from shared.framework.schedule_one import Scheduler, SchedulingError
from shared.framework.types import PodInfo
from shared.messages import NominatedPod, QueuedPod, Report
from shared.plugins import REGISTRY
from shared.runtime import failpoints, metrics
from shared.runtime.failures import Failure, record_failure
from shared.runtime.framework_metrics import record_frameworks
from shared.runtime.informer import watch_owners
from shared.runtime.retry import retry_forever
from shared.runtime.rpc import request
from shared.runtime.service import Runtime
from shared.sharding import QueueShard, queue_shards
from shared.snapshot import Snapshot
from shared.stages import PICKED, POPPED, Stamps
from shared.subjects import (
    CACHE_BINDING,
    NODE_CHANGES,
    QUEUE_NOMINATED,
)

log = logging.getLogger("ksched.worker")

LANES = 2  # batches in flight per worker: one computes while another waits on I/O
BATCH = 64
POP_WAIT_MS = 1000
MAX_CONFLICT_RETRIES = 3
CACHE_AWAY = "the scheduler cache did not answer the assume; retried after backoff"
# A batch should be reported well within the queue's in-flight lease (15 s by default):
# past it the queue hands the pods out again and the redone work makes things worse.
BATCH_SECONDS = 3.0


def batch_size(per_pod_seconds: float) -> int:
    """How many pods to pop so that a batch takes about BATCH_SECONDS at the recent pace
    (wall time per pod, which grows when lanes and services share the cores)."""
    if per_pod_seconds <= 0:
        return BATCH
    return max(1, min(BATCH, int(BATCH_SECONDS / per_pod_seconds)))


class Worker:
    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        # Services and controllers (PodTopologySpread's default selectors), kept current
        self.objects = ClusterObjects()
        self.snapshot = Snapshot(rt.redis, self.objects)
        percentage = rt.config.percentage_of_nodes_to_score
        profiles = ProfileMap(rt.config, REGISTRY)
        self.providers = profiles.providers  # what the plugins read beyond the snapshot
        batching = rt.config.feature_enabled(OPPORTUNISTIC_BATCHING)
        self.schedulers = {
            name: Scheduler(
                fw,
                percentage_of_nodes_to_score=percentage,
                rng=random.Random(),
                opportunistic=OpportunisticBatch(fw) if batching else None,
            )
            for name, fw in profiles.items()
        }
        frameworks = list(profiles.values())
        self.whatif = WhatIf(rt.redis, self.objects, rt.config, self.providers)
        # The nominated pods of each queue shard, and the version of each that they are.
        self.queue_shards = queue_shards(rt.settings.shards)
        self.nominated_version: dict[QueueShard, int] = {q: 0 for q in self.queue_shards}
        self.nominated_by_shard: dict[QueueShard, list[NominatedPod]] = {}
        self.per_pod_seconds = 0.0  # recent wall time per pod, smoothed
        self.stopping = asyncio.Event()
        reg = rt.registry
        self.attempts = metrics.SCHEDULE_ATTEMPTS.counter(reg)
        self.duration = metrics.SCHEDULING_ATTEMPT_DURATION.histogram(reg)
        self.sli_duration = metrics.POD_SCHEDULING_SLI_DURATION.histogram(reg)
        self.pod_attempts = metrics.POD_SCHEDULING_ATTEMPTS.histogram(reg)
        self.batch_attempts = metrics.BATCH_ATTEMPTS.counter(reg)
        self.batch_flushed = metrics.BATCH_CACHE_FLUSHED.counter(reg)
        record_frameworks(frameworks, reg)
        self.committer = Committer(rt, self.snapshot, metrics.ASSUME_CONFLICTS.counter(reg))
        self.permit = PermitPhase(rt, self.snapshot, frameworks, self.providers)
        self.preemption = PreemptionPhase(
            rt.nc,
            self.snapshot,
            self.providers,
            metrics.PREEMPTION_ATTEMPTS.counter(reg),
            metrics.PREEMPTION_VICTIMS.histogram(reg),
        )

    async def run(self) -> None:
        # The cache's node changes, applied at each refresh (before the first one, so
        # that only what came before the subscription is read from Redis)
        await self.rt.nc.subscribe(NODE_CHANGES, cb=self._on_node_changes)
        js = self.rt.js
        await retry_forever(
            "watch PodDisruptionBudgets", lambda: watch_pdbs(js, self.providers.pdbs)
        )
        await retry_forever(
            "watch Services and controllers", lambda: watch_owners(js, self.objects)
        )
        if self.rt.micro is not None:
            await self.whatif.start(self.rt.micro, self.rt.nc.max_payload)
        await self.rt.start_serving()  # it only asks others: it serves as soon as it runs
        lanes = lane_shards(LANES, len(self.queue_shards))  # a long poll at every shard
        await asyncio.gather(*(self._lane(shard, len(lanes)) for shard in lanes))

    async def shutdown(self) -> None:
        self.stopping.set()

    async def _on_node_changes(self, msg: Msg) -> None:
        self.snapshot.receive(msg.data)

    async def _lane(self, shard: QueueShard, lanes: int) -> None:
        """Pops from queue shard `shard` (one of `lanes` lanes) and reports to it."""
        pops = Pops(self.rt.nc, POP_WAIT_MS / 1000 + 5, shard)
        while not self.stopping.is_set():
            limit = lane_batch(batch_size(self.per_pod_seconds), LANES, lanes)
            # The snapshot's Redis read goes out with the pop, not after its reply: the
            # batch then only takes the feed's changes since (Snapshot.catch_up).
            refreshing = asyncio.create_task(self._refresh_quietly())
            try:
                reply = await pops.pop(limit, POP_WAIT_MS)
            except Exception as err:
                await refreshing
                log.warning("pop failed: %s", err)
                await asyncio.sleep(0.5)
                continue
            picked = time.time()
            refreshed = await refreshing
            if "nominated_version" in reply:
                await self._sync_nominated(shard, reply["nominated_version"])
            if reply["pods"]:
                try:
                    stamps = {POPPED: reply.get(POPPED, picked), PICKED: picked}
                    batch = await self.schedule_batch(reply["pods"], stamps, refreshed=refreshed)
                    pops.carry(batch)
                except Exception:
                    # A batch that fails midway (NATS or Redis busy or away) is not the
                    # end of the worker: the queue hands its pods out again once their
                    # lease lapses, and the cache forgets what was never bound.
                    log.exception("batch of %d pods failed", len(reply["pods"]))
                    await asyncio.sleep(0.5)
        # stopping: unreported attempts lapse at the queue (its attempt lease) and go out
        # again, as after a crash; retrying them through the shutdown grace helps nobody
        if pops.unreported.reports:
            try:
                await pops.report()
            except Exception as err:
                log.warning("reports given up while stopping: %s", err)

    async def _refresh_quietly(self) -> bool:
        """Refresh the snapshot while a pop waits (which also keeps it warm while there
        is nothing to schedule); False when Redis did not answer."""
        try:
            await self.snapshot.refresh()
        except Exception as err:  # Redis busy or away: the next batch refreshes anyway
            log.warning("refresh before a pop failed: %s", err)
            return False
        return True

    async def _sync_all_nominated(self) -> None:
        """Every queue shard's nominated pods, whatever their versions."""
        for shard in self.queue_shards:
            await self._sync_nominated(shard, None)

    async def _sync_nominated(self, shard: QueueShard, version: int | None) -> None:
        """Fetch a queue shard's nominated pods when they changed (None: whatever the
        version): Filter counts them on their nodes (RunFilterPluginsWithNominatedPods)."""
        if version == self.nominated_version[shard]:
            return
        try:
            version, pods = await self._fetch_nominated(shard)
        except Exception as err:
            log.warning("fetching nominated pods failed: %s", err)
            return  # kept stale; the next pop retries
        self.nominated_by_shard[shard] = pods
        self.nominated_version[shard] = version
        self._set_nominated()

    def _set_nominated(self) -> None:
        """What Filter reads: every shard's nominated pods by node."""
        nominated: dict[str, list[PodInfo]] = {}
        for p in (p for pods in self.nominated_by_shard.values() for p in pods):
            # kube's terminating pods, which every scheduler sees: victims of any
            # preemption that this snapshot still shows on the nominated node. A pod
            # nominated there waits for them rather than preempting again elsewhere.
            for victim in p.get("victims", ()):
                self.providers.terminating.setdefault(victim, p["node"])
            try:
                nominated.setdefault(p["node"], []).append(PodInfo.of(p["pod"], p["seq"]))
            except Exception as err:  # validated at the watcher; never expected here
                log.warning("skipping nominated pod %s: %s", p.get("key"), err)
        self.providers.nominated = nominated

    async def _fetch_nominated(self, shard: QueueShard) -> tuple[int, list[NominatedPod]]:
        """Every nominated pod of a queue shard, page by page (a page fits the server's
        max payload); pages of different versions start the listing over."""
        subject = shard.subject(QUEUE_NOMINATED)
        for _ in range(3):
            pods: list[NominatedPod] = []
            reply = await request(self.rt.nc, subject, {})
            version = reply["version"]
            pods += reply["pods"]
            while reply.get("next") and reply["version"] == version:
                reply = await request(self.rt.nc, subject, {"offset": reply["next"]})
                pods += reply["pods"]
            if reply["version"] == version:
                return version, pods
        raise RuntimeError("the nominated pods kept changing while listed")

    async def schedule_batch(
        self, queued: list[QueuedPod], stamps: Stamps | None = None, *, refreshed: bool = False
    ) -> Outcomes:
        """`stamps`: the batch's stage times so far, carried on to the bindings;
        `refreshed`: the snapshot read Redis while the pods were popped. The reports,
        for the queue: they ride on the lane's next pop (`Pops.pop`)."""
        start = time.perf_counter()
        await (self.snapshot.catch_up() if refreshed else self.snapshot.refresh())
        freed = self.snapshot.freed
        self.preemption.prune_terminating()
        await self.permit.refresh_pod_groups()
        reports: list[Report] = []
        attempts = []
        for qp in queued:
            attempt = self._attempt(qp, reports)
            if attempt is not None:
                attempt.stamps = {**qp.get("stamps", {}), **(stamps or {})}
                attempts.append(attempt)
        committed, failed, unanswered = await self._schedule_and_commit(attempts)
        await self.committer.hand_to_binders(committed)
        bound = [self._scheduled(a) for a in committed]
        if committed:
            await failpoints.hit("worker.handed")  # tests: frozen before its report
        await self.permit.second_look([a for a in committed if a.waits])
        failures = await asyncio.gather(*(self._record_failure(a, err) for a, err in failed))
        reports.extend(bound)
        reports.extend(failures)
        reports.extend(self._unanswered(a) for a in unanswered)
        # Victims already gone mean this attempt read a node older than the queue's view:
        # their deletion may have moved pods before this one was parked; move it now.
        gone = any(a.victims_gone for a, _ in failed)
        # Likewise room the cache freed after this batch read the snapshot (a lapsed
        # attempt forgotten, a pod deleted): the queue's move for it may have come
        # before these pods were popped, and nothing else would bring them back.
        gone = gone or (bool(failed) and await self._freed_since(freed))
        # An unanswered assume's room, held here while it was out (up to its timeout),
        # was just given back: pods turned away against it meanwhile were parked, and
        # the queue's move at its fence came before. kube's binding-cycle failure
        # forgets the assumed pod and moves them the same way (AssignedPodDelete).
        gone = gone or bool(unanswered)
        move = event_label(EVENT_ASSIGNED_POD_DELETE) if gone else None
        per_pod = (time.perf_counter() - start) / max(len(queued), 1)
        self.per_pod_seconds = (
            per_pod if not self.per_pod_seconds else 0.7 * self.per_pod_seconds + 0.3 * per_pod
        )
        profiles = {qp["key"]: scheduler_name(qp["pod"]) for qp in queued}
        for rep in reports:  # kube's result label: scheduled, unschedulable, error
            result = "scheduled" if rep["outcome"] == "assumed" else rep["outcome"]
            self.duration.labels(result, profiles.get(rep["key"], "")).observe(per_pod)
        return Outcomes(reports, move)

    async def _freed_since(self, freed: int) -> bool:
        """Whether the cache freed room since the snapshot showed `freed` refreshes with
        room freed (read again now)."""
        try:
            await self.snapshot.refresh()
        except Exception as err:  # Redis busy or away: the batch's failures stand
            log.warning("refresh after failures failed: %s", err)
        return self.snapshot.freed != freed

    def _attempt(self, qp: QueuedPod, reports: list[Report]) -> Attempt | None:
        scheduler = self.schedulers.get(scheduler_name(qp["pod"]))
        raw = qp["pod"]
        if "nominated_node" in qp:  # the queue may know the nomination before the pod says it
            raw = with_nominated_node(raw, qp["nominated_node"]) or raw
            # Victims of its preemption (by whichever worker) that this snapshot still
            # shows are terminating: the pod waits for them instead of preempting again.
            for victim in qp.get("victims", ()):
                self.providers.terminating.setdefault(victim, qp["nominated_node"])
        try:
            pod = PodInfo.of(raw, qp["seq"])
        except Exception as err:  # validated at the watcher; never expected here
            reports.append(queued_report(qp, "error", f"cannot read pod: {err}"))
            return None
        if scheduler is None:
            reports.append(queued_report(qp, "error", "no profile for schedulerName"))
            return None
        # The pod is out again: an earlier attempt's room held here goes before its Filter.
        self.snapshot.supersede(pod.key, qp["cycle"])
        return Attempt(qp, pod, scheduler)

    async def _schedule_and_commit(
        self, attempts: list[Attempt]
    ) -> tuple[list[Attempt], list[tuple[Attempt, Exception]], list[Attempt]]:
        """The committed attempts, the failed ones, and those the cache did not answer."""
        committed: list[Attempt] = []
        failed: list[tuple[Attempt, Exception]] = []
        unanswered: list[Attempt] = []
        for round_ in range(MAX_CONFLICT_RETRIES + 1):
            placed = []
            self._flush_batching()
            for a in attempts:
                error = self._place(a)
                if error is None:
                    placed.append(a)
                else:
                    failed.append((a, error))
            if not placed:
                break
            refused, away = await self.committer.assume(placed, committed)
            unanswered += away
            if not refused:
                break
            await self.snapshot.refresh()
            await self.snapshot.reload(self.rt.redis, {a.node for a in refused})
            if any(a.reserved_room for a in refused):  # a nomination this worker missed
                await self._sync_all_nominated()
            attempts = refused
            if round_ == MAX_CONFLICT_RETRIES:
                failed.extend(
                    (a, RuntimeError("assume conflict, retries exhausted")) for a in refused
                )
        self._flush_batching()
        committed, rejected = self.permit.run(committed)
        if rejected:  # they were committed: give their room back
            for a, _ in rejected:
                self.snapshot.forget(a.pod, a.node, a.cycle)
            body = {"forget": [[a.pod.key, a.qp["uid"]] for a, _ in rejected]}
            await retry_forever("forget at cache", lambda: request(self.rt.nc, CACHE_BINDING, body))
        # Before any bind request goes out: a binder asking about a waiting pod must
        # already find the allows (or rejections) this batch's Permit plugins sent.
        await self.permit.send_signals()
        failed.extend(rejected)
        return committed, failed, unanswered

    def _flush_batching(self) -> None:
        """Opportunistic batching reuses results only within one synchronous run of
        cycles: while the worker awaited, objects the plugins read beside the snapshot
        (namespaces, Services) may have changed in place. Its counts go to /metrics."""
        for name, scheduler in self.schedulers.items():
            ob = scheduler.opportunistic
            if ob is None:
                continue
            ob.flush(SNAPSHOT_CHANGED)
            for counts, metric in (
                (ob.attempts, self.batch_attempts),
                (ob.flushes, self.batch_flushed),
            ):
                for label, n in counts.items():
                    metric.labels(name, label).inc(n)
                counts.clear()

    def _place(self, a: Attempt) -> Exception | None:
        """The scheduling cycle up to Reserve, against the local snapshot."""
        a.state = a.framework.new_cycle_state()  # sampled for plugin metrics, or not
        try:
            result = a.scheduler.schedule_pod(a.state, a.pod, self.snapshot.cluster())
        except FitError as err:
            self.preemption.post_filter(a, err)
            return err
        except SchedulingError as err:
            return err
        a.node = result.suggested_host
        status = a.framework.run_reserve_plugins_reserve(a.state, a.pod, a.node)
        if not status.ok:
            a.framework.run_reserve_plugins_unreserve(a.state, a.pod, a.node)
            return SchedulingError(status)
        self.snapshot.assume(a.pod, a.node, a.cycle)  # later pods in the batch see it
        return None

    def _unanswered(self, a: Attempt) -> Report:
        """No answer from the cache is no verdict on the pod: it goes back to the queue
        to be tried again after its backoff, with no FailedScheduling written."""
        self.attempts.labels("error", a.framework.profile).inc()
        return queued_report(a.qp, "error", CACHE_AWAY)

    def _scheduled(self, a: Attempt) -> Report:
        """A pod handed to a binder: counted as scheduled, reported as assumed."""
        self.attempts.labels("scheduled", a.framework.profile).inc()
        self._observe_scheduled(a.qp)
        return queued_report(a.qp, "assumed")

    def _observe_scheduled(self, qp: QueuedPod) -> None:
        attempts = qp["attempts"]
        self.pod_attempts.observe(attempts)
        if qp["initial_attempt_ts"]:
            label = "15+" if attempts >= 15 else str(attempts)
            self.sli_duration.labels(label).observe(time.time() - qp["initial_attempt_ts"])

    async def _record_failure(self, a: Attempt, err: Exception) -> Report:
        """PodScheduled=False with the reason (and preemption's nomination), the
        FailedScheduling event, the report; the victims go once the nomination is
        written, which goes once the cache reserved it."""
        if isinstance(err, FitError) and a.preemption is not None:
            await self.preemption.reserve(a, err)
        if isinstance(err, FitError):
            failure = Failure(
                a.pod.key,
                a.qp["cycle"],
                err.message(),
                sorted(err.diagnosis.unschedulable_plugins),
                unschedulable=True,
            )
        else:
            failure = Failure(a.pod.key, a.qp["cycle"], str(err))
        self.attempts.labels(failure.outcome, a.framework.profile).inc()
        nominate = a.preemption.nominated_node_name if a.preemption is not None else None
        rep = await record_failure(self.rt.nc, a.qp["pod"], a.qp["seq"], failure, nominate)
        if rep.get("nominated_node"):
            await self.preemption.act_on(a, rep["nominated_node"])
            assert a.preemption is not None
            rep["victims"] = [v.key for v in a.preemption.victims]
        elif nominate:
            await self.preemption.release(a)
        log.info(
            "pod unschedulable: %s",
            failure.message,
            extra={"pod": a.pod.key, "cycle": a.qp["cycle"]},
        )
        return rep
