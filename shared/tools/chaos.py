"""`make chaos`: DESIGN.md's four invariants under faults, with an invariant report.

A local stack with two replicas each of watcher, queue and cache (one leads), workers
and binders, Redis with its append-only file and NATS with its JetStream file store.
Pods arrive over the first part of the run while a monkey kills a random service
replica (kill -9) every 2-6 s and restarts it (a supervisor also restarts replicas that
exit, as a deposed leader does); Redis is restarted once and NATS once. Then the
monkey stops and the run checks: every pod bound or pending with a current
FailedScheduling reason, none lost, none bound twice, no invalid placement (the final
state audited against every constraint), and new pods still get scheduled. With
`--shards N` the watcher and the queue run N shards (docs/scale.md §4), each with its
leader and standby; a killed replica comes back in its own shard, and the run also
checks that every shard ends with a leader and that pods went through each queue shard.

    python -m shared.tools.chaos    # 10 000 pods, 500 nodes, 3 workers, 2 binders
    python -m shared.tools.chaos --pods 1000 --nodes 100 --duration 35   # the test's variant
    python -m shared.tools.chaos --pods 1000 --nodes 100 --duration 35 --shards 2  # and sharded
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
from nats.js import JetStreamContext
from nats.js.errors import APIError

from shared.api.models import key_of
from shared.runtime.connections import connect_redis
from shared.runtime.timeouts import within
from shared.sharding import pod_gang, queue_owner
from shared.subjects import EXPECTED_LAST_SUBJECT_SEQ, pod_subject
from shared.tools.client import PodTracker, publish_all
from shared.tools.devstack import LEADER_ELECTED, LocalStack, running
from shared.tools.invariants import AuditReport, audit
from shared.tools.observe import decided, incoming_by_shard, settle
from shared.tools.servers import restart
from shared.tools.synthetic import ZONE, add_anti_affinity, add_spread, make_node, make_pod
from shared.wire import dump_json

# Short leases so that a killed leader's work moves on within seconds (kube: 15 s).
CHAOS_ENV = {
    "KSCHED_LOG_LEVEL": "warning",
    "KSCHED_QUEUE_LEASE_SECONDS": "10",
    "KSCHED_LEADER_ELECT_LEASE_DURATION": "3",
    "KSCHED_LEADER_ELECT_RENEW_DEADLINE": "2",
    "KSCHED_LEADER_ELECT_RETRY_PERIOD": "0.5",
}
WRONG_LAST_SEQUENCE = 10071  # JetStream: the subject already has a message


@dataclass(frozen=True)
class ChaosConfig:
    pods: int = 10_000
    nodes: int = 500
    workers: int = 3
    binders: int = 2
    duration: float = 120.0  # seconds of faults; pods arrive over the first 60 %
    kill_every: tuple[float, float] = (2.0, 6.0)
    settle_timeout: float = 600.0
    seed: int = 9
    shards: int = 1  # watcher and queue shards (docs/scale.md §4), two replicas of each


@dataclass(frozen=True)
class ShardsSeen:
    """A sharded run's shards once it was over: whether each queue and watcher shard
    has a leader, the workload's pods bound per queue shard (the shard that holds each),
    and the pods each queue leader took in. Pods all through one shard, or a shard left
    without a leader, would make the sharded run prove nothing about shards."""

    queue_leaders: list[bool]
    watcher_leaders: list[bool]
    bound: list[int]
    taken_in: list[int]

    @property
    def ok(self) -> bool:
        return all(self.queue_leaders + self.watcher_leaders) and all(self.bound + self.taken_in)

    def line(self) -> str:
        def led(leaders: list[bool]) -> str:
            return f"{sum(leaders)}/{len(leaders)}"

        return (
            f"  shards           leaders: queue {led(self.queue_leaders)}, watcher "
            f"{led(self.watcher_leaders)}; bound per queue shard {self.bound}; taken in by "
            f"each queue leader {self.taken_in}"
        )


@dataclass
class ChaosReport:
    config: ChaosConfig
    kills: Counter[str] = field(default_factory=Counter)
    leader_kills: int = 0
    restarts: int = 0  # replicas restarted: the killed ones, and deposed leaders that exited
    server_restarts: list[str] = field(default_factory=list)
    settle_seconds: float = 0.0
    bound: int = 0
    pending: int = 0
    lost: list[str] = field(default_factory=list)
    double_bound: list[str] = field(default_factory=list)
    audit: AuditReport = field(default_factory=AuditReport)
    after_chaos: tuple[int, int] = (0, 0)  # new pods bound / published once it was over
    shards: ShardsSeen | None = None  # with shards: how they ended, and what they took

    @property
    def ok(self) -> bool:
        new_bound, new_total = self.after_chaos
        return (
            not self.lost
            and not self.double_bound
            and self.audit.ok
            and new_total > 0
            and new_bound == new_total
            and (self.shards is None or self.shards.ok)
        )

    def lines(self) -> list[str]:
        c = self.config
        kills = ", ".join(f"{name} {n}" for name, n in sorted(self.kills.items()))
        new_bound, new_total = self.after_chaos
        return [
            f"chaos: {c.pods} pods on {c.nodes} nodes, {c.workers} workers, {c.binders} binders, "
            f"2 replicas of watcher/queue/cache{_per_shard(c.shards)}",
            f"  kill -9          {sum(self.kills.values())} ({kills}); {self.leader_kills} "
            f"of them leaders",
            f"  restarted        {self.restarts} replicas ("
            f"{self.restarts - sum(self.kills.values())} had exited by themselves)",
            f"  restarts         {', '.join(self.server_restarts) or 'none'}",
            f"  settled          {self.settle_seconds:.1f} s after the faults stopped",
            f"  bound            {self.bound}",
            f"  pending          {self.pending} (PodScheduled=False, reason Unschedulable)",
            f"  lost             {len(self.lost)} {self.lost[:5] or ''}",
            f"  double-bound     {len(self.double_bound)} {self.double_bound[:5] or ''}",
            f"  invalid placements: overcommitted nodes {len(self.audit.overcommitted)}, "
            f"violated constraints {self.audit.violated_constraints}",
            *(f"    {line}" for line in self.audit.lines()[:10]),
            f"  after the chaos  {new_bound}/{new_total} new pods bound",
            *([self.shards.line()] if self.shards is not None else []),
            f"  result           {'PASS' if self.ok else 'FAIL'}",
        ]


def _per_shard(shards: int) -> str:
    return f" (of watcher and queue: per shard, {shards} shards)" if shards > 1 else ""


def workload(cfg: ChaosConfig) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Nodes in three zones; pods mostly plain, some with anti-affinity, spread, host ports."""
    rng = random.Random(cfg.seed)
    zones = ("zone-a", "zone-b", "zone-c")
    nodes = [
        make_node(f"node-{i:04d}", cpu="32", memory="128Gi", zone=zones[i % 3])
        for i in range(cfg.nodes)
    ]
    pods = []
    for i in range(cfg.pods):
        draw = rng.random()
        cpu = rng.choice(["100m", "250m", "500m", "1", "2"])
        pod = make_pod(f"chaos-{i:05d}", cpu=cpu, memory="256Mi", labels={"app": "chaos"})
        if draw < 0.05:  # groups of 4 that may share no node
            group = f"anti-{i // 4}"
            pod["metadata"]["labels"]["anti"] = group
            add_anti_affinity(pod, "anti", group)
        elif draw < 0.10:  # groups of 6 spread over the zones
            group = f"spread-{i // 6}"
            pod["metadata"]["labels"]["spread"] = group
            add_spread(pod, 1, ZONE, "spread", group)
        elif draw < 0.12:
            pod["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
        elif draw < 0.125:
            pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "64"  # fits nowhere
        pods.append(pod)
    return nodes, pods


async def publish_new(js: JetStreamContext, pod: dict[str, Any]) -> None:
    """Publish a pod once, retrying through a NATS restart: the subject must be empty,
    so that a retry of a publish that did land never overwrites a binding."""
    subject = pod_subject(pod["metadata"]["namespace"], pod["metadata"]["name"])
    data = dump_json({"type": "ADDED", "object": pod})
    while True:
        try:
            await js.publish(subject, data, headers={EXPECTED_LAST_SUBJECT_SEQ: "0"})
            return
        except APIError as err:
            if err.err_code == WRONG_LAST_SEQUENCE:
                return
            await asyncio.sleep(0.5)
        except Exception:  # disconnected or timed out: NATS is restarting
            await asyncio.sleep(0.5)


class Monkey:
    """Kills a random replica every few seconds (of each kind of service in turn); the
    supervisor restarts whatever is gone, as compose's restart policy does."""

    def __init__(self, stack: LocalStack, report: ChaosReport, rng: random.Random) -> None:
        self.stack = stack
        self.report = report
        self.rng = rng
        self._kinds: list[str] = []

    async def run(self, stop: asyncio.Event) -> None:
        low, high = self.report.config.kill_every
        while not stop.is_set():
            try:
                await within(stop.wait(), self.rng.uniform(low, high))
            except TimeoutError:
                await self.kill_one()

    def _next_kind(self) -> str:
        """Every kind of service in turn, in a shuffled order each round."""
        if not self._kinds:
            self._kinds = sorted({s.name for s in self.stack.services})
            self.rng.shuffle(self._kinds)
        return self._kinds.pop()

    async def kill_one(self) -> None:
        kind = self._next_kind()
        live = [s for s in self.stack.services if s.name == kind and s.proc.poll() is None]
        if not live:
            return
        victim = self.rng.choice(live)
        # with shards, one leader per shard: ask this replica's shard
        if victim.name in LEADER_ELECTED and self.stack.leader(victim.name, victim.shard) is victim:
            self.report.leader_kills += 1
        victim.proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(victim.proc.wait)
        self.report.kills[victim.name] += 1  # the supervisor restarts it

    async def supervise(self) -> None:
        """Restart every replica that is gone (killed, or exited as a deposed leader)."""
        while True:
            for svc in [s for s in self.stack.services if s.proc.poll() is not None]:
                self.report.restarts += 1
                self.stack.services.remove(svc)
                self.stack.start_service(svc.name, svc.shard)
            await asyncio.sleep(0.2)


async def _faults(stack: LocalStack, cfg: ChaosConfig, report: ChaosReport) -> None:
    """The monkey for the whole run; Redis restarted at 30 %, NATS at 60 %."""
    stop = asyncio.Event()
    monkey = asyncio.create_task(Monkey(stack, report, random.Random(cfg.seed)).run(stop))
    started = time.monotonic()
    await asyncio.sleep(cfg.duration * 0.3)
    assert stack.redis is not None and stack.nats is not None
    stack.redis = await asyncio.to_thread(restart, stack.redis)
    report.server_restarts.append(f"redis at {time.monotonic() - started:.0f} s")
    await asyncio.sleep(cfg.duration * 0.3)
    stack.nats = await asyncio.to_thread(restart, stack.nats)
    report.server_restarts.append(f"nats at {time.monotonic() - started:.0f} s")
    await asyncio.sleep(max(cfg.duration - (time.monotonic() - started), 0))
    stop.set()
    await monkey


async def _publish_over(js: JetStreamContext, pods: list[dict[str, Any]], seconds: float) -> None:
    chunk = max(len(pods) // 50, 1)
    for start in range(0, len(pods), chunk):
        await asyncio.gather(*(publish_new(js, p) for p in pods[start : start + chunk]))
        await asyncio.sleep(seconds / 50)


async def run_chaos(stack: LocalStack, cfg: ChaosConfig) -> ChaosReport:
    report = ChaosReport(cfg)
    nodes, pods = workload(cfg)
    raw = {key_of(p): p for p in pods}
    nc = await nats.connect(
        stack.nats_url, max_reconnect_attempts=-1, reconnect_time_wait=0.5, error_cb=_quiet
    )
    assert stack.redis is not None
    redis = connect_redis(stack.redis_url)
    try:
        tracker = PodTracker()
        await tracker.start(nc)
        js = nc.jetstream(timeout=5)
        await publish_all(js, nodes)
        # What compose's restart policy does: a replica that exits comes back, all along.
        supervisor = asyncio.create_task(Monkey(stack, report, random.Random()).supervise())
        await asyncio.gather(
            _faults(stack, cfg, report), _publish_over(js, pods, cfg.duration * 0.6)
        )
        started = time.monotonic()
        try:
            await settle(tracker, redis, list(raw), cfg.settle_timeout)
        except TimeoutError as err:
            print(f"chaos: {err}", file=sys.stderr)
        report.settle_seconds = time.monotonic() - started
        _judge(report, tracker, nodes, raw)
        report.after_chaos = await _still_schedules(js, tracker)
        if cfg.shards > 1:
            report.shards = await _shards_seen(stack, raw, tracker)
        supervisor.cancel()
    finally:
        await redis.aclose()
        await nc.close()
    return report


async def _quiet(err: Exception) -> None:
    """The driver's connection errors while NATS restarts are expected; nats.py reconnects."""


def _judge(
    report: ChaosReport,
    tracker: PodTracker,
    nodes: list[dict[str, Any]],
    raw: dict[str, dict[str, Any]],
) -> None:
    views = {k: tracker.pods.get(k) for k in raw}
    bound = {k: v.node for k, v in views.items() if v is not None and v.node}
    report.bound = len(bound)
    report.pending = sum(1 for k in raw if k not in bound and decided(tracker, k))
    report.lost = sorted(k for k in raw if not decided(tracker, k))
    report.double_bound = sorted(k for k, v in views.items() if v is not None and v.bind_count > 1)
    report.audit = audit(nodes, raw, bound)


async def _still_schedules(js: JetStreamContext, tracker: PodTracker) -> tuple[int, int]:
    fresh = [make_pod(f"after-chaos-{i}", cpu="10m", memory="16Mi") for i in range(20)]
    await publish_all(js, [make_node("after-chaos", cpu="8", memory="32Gi"), *fresh])
    keys = [key_of(p) for p in fresh]
    await tracker.wait_until(lambda t: all(k in t.bound() for k in keys), timeout=60)
    return sum(1 for k in keys if k in tracker.bound()), len(keys)


async def _shards_seen(
    stack: LocalStack, raw: dict[str, dict[str, Any]], tracker: PodTracker
) -> ShardsSeen:
    queue = await asyncio.to_thread(stack.wait_shard_leaders, "queue")
    watcher = await asyncio.to_thread(stack.wait_shard_leaders, "watcher")
    bound = [0] * stack.shards
    for key, pod in raw.items():
        view = tracker.pods.get(key)
        if view is not None and view.node:
            bound[queue_owner(stack.shards, key, pod_gang(pod))] += 1
    # the pods published after the chaos fall in every shard (for 2 and 3 shards): a
    # leader elected late has taken some of them in
    ports = [leader.http_port for leader in queue if leader is not None]
    return ShardsSeen(
        queue_leaders=[leader is not None for leader in queue],
        watcher_leaders=[leader is not None for leader in watcher],
        bound=bound,
        taken_in=await incoming_by_shard(ports),
    )


def chaos_stack(workdir: Path, cfg: ChaosConfig) -> LocalStack:
    return LocalStack(
        workdir,
        workers=cfg.workers,
        binders=cfg.binders,
        standbys=1,
        persist=True,
        shards=cfg.shards,
        env=dict(CHAOS_ENV),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.tools.chaos", description=__doc__)
    defaults = ChaosConfig()
    for name in ("pods", "nodes", "workers", "binders", "seed", "shards"):
        parser.add_argument(f"--{name}", type=int, default=getattr(defaults, name))
    parser.add_argument("--duration", type=float, default=defaults.duration)
    parser.add_argument("--workdir", type=Path, default=None, help="keep logs here")
    args = parser.parse_args(argv)
    cfg = ChaosConfig(
        pods=args.pods,
        nodes=args.nodes,
        workers=args.workers,
        binders=args.binders,
        duration=args.duration,
        seed=args.seed,
        shards=args.shards,
    )
    with tempfile.TemporaryDirectory(prefix="ksched-chaos-") as tmp:
        workdir = args.workdir or Path(tmp)
        with running(chaos_stack(workdir, cfg)) as stack:
            report = asyncio.run(run_chaos(stack, cfg))
    print("\n".join(report.lines()), flush=True)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
