"""`make chaos-hosts`: ksched on three hosts (network namespaces, hosts.py), faults under
load, and a report per fault.

Pods arrive all along at a steady rate, published from the root namespace through the
public subjects (every NATS server in the client's list). Each fault strikes a few
seconds into its phase, under that load:

- kill-host: kill -9 every process of one host (then the host is started again);
- partition: drop every packet of one host for `cut_seconds`, then heal;
- kill-nats-leader: kill -9 the nats-server leading KSCHED_CLUSTER (then restarted);
- kill-redis-primary: kill -9 the Redis primary; the Sentinels promote a replica (the
  services name the Sentinels, redis+sentinel://); the old primary comes back a replica.

After each, the phase's pods are settled and judged: bound, pending (unschedulable),
lost, bound twice, nodes overcommitted or constraints violated (invariants 1-3 over the
whole cluster so far), the seconds from the fault to the first binding of a pod
published after it, and for a partition the bindings the cut-off host's binders wrote
while it was cut off (each binding names its binder: Ksched-Bound-By), which must be none.

    python -m shared.tools.chaoshosts                   # every fault, 30 s partition
    python -m shared.tools.chaoshosts --faults partition,kill-host --cut-seconds 10
    python -m shared.tools.chaoshosts --faults partition --host 1  # the Redis primary's
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import redis.asyncio as aioredis
from nats.aio.client import Client as NATS

from shared.api.models import key_of
from shared.tools.chaos import CHAOS_ENV, ChaosConfig, publish_new, workload
from shared.tools.cli.live import queue_pending
from shared.tools.client import PodTracker, publish_all
from shared.tools.hosts import REDIS_PORT, Hosts
from shared.tools.invariants import audit
from shared.tools.netns import HostNet
from shared.tools.observe import decided, settle

FAULTS = ("kill-host", "partition", "kill-nats-leader", "kill-redis-primary")


@dataclass(frozen=True)
class HostsChaosConfig:
    faults: tuple[str, ...] = FAULTS
    nodes: int = 150
    rate: float = 20.0  # pods published per second, all along
    before: float = 5.0  # seconds of load before each fault
    after: float = 15.0  # seconds of load after pods bind again (or the partition heals)
    cut_seconds: float = 30.0
    rebind_timeout: float = 120.0
    whole_timeout: float = 180.0  # for the hosts to be whole again before a fault
    settle_timeout: float = 180.0
    sentinel: bool = True  # services name the Sentinels (redis+sentinel://), not h1's Redis
    host: int | None = None  # the host kill-host and partition strike; None: target_host
    seed: int = 7
    shards: int = 1  # watcher and queue shards (Hosts.placed)


@dataclass
class FaultRow:
    fault: str
    target: str = ""
    pods: int = 0
    bound: int = 0
    pending: int = 0
    lost: list[str] = field(default_factory=list)
    double_bound: list[str] = field(default_factory=list)
    overcommitted: int = 0
    violated: int = 0
    rebind_seconds: float | None = None  # None: no pod bound again within the timeout
    minority_binds: int | None = None  # partitions: bindings the cut-off side wrote
    outside_binds: int = 0  # partitions: that side's bindings before and after the cut
    blocked: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.blocked) or (
            not self.lost
            and not self.double_bound
            and not self.overcommitted
            and not self.violated
            and self.rebind_seconds is not None
            and not self.minority_binds
        )


@dataclass
class HostsChaosReport:
    config: HostsChaosConfig
    rows: list[FaultRow] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)

    def lines(self) -> list[str]:
        c = self.config
        head = (
            f"{'fault':<20}{'target':<8}{'pods':>6}{'bound':>7}{'pending':>8}{'lost':>6}"
            f"{'double':>8}{'overcommitted':>15}{'violated':>10}{'rebind s':>10}"
            f"{'minority binds':>16}"
        )
        out = [
            f"chaos-hosts: 3 hosts (netns), {c.nodes} nodes, {c.rate:g} pods/s, "
            f"partition {c.cut_seconds:g} s, redis {'via Sentinel' if c.sentinel else 'h1'}"
            + (f", {c.shards} watcher and queue shards" if c.shards > 1 else ""),
            head,
        ]
        for r in self.rows:
            if r.blocked:
                out.append(f"{r.fault:<20}blocked: {r.blocked}")
                continue
            rebind = f"{r.rebind_seconds:.1f}" if r.rebind_seconds is not None else "never"
            minority = "-" if r.minority_binds is None else str(r.minority_binds)
            out.append(
                f"{r.fault:<20}{r.target:<8}{r.pods:>6}{r.bound:>7}{r.pending:>8}"
                f"{len(r.lost):>6}{len(r.double_bound):>8}{r.overcommitted:>15}"
                f"{r.violated:>10}{rebind:>10}{minority:>16}"
            )
        out.append(f"result: {'PASS' if self.ok else 'FAIL'}")
        return out


class Load:
    """Publishes the workload's pods at a steady rate; remembers when each one went out."""

    def __init__(self, js: Any, pods: list[dict[str, Any]], rate: float) -> None:
        self.js = js
        self.pods = iter(pods)
        self.rate = rate
        self.published: dict[str, float] = {}  # key -> wall clock when its publish began
        self.raw: dict[str, dict[str, Any]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            pod = next(self.pods)
            key = key_of(pod)
            self.published[key], self.raw[key] = time.time(), pod
            # Not awaited in turn: a publish stalled by a fault must not slow the load.
            task = asyncio.create_task(publish_new(self.js, pod))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            await asyncio.sleep(1 / self.rate)
        await asyncio.gather(*self._tasks)

    def since(self, t: float) -> list[str]:
        return [k for k, at in self.published.items() if at >= t]


async def first_binding_after(
    tracker: PodTracker, load: Load, t: float, timeout: float
) -> float | None:
    """Seconds from `t` until the stream stored the first binding of a pod published
    at `t` or later (None if none within `timeout`)."""

    def stored() -> list[float]:
        views = (tracker.pods.get(k) for k in load.since(t))
        return [v.bound_stored for v in views if v is not None and v.bound_stored]

    if not await tracker.wait_until(lambda _: bool(stored()), timeout):
        return None
    return max(min(stored()) - t, 0.0)


def pods_needed(cfg: HostsChaosConfig) -> int:
    """Enough for every phase at its longest (a fault that never heals times out)."""
    phase = cfg.before + cfg.rebind_timeout + cfg.cut_seconds + 2 * cfg.after + 60
    return int(cfg.rate * phase * len(cfg.faults)) + 100


class Run:
    """One chaos-hosts run: the hosts, the root namespace's client and the load."""

    def __init__(self, hosts: Hosts, cfg: HostsChaosConfig, nc: NATS) -> None:
        self.hosts = hosts
        self.cfg = cfg
        self.nc = nc
        self.tracker = PodTracker()
        self.nodes, pods = workload(
            ChaosConfig(pods=pods_needed(cfg), nodes=cfg.nodes, seed=cfg.seed)
        )
        self.load = Load(nc.jetstream(timeout=5), pods, cfg.rate)

    async def setup(self) -> None:
        await self.tracker.start(self.nc)
        await publish_all(self.nc.jetstream(timeout=5), self.nodes)

    async def fault(self, name: str) -> FaultRow:
        row = FaultRow(name)
        inject = self._injectors().get(name)
        if name == "kill-redis-primary" and not self.cfg.sentinel:
            row.blocked = "the services name h1's Redis (--no-sentinel)"
            return row
        if inject is None:
            raise ValueError(f"unknown fault {name!r}; one of {', '.join(FAULTS)}")
        await asyncio.to_thread(self.hosts.wait_whole, self.cfg.whole_timeout)
        started = len(self.load.published)
        stop = asyncio.Event()
        loading = asyncio.create_task(self.load.run(stop))
        await asyncio.sleep(self.cfg.before)
        await inject(row)
        await asyncio.sleep(self.cfg.after)
        stop.set()
        await loading
        await self._judge(row, list(self.load.published)[started:])
        return row

    def _injectors(self) -> dict[str, Callable[[FaultRow], Any]]:
        return {
            "kill-host": self._kill_host,
            "partition": self._partition,
            "kill-nats-leader": self._kill_nats_leader,
            "kill-redis-primary": self._kill_redis_primary,
        }

    def target_host(self) -> int:
        """The host given (`--host`), else the one whose loss hurts most: the most
        leaders (services and the cluster stream); never the Redis primary while the
        services name it directly."""
        if self.cfg.host is not None:
            return self.cfg.host
        primary = None if self.cfg.sentinel else self.hosts.redis_primary()
        leads = {h: 0 for h in self.hosts.net.hosts if h != primary}
        for svc in self.hosts.leaders():
            if svc is not None and svc.host in leads:
                leads[svc.host] += 1
        stream = self.hosts.stream_leader()
        if stream in leads:
            leads[stream] += 1
        return max(sorted(leads), key=lambda h: leads[h])

    async def _rebind(self, row: FaultRow, t: float) -> None:
        """How long after the fault at `t` pods bind again (logged with the fault's time,
        to read beside the services' logs)."""
        at = time.strftime("%H:%M:%S", time.gmtime(t))
        print(f"chaos-hosts: {row.fault} {row.target} at {at}.{int(t % 1 * 1000):03d}Z", flush=True)
        row.rebind_seconds = await first_binding_after(
            self.tracker, self.load, t, self.cfg.rebind_timeout
        )

    async def _kill_host(self, row: FaultRow) -> None:
        host = await asyncio.to_thread(self.target_host)
        row.target = f"h{host}"
        t = time.time()
        await asyncio.to_thread(self.hosts.kill_host, host)
        await self._rebind(row, t)
        await asyncio.to_thread(self.hosts.start_host, host)

    async def _partition(self, row: FaultRow) -> None:
        host = await asyncio.to_thread(self.target_host)
        row.target = f"h{host}"
        binders = {s.identity for s in self.hosts.services if s.host == host}
        await asyncio.to_thread(self.hosts.net.cut, host)
        cut = time.time()
        rebind = asyncio.create_task(self._rebind(row, cut))  # may come only after the heal
        await asyncio.sleep(self.cfg.cut_seconds)
        healed = time.time()  # before the heal: a binding stored after it is allowed
        await asyncio.to_thread(self.hosts.net.heal, host)
        await rebind
        await asyncio.sleep(self.cfg.after)  # the healed side binds again: outside_binds
        mine = [v for v in self.tracker.pods.values() if v.bound_by in binders]
        row.minority_binds = sum(1 for v in mine if cut <= v.bound_stored <= healed)
        row.outside_binds = len(mine) - row.minority_binds

    async def _kill_nats_leader(self, row: FaultRow) -> None:
        await self._kill_server(row, "nats", self.hosts.stream_leader)

    async def _kill_redis_primary(self, row: FaultRow) -> None:
        await self._kill_server(row, "redis", self.hosts.redis_primary)

    async def _kill_server(self, row: FaultRow, what: str, find: Callable[[], int | None]) -> None:
        """kill -9 the server `what` on the host `find` names; restarted once pods bind
        again (Redis as a replica of the new primary)."""
        host = await asyncio.to_thread(find)
        assert host is not None, f"no {what} to kill"
        row.target = f"h{host}"
        t = time.time()
        await asyncio.to_thread(self.hosts.kill_server, host, what)
        await self._rebind(row, t)
        await asyncio.to_thread(self.hosts.restart_server, host, what)

    async def _where_undecided(self, keys: list[str]) -> None:
        """Where the queue shards hold the pods not decided (to read beside the logs):
        their queue, attempts and cycle, or that no shard holds them."""
        undecided = [k for k in keys if not decided(self.tracker, k)]
        try:
            pending = await queue_pending(self.nc, {"limit": 100_000})
        except Exception as err:  # a shard without a leader: say so, judge anyway
            print(f"chaos-hosts: pending pods not listed: {err!r}", file=sys.stderr)
            return
        held = {p["key"]: p for p in pending["pods"]}
        for key in undecided[:20]:
            entry = held.get(key)
            where = (
                "held by no queue shard"
                if entry is None
                else (f"{entry['queue']}, attempts {entry['attempts']}, cycle {entry['cycle']}")
            )
            print(f"chaos-hosts:   {key}: {where}", file=sys.stderr)

    async def _judge(self, row: FaultRow, keys: list[str]) -> None:
        """Settle the phase's pods, then invariants 1-3 over every pod so far."""
        primary = await asyncio.to_thread(self.hosts.redis_primary) or 1
        url = f"redis://{self.hosts.net.address(primary)}:{REDIS_PORT}/0"
        redis = aioredis.from_url(url)
        try:
            await settle(self.tracker, redis, keys, self.cfg.settle_timeout)
        except TimeoutError as err:
            print(f"chaos-hosts: {row.fault}: {err}", file=sys.stderr)
            await self._where_undecided(keys)
        finally:
            await redis.aclose()
        views = {k: self.tracker.pods.get(k) for k in keys}
        row.pods = len(keys)
        row.bound = sum(1 for v in views.values() if v is not None and v.node)
        row.pending = sum(1 for k in keys if decided(self.tracker, k)) - row.bound
        row.lost = sorted(k for k in keys if not decided(self.tracker, k))
        row.double_bound = sorted(k for k, v in views.items() if v is not None and v.bind_count > 1)
        every = self.load.raw
        bound = {k: v.node for k, v in self.tracker.pods.items() if k in every and v.node}
        report = audit(self.nodes, every, bound)
        row.overcommitted, row.violated = len(report.overcommitted), report.violated_constraints


async def supervise(hosts: Hosts) -> None:
    """What compose's restart policy does, all along: a service that exits comes back."""
    while True:
        await asyncio.to_thread(hosts.restart_exited)
        await asyncio.sleep(0.5)


async def run_hosts_chaos(hosts: Hosts, cfg: HostsChaosConfig) -> HostsChaosReport:
    report = HostsChaosReport(cfg)
    # A server cut off answers nothing: unanswered pings are how the client notices.
    nc = await nats.connect(
        servers=hosts.nats_urls,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.2,
        ping_interval=1,
        max_outstanding_pings=2,
        error_cb=_quiet,
    )
    supervisor = asyncio.create_task(supervise(hosts))
    try:
        run = Run(hosts, cfg, nc)
        await run.setup()
        for name in cfg.faults:
            report.rows.append(await run.fault(name))
            print(report.lines()[-2], flush=True)
    finally:
        supervisor.cancel()
        await nc.close()
    return report


async def _quiet(err: Exception) -> None:
    """Connection errors while a server is down or cut off are expected: nats.py reconnects."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.tools.chaoshosts", description=__doc__)
    d = HostsChaosConfig()
    parser.add_argument("--faults", default=",".join(d.faults))
    parser.add_argument("--nodes", type=int, default=d.nodes)
    for name in ("rate", "before", "after", "cut_seconds"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=float, default=getattr(d, name))
    parser.add_argument(
        "--no-sentinel", dest="sentinel", action="store_false", help="redis:// of h1's Redis"
    )
    parser.add_argument(
        "--host", type=int, default=None, help="the host kill-host and partition strike (1-3)"
    )
    parser.add_argument(
        "--shards", type=int, default=1, help="watcher and queue shards (docs/scale.md §4)"
    )
    parser.add_argument("--workdir", type=Path, default=None, help="keep logs here")
    parser.add_argument("--log-level", default=CHAOS_ENV["KSCHED_LOG_LEVEL"], help="services'")
    args = parser.parse_args(argv)
    given = ("nodes", "rate", "before", "after", "cut_seconds", "sentinel", "host", "shards")
    faults = tuple(f for f in args.faults.split(",") if f)
    cfg = HostsChaosConfig(faults, **{name: getattr(args, name) for name in given})
    with tempfile.TemporaryDirectory(prefix="ksched-hosts-") as tmp:
        workdir = args.workdir or Path(tmp)
        env = {**CHAOS_ENV, "KSCHED_LOG_LEVEL": args.log_level}
        hosts = Hosts(HostNet.create(3), workdir, env, sentinel_url=cfg.sentinel, shards=cfg.shards)
        try:
            hosts.start()
            report = asyncio.run(run_hosts_chaos(hosts, cfg))
        finally:
            hosts.stop()
    print("\n".join(report.lines()), flush=True)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
