"""One workload, end to end: a fresh stack of processes, driven only through the
public subjects, measured as scheduler_perf measures kube-scheduler.

nodes -> (wait until the cache has them) -> init pods -> (wait until each is bound)
-> measured pods, with the workload's churn running (preemptors or unschedulable
pods created every 200 ms, or a node and a pod recreated every second) -> wait until
every measured pod is bound and the cache's commits agree. Throughput is sampled
every second on the bindings seen on the pod subjects; each pod's latency runs from
just before its publish to the moment its binding is seen. A measured pod that a
preemptor evicts after its binding counts as scheduled, as in scheduler_perf. The
churn's own pods are reported beside (created, bound, bound per second): for
PreemptionAsync, the preemptors' rate. Optionally a second, paced phase publishes
more pods at a fixed rate, for latency under a load the stack can carry.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nats
import redis.asyncio as aioredis
from nats.js import JetStreamContext

from shared import keys
from shared.api.models import key_of
from shared.runtime.connections import connect_redis
from shared.tools.bench import traffic
from shared.tools.bench.latency import percentiles, pod_stages, stage_table
from shared.tools.bench.perf import SAMPLE_INTERVAL, ThroughputCollector
from shared.tools.bench.profile import Profiler
from shared.tools.bench.resources import cpu_delta, peak_rss, usages
from shared.tools.bench.victims import preempted_again, read_preemptions, victims_of_bound
from shared.tools.bench.workloads import Churn, Obj, Size, Workload
from shared.tools.client import PodTracker, publish_all, publish_node, publish_pod
from shared.tools.devstack import LocalStack
from shared.tools.invariants import audit
from shared.tools.observe import pipeline_counters, settle

PUBLISH_WINDOW = 256  # publishes in flight while driving the measured pods


@dataclass
class BenchResult:
    workload: str
    variant: str  # "short" (500 nodes) or "full" (5000 nodes)
    nodes: int
    init_pods: int
    measured_pods: int
    workers: int
    binders: int
    threshold: float  # kube-scheduler's pods/s for the workload (5000 nodes)
    seconds: float  # first measured publish to the last measured binding
    bound: int
    unschedulable: int
    throughput: dict[str, float]  # SchedulingThroughput: Average, Perc50/90/95/99
    latency_ms: dict[str, float]  # publish -> bound, for the measured pods
    conflicts: int
    assumes_tried: int
    scheduler_errors: int
    cpu_seconds: dict[str, float]  # per role, during the measured phase
    peak_rss_mb: dict[str, float]  # per role, the largest process's high-water mark
    overcommitted_nodes: int
    violated_constraints: int
    double_bindings: int
    timeline: list[tuple[float, int]] = field(default_factory=list)  # (s, bound so far)
    paced: dict[str, float] = field(default_factory=dict)  # the paced latency phase
    # its stages (latency.py): stage -> p50/p90/p99/max ms and how many pods had it
    paced_stages: dict[str, dict[str, float]] = field(default_factory=dict)
    preempted: int = 0  # measured pods bound, then evicted by a preemptor
    # the churn's pods over the measured phase: created, bound, bound_per_s
    churn: dict[str, float] = field(default_factory=dict)
    # Pods deleted as preemption victims, for the workloads whose pods preempt (None for
    # the others): all of them, and those whose Preempted Event names a preemptor bound
    # by the run's end (victims.py), and the preemptors bound. Per bound preemptor, more
    # than the minimum means a worker gave a nominated pod's room away and the preemptor
    # preempted again.
    victims: int | None = None
    victims_of_bound: int = 0
    preemptors_bound: int = 0
    # Bound preemptors whose victims were on more than one node (victims.py): with one
    # worker none; the average above hides them when others bound without preempting.
    preempted_again: int = 0
    # Redis commands and stream writes per bound measured pod (traffic.py)
    ops_per_pod: dict[str, float] = field(default_factory=dict)
    shards: int = 1  # watcher and queue shards (KSCHED_SHARDS)

    @property
    def average(self) -> float:
        return self.throughput.get("Average", 0.0)

    @property
    def run_rate(self) -> float:
        """Bound measured pods over the whole run (first publish to last binding)."""
        return self.bound / self.seconds if self.seconds > 0 else 0.0

    @property
    def ratio(self) -> float | None:
        """Average / scheduler_perf's threshold; None where upstream sets none, or where
        the run was too short for a throughput sample (no Average)."""
        if not self.threshold or "Average" not in self.throughput:
            return None
        return self.average / self.threshold

    @property
    def victims_per_bound(self) -> float | None:
        """Victims of the bound preemptors per bound preemptor (issue 22 item 5: with N
        workers as with one); victims of preemptors still unbound at the end are not
        theirs."""
        if self.victims is None:
            return None
        return self.victims_of_bound / self.preemptors_bound if self.preemptors_bound else 0.0

    @property
    def conflict_rate(self) -> float:
        return self.conflicts / self.assumes_tried if self.assumes_tried else 0.0

    @property
    def cpu_per_1000_pods(self) -> dict[str, float]:
        pods = max(self.bound, 1)
        return {role: s * 1000 / pods for role, s in self.cpu_seconds.items()}

    def as_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "ratio": self.ratio,
            "run_rate": self.run_rate,
            "conflict_rate": self.conflict_rate,
            "victims_per_bound": self.victims_per_bound,
            "cpu_s_per_1000_pods": self.cpu_per_1000_pods,
        }


def stack_pids(stack: LocalStack) -> dict[str, list[int]]:
    pids: dict[str, list[int]] = {"driver": [os.getpid()]}
    for svc in stack.services:
        pids.setdefault(svc.name, []).append(svc.proc.pid)
        if svc.shard is not None:  # each watcher shard's own too, beside the role's sum
            pids.setdefault(f"{svc.name}.{svc.shard}", []).append(svc.proc.pid)
    if stack.nats_processes():
        pids["nats-server"] = [s.proc.pid for s in stack.nats_processes()]
    if stack.redis is not None:
        pids["redis-server"] = [stack.redis.proc.pid]
    return pids


class Driver:
    """Publishes a workload's objects and follows the pods' bindings."""

    def __init__(self, stack: LocalStack, workload: Workload, size: Size, timeout: float):
        self.stack = stack
        self.workload = workload
        self.size = size
        self.timeout = timeout
        self.tracker = PodTracker()
        self.sent: dict[str, float] = {}  # pod key -> perf_counter() before its publish
        self.sent_wall: dict[str, float] = {}  # the same moment, wall clock (paced pods)
        self.nodes: list[Obj] = []
        self.pods: dict[str, Obj] = {}
        # the pods the churn created, in order: (key, perf_counter() before the publish)
        self.churn_pods: list[tuple[str, float]] = []

    def ports(self, service: str) -> list[int]:
        return [s.http_port for s in self.stack.services if s.name == service]

    async def publish_pods(self, js: JetStreamContext, pods: list[Obj]) -> None:
        for start in range(0, len(pods), PUBLISH_WINDOW):
            chunk = pods[start : start + PUBLISH_WINDOW]
            now = time.perf_counter()
            for pod in chunk:
                self.sent[key_of(pod)] = now
            await asyncio.gather(*(publish_pod(js, p) for p in chunk))

    async def publish_paced(self, js: JetStreamContext, pods: list[Obj], rate: float) -> None:
        """One pod every 1/rate seconds, on schedule (late publishes catch up)."""
        start = time.perf_counter()
        for i, pod in enumerate(pods):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            key = key_of(pod)
            self.sent[key], self.sent_wall[key] = time.perf_counter(), time.time()
            await publish_pod(js, pod)

    async def sample(
        self,
        collector: ThroughputCollector,
        keys_: list[str],
        start: float,
        timeline: list[tuple[float, int]],
    ) -> None:
        while True:
            await asyncio.sleep(SAMPLE_INTERVAL)
            now = time.perf_counter()
            pods = self.tracker.pods
            bound = sum(1 for k in keys_ if k in pods and pods[k].bound_at)
            collector.sample(now, bound)
            timeline.append((round(now - start, 3), bound))

    async def churn(self, js: JetStreamContext, churn: Churn) -> None:
        """scheduler_perf's churn op: "create" keeps every round's objects, "recreate"
        deletes the previous round's first. Its pods and nodes are audited like the rest."""
        previous: list[Obj] = []
        for round_ in itertools.count():
            for obj in previous:
                await _publish(js, obj, "DELETED")
            created = churn.objects(round_)
            for obj in created:
                if obj["kind"] == "Node":
                    self.nodes.append(obj)
                else:
                    self.pods[key_of(obj)] = obj
                    self.churn_pods.append((key_of(obj), time.perf_counter()))
                await _publish(js, obj, "ADDED")
            previous = created if churn.mode == "recreate" else []
            await asyncio.sleep(churn.interval)

    def churn_figures(self, start: float, seconds: float) -> dict[str, float]:
        """The churn's pods created and bound by the last measured binding, and their rate."""
        end = start + seconds
        created = [k for k, sent in self.churn_pods if sent <= end]
        bound = len(self.churn_bound(start, seconds))
        rate = bound / seconds if seconds > 0 else 0.0
        return {"created": float(len(created)), "bound": float(bound), "bound_per_s": rate}

    def churn_bound(self, start: float, seconds: float) -> list[str]:
        """The churn's pods created and bound by the last measured binding."""
        end, pods = start + seconds, self.tracker.pods
        return [
            k
            for k, sent in self.churn_pods
            if sent <= end and k in pods and 0 < pods[k].bound_at <= end
        ]

    def stages(self, keys_: list[str]) -> dict[str, dict[str, float]]:
        """The stage table of pods published on schedule: from the wall clock before the
        publish to the binding's storage in the stream, through the binding's stamps."""
        pods = []
        for k in keys_:
            view = self.tracker.pods.get(k)
            if view is not None and view.bound_stored and k in self.sent_wall:
                pods.append(pod_stages(self.sent_wall[k], view.stages, view.bound_stored))
        return stage_table(pods)

    def latencies_ms(self, keys_: list[str]) -> list[float]:
        out = []
        for k in keys_:
            view = self.tracker.pods.get(k)
            if view is not None and view.bound_at and k in self.sent:
                out.append((view.bound_at - self.sent[k]) * 1000)
        return out


