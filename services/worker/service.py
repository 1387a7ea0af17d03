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

from prometheus_client import Counter, Histogram

from shared.api.podstatus import (
    EVENT_FAILED_SCHEDULING,
    REASON_SCHEDULER_ERROR,
    make_event,
    scheduler_name,
    unschedulable_pod,
)
from shared.framework.cycle_state import CycleState
from shared.framework.diagnosis import FitError
from shared.framework.runtime import Framework
from shared.framework.schedule_one import Scheduler, SchedulingError
from shared.framework.types import PodInfo
from shared.messages import Assumption, BindRequest, QueuedPod, Report
from shared.runtime.publish import Conflict, publish_event, write_pod
from shared.runtime.retry import retry_forever
from shared.runtime.rpc import request
from shared.runtime.service import Runtime
from shared.snapshot import Snapshot
from shared.subjects import (
    BIND_SUBJECT,
    CACHE_ASSUME,
    CACHE_BINDING,
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
        self.nominated_version = 0
        self.per_pod_seconds = 0.0  # recent wall time per pod, smoothed
        self.stopping = asyncio.Event()
        reg = rt.registry
        self.attempts = Counter(
            "scheduler_schedule_attempts_total",
            "Scheduling attempts by result",
            ["result", "profile"],
            registry=reg,
        )
        self.conflicts = Counter(
            "ksched_assume_conflicts_total", "Assumes refused by the cache", registry=reg
        )
        self.duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency",
            ["result", "profile"],
            registry=reg,
            buckets=[0.001 * 2**i for i in range(15)],
        )

    async def run(self) -> None:
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
            if reply["pods"]:
                await self.schedule_batch(reply["pods"])

    async def _sync_nominated(self, version: int) -> None:
        """Fetch the queue's nominated pods when they changed: Filter counts them on
        their nodes (RunFilterPluginsWithNominatedPods)."""
        if version == self.nominated_version:
            return
        try:
            reply = await request(self.rt.nc, QUEUE_NOMINATED, {})
        except Exception as err:
            log.warning("fetching nominated pods failed: %s", err)
            return  # kept stale; the next pop retries
        nominated: dict[str, list[PodInfo]] = {}
        for p in reply["pods"]:
            try:
                nominated.setdefault(p["node"], []).append(PodInfo.of(p["pod"], p["seq"]))
            except Exception as err:  # validated at the watcher; never expected here
                log.warning("skipping nominated pod %s: %s", p.get("key"), err)
        for scheduler in self.schedulers.values():
            scheduler.fw.handle.nominated = nominated
        self.nominated_version = reply["version"]

    async def schedule_batch(self, queued: list[QueuedPod]) -> None:
        start = time.perf_counter()
        await self.snapshot.refresh()
        reports: list[Report] = []
        attempts = []
        for qp in queued:
            attempt = self._attempt(qp, reports)
            if attempt is not None:
                attempts.append(attempt)
        committed, failed = await self._schedule_and_commit(attempts)
        bound = await self._hand_to_binders(committed)
        failures = await asyncio.gather(*(self._record_failure(a, err) for a, err in failed))
        reports.extend(bound)
        reports.extend(failures)
        await retry_forever("report to queue", lambda: self._report(reports), max_delay=1.0)
        per_pod = (time.perf_counter() - start) / max(len(queued), 1)
        self.per_pod_seconds = (
            per_pod if not self.per_pod_seconds else 0.7 * self.per_pod_seconds + 0.3 * per_pod
        )
        for rep in reports:
            self.duration.labels(rep["outcome"], "").observe(per_pod)

    def _attempt(self, qp: QueuedPod, reports: list[Report]) -> Attempt | None:
        scheduler = self.schedulers.get(scheduler_name(qp["pod"]))
        try:
            pod = PodInfo.of(qp["pod"], qp["seq"])
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
            self.conflicts.inc(len(refused))
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
        failed.extend(rejected)
        return committed, failed

    def _place(self, a: Attempt) -> Exception | None:
        """The scheduling cycle up to Reserve, against the local snapshot."""
        a.state = CycleState()
        try:
            result = a.scheduler.schedule_pod(a.state, a.pod, self.snapshot.cluster())
        except (FitError, SchedulingError) as err:
            return err
        a.node = result.suggested_host
        status = a.framework.run_reserve_plugins_reserve(a.state, a.pod, a.node)
        if not status.ok:
            a.framework.run_reserve_plugins_unreserve(a.state, a.pod, a.node)
            return SchedulingError(status)
        self.snapshot.assume(a.pod, a.node)  # later pods in the batch see it
        return None

    def _permit(
        self, committed: list[Attempt]
    ) -> tuple[list[Attempt], list[tuple[Attempt, Exception]]]:
        """Permit after assume; waiting (gangs) needs the binder side and is refused for now."""
        allowed: list[Attempt] = []
        rejected: list[tuple[Attempt, Exception]] = []
        for a in committed:
            status, _ = a.framework.run_permit_plugins(a.state, a.pod, a.node)
            if status.ok:
                allowed.append(a)
                continue
            a.framework.run_reserve_plugins_unreserve(a.state, a.pod, a.node)
            rejected.append((a, SchedulingError(status)))
        return allowed, rejected

    async def _assume(self, placed: list[Attempt], committed: list[Attempt]) -> list[Attempt]:
        batch: list[Assumption] = [
            {
                "key": a.pod.key,
                "uid": a.qp["uid"],
                "seq": a.qp["seq"],
                "node": a.node,
                "pod": a.qp["pod"],
                "profile": a.framework.profile,
            }
            for a in placed
        ]
        try:
            reply = await request(self.rt.nc, CACHE_ASSUME, {"assume": batch}, timeout=10)
            results = reply["results"]
        except Exception as err:
            log.warning("assume failed: %s", err)
            results = [{"ok": False}] * len(placed)
        refused = []
        for a, result in zip(placed, results, strict=True):
            if result["ok"]:
                committed.append(a)
            else:
                self.snapshot.forget(a.pod, a.node)
                a.framework.run_reserve_plugins_unreserve(a.state, a.pod, a.node)
                refused.append(a)
        return refused

    async def _hand_to_binders(self, committed: list[Attempt]) -> list[Report]:
        async def hand(a: Attempt) -> Report:
            req: BindRequest = {
                "key": a.pod.key,
                "uid": a.qp["uid"],
                "seq": a.qp["seq"],
                "node": a.node,
                "cycle": a.qp["cycle"],
                "pod": a.qp["pod"],
                "profile": a.framework.profile,
                "assumed_at": time.time(),
            }
            # The message id makes a retried publish of the same attempt a no-op.
            msg_id = f"{a.pod.key}@{a.qp['cycle']}"
            await retry_forever(
                "hand to binders",
                lambda: self.rt.js.publish(
                    BIND_SUBJECT, pack(req), headers={"Nats-Msg-Id": msg_id}
                ),
                max_delay=1.0,
            )
            self.attempts.labels("scheduled", a.framework.profile).inc()
            return _report(a.qp, "assumed")

        return list(await asyncio.gather(*(hand(a) for a in committed)))

    async def _record_failure(self, a: Attempt, err: Exception) -> Report:
        """PodScheduled=False with the reason, a FailedScheduling event, then the report."""
        if isinstance(err, FitError):
            outcome, message = "unschedulable", err.message()
            reason, plugins = "Unschedulable", sorted(err.diagnosis.unschedulable_plugins)
        else:
            outcome, message, reason, plugins = "error", str(err), REASON_SCHEDULER_ERROR, []
        self.attempts.labels(outcome, a.framework.profile).inc()
        report = _report(a.qp, outcome, message, plugins)
        updated = unschedulable_pod(a.qp["pod"], message, reason)
        if updated is not None:
            try:
                report["seq"] = await write_pod(self.rt.js, updated, a.qp["seq"])
            except Conflict:
                pass  # the pod changed meanwhile; its update re-evaluates it
            except Exception as err2:
                log.warning("status of %s not written: %s", a.pod.key, err2)
        event = make_event(
            a.qp["pod"], EVENT_FAILED_SCHEDULING, message, warning=True, action="Scheduling"
        )
        await publish_event(self.rt.js, event)
        log.info("pod unschedulable: %s", message, extra={"pod": a.pod.key, "cycle": a.qp["cycle"]})
        return report

    async def _report(self, reports: list[Report]) -> None:
        if reports:
            await request(self.rt.nc, QUEUE_REPORT, {"reports": reports}, timeout=10)


def _report(
    qp: QueuedPod, outcome: str, message: str = "", plugins: list[str] | None = None
) -> Report:
    return {
        "key": qp["key"],
        "cycle": qp["cycle"],
        "outcome": outcome,  # type: ignore[typeddict-item]
        "message": message,
        "plugins": plugins or [],
    }
