"""Worker: the scheduling cycle of scheduleOne, for batches of pods, in parallel lanes.

pop a batch -> refresh the snapshot -> for each pod: Filter, Score, select host,
assume locally -> commit the batch's assumptions at the cache (validated there)
-> hand the committed pods to binders (JetStream work queue) -> report to the
queue. A refused assume is a conflict: refresh and retry that pod, bounded.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass, field

from services.worker.preempt import PdbWatch, act
from shared.api.pdb import PodDisruptionBudget
from shared.api.podstatus import (
    scheduler_name,
    with_nominated_node,
)
from shared.framework.cycle_state import CycleState
from shared.framework.diagnosis import Diagnosis, FitError
from shared.framework.events import EVENT_ASSIGNED_POD_DELETE, event_label
from shared.framework.interface import PostFilterResult
from shared.framework.runtime import Framework
from shared.framework.schedule_one import Scheduler, SchedulingError
from shared.framework.status import Code, Status
from shared.framework.types import PodInfo
from shared.messages import (
    Assumption,
    BindRequest,
    NominatedPod,
    Outcome,
    QueuedPod,
    Report,
    bind_message_id,
    report,
)
from shared.runtime import failpoints, metrics
from shared.runtime.failures import Failure, record_failure
from shared.runtime.permits import send_permit_signals
from shared.runtime.retry import retry_forever
from shared.runtime.rpc import chunks_for, request, request_all
from shared.runtime.service import Runtime
from shared.snapshot import Snapshot
from shared.subjects import (
    BIND_SUBJECT,
    CACHE_ASSUME,
    CACHE_BINDING,
    MSG_ID_HEADER,
    QUEUE_NOMINATED,
    QUEUE_POP,
    QUEUE_REPORT,
)
from shared.wire import pack

log = logging.getLogger("ksched.worker")

LANES = 2  # batches in flight per worker: one computes while another waits on I/O
BATCH = 64
POP_WAIT_MS = 1000
MAX_CONFLICT_RETRIES = 3
# A batch should be reported well within the queue's in-flight lease (15 s by default):
# past it the queue hands the pods out again and the redone work makes things worse.
BATCH_SECONDS = 3.0


def batch_size(per_pod_seconds: float) -> int:
    """How many pods to pop so that a batch takes about BATCH_SECONDS at the recent pace
    (wall time per pod, which grows when lanes and services share the cores)."""
    if per_pod_seconds <= 0:
        return BATCH
    return max(1, min(BATCH, int(BATCH_SECONDS / per_pod_seconds)))


@dataclass
class Attempt:
    qp: QueuedPod
    pod: PodInfo
    scheduler: Scheduler
    node: str = ""
    state: CycleState = field(default_factory=CycleState)
    preemption: PostFilterResult | None = None  # what PostFilter decided, on a FitError
    waits: dict[str, float] = field(default_factory=dict)  # Permit said Wait: plugin -> timeout
    victims_gone: bool = False  # preemption found victims already deleted

    @property
    def framework(self) -> Framework:
        return self.scheduler.fw


class Worker:
    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.snapshot = Snapshot(rt.redis)
        percentage = rt.config.percentage_of_nodes_to_score
        self.schedulers = {
            p.scheduler_name: Scheduler(
                Framework.from_profile(p),
                percentage_of_nodes_to_score=percentage,
                rng=random.Random(),
            )
            for p in rt.config.profiles
        }
        # Shared by every profile's handle: the budgets preemption respects, and the
        # victims this worker deleted that its snapshot still shows.
        self.pdbs: list[PodDisruptionBudget] = []
        self.terminating: dict[str, str] = {}
        for scheduler in self.schedulers.values():
            scheduler.fw.handle.pdbs = self.pdbs
            scheduler.fw.handle.terminating = self.terminating
        self.nominated_version = 0
        # Coscheduling reads the pod groups the cache tracks; other profiles skip the read.
        self.needs_pod_groups = any(
            "Coscheduling" in s.fw.plugins.instances for s in self.schedulers.values()
        )
        self.per_pod_seconds = 0.0  # recent wall time per pod, smoothed
        self.stopping = asyncio.Event()
        reg = rt.registry
        self.attempts = metrics.SCHEDULE_ATTEMPTS.counter(reg)
        self.conflicts = metrics.ASSUME_CONFLICTS.counter(reg)
        self.duration = metrics.SCHEDULING_ATTEMPT_DURATION.histogram(reg)
        self.sli_duration = metrics.POD_SCHEDULING_SLI_DURATION.histogram(reg)
        self.pod_attempts = metrics.POD_SCHEDULING_ATTEMPTS.histogram(reg)
        self.preemption_attempts = metrics.PREEMPTION_ATTEMPTS.counter(reg)
        self.preemption_victims = metrics.PREEMPTION_VICTIMS.histogram(reg)

    async def run(self) -> None:
        watch = PdbWatch(self.rt.js, self.pdbs)
        await retry_forever("watch PodDisruptionBudgets", watch.start)
        self.rt.serving.set()  # it only asks others: it serves as soon as it runs
        await asyncio.gather(*(self._lane() for _ in range(LANES)))

    async def shutdown(self) -> None:
        self.stopping.set()

    async def _lane(self) -> None:
        while not self.stopping.is_set():
            try:
                reply = await request(
                    self.rt.nc,
                    QUEUE_POP,
                    {"max": batch_size(self.per_pod_seconds), "wait_ms": POP_WAIT_MS},
                    timeout=POP_WAIT_MS / 1000 + 5,
                )
            except Exception as err:
                log.warning("pop failed: %s", err)
                await asyncio.sleep(0.5)
                continue
            if "nominated_version" in reply:
                await self._sync_nominated(reply["nominated_version"])
            if not reply["pods"]:
                await self._idle_refresh()
            else:
                try:
                    await self.schedule_batch(reply["pods"])
                except Exception:
                    # A batch that fails midway (NATS or Redis busy or away) is not the
                    # end of the worker: the queue hands its pods out again once their
                    # lease lapses, and the cache forgets what was never bound.
                    log.exception("batch of %d pods failed", len(reply["pods"]))
                    await asyncio.sleep(0.5)

    async def _idle_refresh(self) -> None:
        """Keep the snapshot warm while there is nothing to schedule, so that the next
        batch does not start by reading every change since (every node, at start)."""
        try:
            await self.snapshot.refresh()
        except Exception as err:  # Redis busy or away: the next batch refreshes anyway
            log.warning("idle refresh failed: %s", err)

    async def _sync_nominated(self, version: int) -> None:
        """Fetch the queue's nominated pods when they changed: Filter counts them on
        their nodes (RunFilterPluginsWithNominatedPods)."""
        if version == self.nominated_version:
            return
        try:
            version, pods = await self._fetch_nominated()
        except Exception as err:
            log.warning("fetching nominated pods failed: %s", err)
            return  # kept stale; the next pop retries
        nominated: dict[str, list[PodInfo]] = {}
        for p in pods:
            try:
                nominated.setdefault(p["node"], []).append(PodInfo.of(p["pod"], p["seq"]))
            except Exception as err:  # validated at the watcher; never expected here
                log.warning("skipping nominated pod %s: %s", p.get("key"), err)
        for scheduler in self.schedulers.values():
            scheduler.fw.handle.nominated = nominated
        self.nominated_version = version

    async def _fetch_nominated(self) -> tuple[int, list[NominatedPod]]:
        """Every nominated pod, page by page (a page fits the server's max payload);
        pages of different versions start the listing over."""
        for _ in range(3):
            pods: list[NominatedPod] = []
            reply = await request(self.rt.nc, QUEUE_NOMINATED, {})
            version = reply["version"]
            pods += reply["pods"]
            while reply.get("next") and reply["version"] == version:
                reply = await request(self.rt.nc, QUEUE_NOMINATED, {"offset": reply["next"]})
                pods += reply["pods"]
            if reply["version"] == version:
                return version, pods
        raise RuntimeError("the nominated pods kept changing while listed")

    async def schedule_batch(self, queued: list[QueuedPod]) -> None:
        start = time.perf_counter()
        await self.snapshot.refresh()
        self._prune_terminating()
        await self._refresh_pod_groups()
        reports: list[Report] = []
        attempts = []
        for qp in queued:
            attempt = self._attempt(qp, reports)
            if attempt is not None:
                attempts.append(attempt)
        committed, failed = await self._schedule_and_commit(attempts)
        bound = await self._hand_to_binders(committed)
        if committed:
            await failpoints.hit("worker.handed")  # tests: frozen before its report
        await self._permit_second_look([a for a in committed if a.waits])
        failures = await asyncio.gather(*(self._record_failure(a, err) for a, err in failed))
        reports.extend(bound)
        reports.extend(failures)
        # Victims already gone mean this attempt read a node older than the queue's view:
        # their deletion may have moved pods before this one was parked; move it now.
        gone = any(a.victims_gone for a, _ in failed)
        move = event_label(EVENT_ASSIGNED_POD_DELETE) if gone else None
        await retry_forever("report to queue", lambda: self._report(reports, move), max_delay=1.0)
        per_pod = (time.perf_counter() - start) / max(len(queued), 1)
        self.per_pod_seconds = (
            per_pod if not self.per_pod_seconds else 0.7 * self.per_pod_seconds + 0.3 * per_pod
        )
        profiles = {qp["key"]: scheduler_name(qp["pod"]) for qp in queued}
        for rep in reports:  # kube's result label: scheduled, unschedulable, error
            result = "scheduled" if rep["outcome"] == "assumed" else rep["outcome"]
            self.duration.labels(result, profiles.get(rep["key"], "")).observe(per_pod)

    def _attempt(self, qp: QueuedPod, reports: list[Report]) -> Attempt | None:
        scheduler = self.schedulers.get(scheduler_name(qp["pod"]))
        raw = qp["pod"]
        if "nominated_node" in qp:  # the queue may know the nomination before the pod says it
            raw = with_nominated_node(raw, qp["nominated_node"]) or raw
        try:
            pod = PodInfo.of(raw, qp["seq"])
        except Exception as err:  # validated at the watcher; never expected here
            reports.append(_report(qp, "error", f"cannot read pod: {err}"))
            return None
        if scheduler is None:
            reports.append(_report(qp, "error", "no profile for schedulerName"))
            return None
        return Attempt(qp, pod, scheduler)

    async def _schedule_and_commit(
        self, attempts: list[Attempt]
    ) -> tuple[list[Attempt], list[tuple[Attempt, Exception]]]:
        committed: list[Attempt] = []
        failed: list[tuple[Attempt, Exception]] = []
        for round_ in range(MAX_CONFLICT_RETRIES + 1):
            placed = []
            for a in attempts:
                error = self._place(a)
                if error is None:
                    placed.append(a)
                else:
                    failed.append((a, error))
            if not placed:
                break
            refused = await self._assume(placed, committed)
            if not refused:
                break
            await self.snapshot.refresh()
            await self.snapshot.reload(self.rt.redis, {a.node for a in refused})
            attempts = refused
            if round_ == MAX_CONFLICT_RETRIES:
                failed.extend(
                    (a, RuntimeError("assume conflict, retries exhausted")) for a in refused
                )
        committed, rejected = self._permit(committed)
        if rejected:  # they were committed: give their room back
            for a, _ in rejected:
                self.snapshot.forget(a.pod, a.node)
            body = {"forget": [[a.pod.key, a.qp["uid"]] for a, _ in rejected]}
            await retry_forever("forget at cache", lambda: request(self.rt.nc, CACHE_BINDING, body))
        # Before any bind request goes out: a binder asking about a waiting pod must
        # already find the allows (or rejections) this batch's Permit plugins sent.
        await send_permit_signals(self.rt.nc, (s.fw for s in self.schedulers.values()))
        failed.extend(rejected)
        return committed, failed

    def _place(self, a: Attempt) -> Exception | None:
        """The scheduling cycle up to Reserve, against the local snapshot."""
        a.state = CycleState()
        try:
            result = a.scheduler.schedule_pod(a.state, a.pod, self.snapshot.cluster())
        except FitError as err:
            self._post_filter(a, err)
            return err
        except SchedulingError as err:
            return err
        a.node = result.suggested_host
        status = a.framework.run_reserve_plugins_reserve(a.state, a.pod, a.node)
        if not status.ok:
            a.framework.run_reserve_plugins_unreserve(a.state, a.pod, a.node)
            return SchedulingError(status)
        self.snapshot.assume(a.pod, a.node)  # later pods in the batch see it
        return None

    def _post_filter(self, a: Attempt, err: FitError) -> None:
        """PostFilter (preemption) for a pod that fits nowhere; only on this path, so the
        hot path pays nothing. A nomination counts locally at once, so that the rest of
        the batch (and the other lane) leave the room to the preemptor."""
        if a.framework.post_filters and err.num_all_nodes:
            self.preemption_attempts.inc()
        a.preemption = a.scheduler.run_post_filter(a.state, a.pod, err)
        if a.preemption is not None:
            self._nominate_locally(a.pod, a.preemption.nominated_node_name)

    def _nominate_locally(self, pod: PodInfo, node: str) -> None:
        uid = pod.pod.metadata.uid
        for scheduler in self.schedulers.values():
            handle = scheduler.fw.handle
            nominated = {
                n: [p for p in pods if p.pod.metadata.uid != uid]
                for n, pods in handle.nominated.items()
            }
            if node:
                nominated.setdefault(node, []).append(pod)
            handle.nominated = {n: pods for n, pods in nominated.items() if pods}

    def _prune_terminating(self) -> None:
        """Forget victims the refreshed snapshot no longer shows (their deletion landed)."""
        if not self.terminating:
            return
        cluster = self.snapshot.cluster()
        for key, node in list(self.terminating.items()):
            info = cluster.get(node)
            if info is None or key not in info.pods:
                del self.terminating[key]

    def _permit(
        self, committed: list[Attempt]
    ) -> tuple[list[Attempt], list[tuple[Attempt, Exception]]]:
        """Permit after assume. A pod told to Wait goes to a binder all the same, which
        holds it (WaitOnPermit) with its resources assumed."""
        allowed: list[Attempt] = []
        rejected: list[tuple[Attempt, Exception]] = []
        uncommitted = self.snapshot.uncommitted()
        for a in committed:
            if not a.framework.permits:  # the default profile: nothing to run
                allowed.append(a)
                continue
            self._permit_view(a, uncommitted)
            status, waits = a.framework.run_permit_plugins(a.state, a.pod, a.node)
            if status.ok or status.code == Code.WAIT:
                a.waits = waits
                allowed.append(a)
                continue
            a.framework.run_reserve_plugins_unreserve(a.state, a.pod, a.node)
            error = _rejection(a, status)
            rejected.append((a, error))
        return allowed, rejected

    async def _permit_second_look(self, waiting: list[Attempt]) -> None:
        """Run Permit again for the pods that were told to wait, on a snapshot refreshed
        after their commit. kube-scheduler runs Permit once, serially; here two lanes
        (or workers) may commit the last members of a gang at the same time, each
        without seeing the other's, and both wait. The later commit's second look sees
        both and allows the gang (its Wait verdict is dropped: the pod already waits)."""
        if not waiting:
            return
        await self.snapshot.refresh()
        uncommitted = self.snapshot.uncommitted()
        for a in waiting:
            self._permit_view(a, uncommitted)
            a.framework.run_permit_plugins(a.state, a.pod, a.node)
        await send_permit_signals(self.rt.nc, (s.fw for s in self.schedulers.values()))

    def _permit_view(self, a: Attempt, uncommitted: frozenset[str]) -> None:
        """Permit reads what the cache holds: the snapshot, less the other lanes'
        assumptions whose commit is still out (one may be refused, and a gang counted
        with it would be allowed short of minMember)."""
        a.framework.set_snapshot(self.snapshot.cluster())
        a.framework.handle.uncommitted = uncommitted

    async def _refresh_pod_groups(self) -> None:
        if not self.needs_pod_groups:
            return
        try:
            groups = await self.snapshot.pod_groups(self.rt.redis)
        except Exception as err:
            log.warning("pod groups not refreshed: %s", err)
            return
        for scheduler in self.schedulers.values():
            scheduler.fw.handle.pod_groups = groups

    async def _assume(self, placed: list[Attempt], committed: list[Attempt]) -> list[Attempt]:
        batch: list[Assumption] = [
            {
                "key": a.pod.key,
                "uid": a.qp["uid"],
                "seq": a.qp["seq"],
                "node": a.node,
                "pod": a.qp["pod"],
                "profile": a.framework.profile,
                "cycle": a.qp["cycle"],
                "generation": self.snapshot.nodes[a.node].generation,
            }
            for a in placed
        ]
        try:
            replies = await request_all(self.rt.nc, CACHE_ASSUME, batch, "assume", timeout=10)
            results = [r for reply in replies for r in reply["results"]]
        except Exception as err:
            log.warning("assume failed: %s", err)
            results = [{"ok": False}] * len(placed)
        refused = []
        for a, result in zip(placed, results, strict=True):
            if result["ok"]:
                self.snapshot.committed(a.pod.key, result.get("generation"))
                committed.append(a)
            else:
                self.conflicts.labels(result.get("plugin", "")).inc()
                self.snapshot.forget(a.pod, a.node)
                a.framework.run_reserve_plugins_unreserve(a.state, a.pod, a.node)
                # kube assumes before Reserve, so a failed assume runs no Unreserve there;
                # ksched runs it only to undo Reserve, and drops what it asks of waiting pods.
                a.framework.handle.take_permit_signals()
                refused.append(a)
        return refused

    async def _hand_to_binders(self, committed: list[Attempt]) -> list[Report]:
        """Pods Permit allowed go in one message; each pod told to wait in its own, as
        binders hold waiting pods by message. Message ids make a retried publish of the
        same attempt(s) a no-op."""
        now = time.time()
        ready = [a for a in committed if not a.waits]
        requests = [_bind_request(a, now) for a in ready]
        sends = []
        first = 0
        for chunk in chunks_for(self.rt.nc, requests, "requests"):  # to fit max_payload
            a = ready[first]
            msg_id = bind_message_id(a.pod.key, a.qp["cycle"], batch_of=chunk.items)
            sends.append(self._publish_bind(chunk.data, msg_id))
            first += chunk.items
        sends += [
            self._publish_bind(
                pack(_bind_request(a, now)), bind_message_id(a.pod.key, a.qp["cycle"])
            )
            for a in committed
            if a.waits
        ]
        await asyncio.gather(*sends)
        for a in committed:
            self.attempts.labels("scheduled", a.framework.profile).inc()
            self._observe_scheduled(a.qp)
        return [_report(a.qp, "assumed") for a in committed]

    async def _publish_bind(self, data: bytes, msg_id: str) -> None:
        await retry_forever(
            "hand to binders",
            lambda: self.rt.js.publish(BIND_SUBJECT, data, headers={MSG_ID_HEADER: msg_id}),
            max_delay=1.0,
        )

    def _observe_scheduled(self, qp: QueuedPod) -> None:
        attempts = qp["attempts"]
        self.pod_attempts.observe(attempts)
        if qp["initial_attempt_ts"]:
            label = "15+" if attempts >= 15 else str(attempts)
            self.sli_duration.labels(label).observe(time.time() - qp["initial_attempt_ts"])

    async def _record_failure(self, a: Attempt, err: Exception) -> Report:
        """PodScheduled=False with the reason (and preemption's nomination), the
        FailedScheduling event, the report; the victims go once the nomination is
        written."""
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
            await self._preempt(a, rep["nominated_node"])
        log.info(
            "pod unschedulable: %s",
            failure.message,
            extra={"pod": a.pod.key, "cycle": a.qp["cycle"]},
        )
        return rep

    async def _preempt(self, a: Attempt, node: str) -> None:
        """The act phase, once the preemptor's nomination is written: the victims go."""
        assert a.preemption is not None
        victims = a.preemption.victims
        for v in victims:
            self.terminating[v.key] = node
        deleted = await act(self.rt.nc, a.qp["pod"], node, victims, a.preemption.lower_nominated)
        a.victims_gone = deleted < len(victims)
        self.preemption_victims.observe(len(victims))
        log.info(
            "preempted %d of %d victims on %s",
            deleted,
            len(victims),
            node,
            extra={"pod": a.pod.key, "cycle": a.qp["cycle"]},
        )

    async def _report(self, reports: list[Report], move: str | None = None) -> None:
        if reports:
            head = {"move": move} if move else None
            await request_all(self.rt.nc, QUEUE_REPORT, reports, "reports", head, timeout=10)


def _bind_request(a: Attempt, now: float) -> BindRequest:
    req: BindRequest = {
        "key": a.pod.key,
        "uid": a.qp["uid"],
        "seq": a.qp["seq"],
        "node": a.node,
        "cycle": a.qp["cycle"],
        "pod": a.qp["pod"],
        "profile": a.framework.profile,
        "assumed_at": now,
    }
    if a.waits:
        req["permit_waits"] = {p: now + t for p, t in a.waits.items()}
    return req


def _report(
    qp: QueuedPod, outcome: Outcome, message: str = "", plugins: list[str] | None = None
) -> Report:
    return report(qp["key"], qp["cycle"], outcome, message, plugins)


def _rejection(a: Attempt, status: Status) -> Exception:
    """A Permit rejection is kube's FitError on the chosen node; an error stays one."""
    if not status.rejected:
        return SchedulingError(status)
    return FitError(a.pod.key, 1, Diagnosis({a.node: status}, {status.plugin}))