async def _publish(js: JetStreamContext, obj: Obj, etype: str) -> None:
    if obj["kind"] == "Node":
        await publish_node(js, obj, etype)
    else:
        await publish_pod(js, obj, etype)


async def _wait_for_nodes(redis: aioredis.Redis, count: int, timeout: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while await redis.hlen(keys.CACHE_NODEINFO) < count:
        if loop.time() > deadline:
            raise TimeoutError(f"the cache did not get {count} nodes in {timeout:.0f} s")
        await asyncio.sleep(0.05)


async def _wait_bound(tracker: PodTracker, pod_keys: list[str], timeout: float) -> None:
    """Until every pod was bound once (a preemptor is reported unschedulable first; a
    pod may be evicted after its binding); on timeout the run goes on and reports the
    pods left unbound."""
    pending = set(pod_keys)

    def all_bound(t: PodTracker) -> bool:
        pending.difference_update([k for k in pending if k in t.pods and t.pods[k].bound_at])
        return not pending

    await tracker.wait_until(all_bound, timeout)


async def _settle_alive(
    tracker: PodTracker, redis: aioredis.Redis, pod_keys: list[str], timeout: float
) -> None:
    """settle() over the pods not deleted; a pod a preemptor evicts meanwhile leaves the
    set, so settle again over the rest until the deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        alive = [k for k in pod_keys if not (k in tracker.pods and tracker.pods[k].deleted)]
        try:
            await settle(tracker, redis, alive, min(max(deadline - loop.time(), 0), 10.0))
            return
        except TimeoutError:
            if loop.time() >= deadline:
                raise


@contextlib.asynccontextmanager
async def _background(*coros: Any):  # type: ignore[no-untyped-def]
    tasks = [asyncio.create_task(c) for c in coros]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def run_workload(
    stack: LocalStack,
    workload: Workload,
    variant: str,
    size: Size,
    *,
    timeout: float,
    paced_pods: int = 0,
    paced_rate: float | None = None,
    progress: Callable[[str], None] = print,
    profile: Path | None = None,
) -> BenchResult:
    driver = Driver(stack, workload, size, timeout)
    nc = await nats.connect(servers=stack.nats_urls)
    redis = connect_redis(stack.redis_url)
    try:
        js = nc.jetstream()
        await driver.tracker.start(nc)
        driver.nodes = workload.node_objects(size)
        await publish_all(js, driver.nodes)
        await _wait_for_nodes(redis, size.nodes, timeout)
        init = workload.init_objects(size)
        driver.pods.update((key_of(p), p) for p in init)
        await publish_all(js, init)
        await settle(driver.tracker, redis, [key_of(p) for p in init], timeout)
        progress(f"    {len(init)} init pods placed; publishing {size.measured_pods} measured pods")
        return await _measure(driver, js, redis, variant, paced_pods, paced_rate, progress, profile)
    finally:
        await redis.aclose()
        await nc.close()


async def _measure(
    driver: Driver,
    js: JetStreamContext,
    redis: aioredis.Redis,
    variant: str,
    paced_pods: int,
    paced_rate: float | None,
    progress: Callable[[str], None],
    profile: Path | None = None,
) -> BenchResult:
    workload, size, stack = driver.workload, driver.size, driver.stack
    side = [driver.churn(js, workload.churn)] if workload.churn else []
    measured = workload.measured_objects(size)
    keys_ = [key_of(p) for p in measured]
    driver.pods.update(zip(keys_, measured, strict=True))
    pids = stack_pids(stack)
    counters0 = await pipeline_counters(driver.ports("worker"), driver.ports("cache"))
    profiler = Profiler(profile, pids) if profile else None
    usage0 = usages(pids)
    ops0 = await traffic.snapshot(redis, js)
    if profiler:
        profiler.start()
    collector = ThroughputCollector()
    timeline: list[tuple[float, int]] = []
    async with _background(*side):
        start = time.perf_counter()
        async with _background(driver.sample(collector, keys_, start, timeline)):
            await driver.publish_pods(js, measured)
            if workload.measured_bind_late or workload.churn:
                await _wait_bound(driver.tracker, keys_, driver.timeout)
            await _settle_alive(driver.tracker, redis, keys_, driver.timeout)
        seconds = max(driver.tracker.pods[k].bound_at for k in keys_) - start
        churn = driver.churn_figures(start, seconds) if workload.churn else {}
        preemptors = _preemptors(driver, keys_, start, seconds)
        usage1 = usages(pids)
        ops1 = await traffic.snapshot(redis, js)
        for line in await asyncio.to_thread(profiler.stop) if profiler else []:
            progress(f"    {line}")
        counted = (await pipeline_counters(driver.ports("worker"), driver.ports("cache"))).minus(
            counters0
        )
        paced: dict[str, float] = {}
        paced_stages: dict[str, dict[str, float]] = {}
        if paced_pods:
            # runs under 2 s have no samples: then the plain rate over the run
            rate = collector.summary().get("Average") or len(keys_) / max(seconds, 1e-3)
            paced, paced_stages = await _paced_phase(
                driver, js, redis, paced_rate or rate / 2, paced_pods
            )
            progress(
                f"    paced {paced['pods']:.0f} pods at {paced['rate']:.0f}/s: latency p50 "
                f"{paced['p50']:.1f} ms p99 {paced['p99']:.1f} ms"
            )
    result = _result(
        driver,
        variant,
        keys_,
        seconds,
        collector,
        timeline,
        counted,
        (usage0, usage1),
        paced,
        churn,
    )
    result.ops_per_pod = traffic.per_pod(ops0, ops1, result.bound)
    result.paced_stages = paced_stages
    if preemptors is not None:
        # read once the run is over: every victim's Event is in the stream by now
        preemptions = await read_preemptions(js)
        uids = {k: str((driver.pods[k].get("metadata") or {}).get("uid", "")) for k in preemptors}
        result.victims = _victims(driver)
        result.preemptors_bound = len(preemptors)
        result.victims_of_bound = victims_of_bound(preemptions, uids, preemptors)
        result.preempted_again = len(preempted_again(preemptions, uids, preemptors))
    return result


async def _paced_phase(
    driver: Driver,
    js: JetStreamContext,
    redis: aioredis.Redis,
    rate: float,
    pods: int,
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """More pods at `rate` (by default half the measured one): latency when not saturated,
    and its stages."""
    extra = driver.workload.measured_objects(Size(0, 0, pods), prefix="paced")
    keys_ = [key_of(p) for p in extra]
    driver.pods.update(zip(keys_, extra, strict=True))
    await driver.publish_paced(js, extra, rate)
    await settle(driver.tracker, redis, keys_, driver.timeout)
    latency = {"pods": float(pods), "rate": rate, **percentiles(driver.latencies_ms(keys_))}
    return latency, driver.stages(keys_)


def _result(
    driver: Driver,
    variant: str,
    keys_: list[str],
    seconds: float,
    collector: ThroughputCollector,
    timeline: list[tuple[float, int]],
    counted: Any,
    usage: tuple[Any, Any],
    paced: dict[str, float],
    churn: dict[str, float],
) -> BenchResult:
    workload, size = driver.workload, driver.size
    usage0, usage1 = usage
    views = [driver.tracker.pods[k] for k in keys_]
    bound_all = {k: node for k, node in driver.tracker.bound().items() if k in driver.pods}
    report = audit(driver.nodes, driver.pods, bound_all)
    return BenchResult(
        workload=workload.name,
        variant=variant,
        nodes=size.nodes,
        init_pods=size.init_pods,
        measured_pods=size.measured_pods,
        workers=len(driver.ports("worker")),
        binders=len(driver.ports("binder")),
        shards=driver.stack.shards,
        threshold=workload.threshold,
        seconds=seconds,
        bound=sum(1 for v in views if v.bound_at),
        unschedulable=sum(1 for v in views if not v.bound_at),
        throughput=collector.summary(),
        latency_ms=percentiles(driver.latencies_ms(keys_)),
        conflicts=counted.conflicts,
        assumes_tried=counted.assumes_tried,
        scheduler_errors=counted.errors,
        cpu_seconds=cpu_delta(usage0, usage1),
        peak_rss_mb={role: b / 2**20 for role, b in peak_rss(usage1).items()},
        overcommitted_nodes=len(report.overcommitted),
        violated_constraints=report.violated_constraints,
        double_bindings=sum(1 for v in driver.tracker.pods.values() if v.bind_count > 1),
        timeline=timeline,
        paced=paced,
        preempted=sum(1 for v in views if v.bound_at and v.deleted),
        churn=churn,
    )


def _preemptors(driver: Driver, keys_: list[str], start: float, seconds: float) -> list[str] | None:
    """The bound preemptors, where the workload's pods preempt: its measured pods
    (PreemptionBasic) or the pods its churn creates (PreemptionAsync); None elsewhere."""
    workload = driver.workload
    if workload.measured_bind_late:
        return [k for k in keys_ if driver.tracker.pods[k].bound_at]
    if workload.churn is not None and workload.churn.mode == "create":
        return driver.churn_bound(start, seconds)
    return None


def _victims(driver: Driver) -> int:
    """The workload's pods that are gone: the driver deletes none of them, so ksched's
    preemption did (the churn's own pods are not the workload's)."""
    pods = driver.tracker.pods
    return sum(1 for k in driver.pods if k in pods and pods[k].deleted)
