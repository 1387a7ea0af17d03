"""Local servers and service processes without Docker: for `make run`, tests and benches.

The servers themselves are started by servers.py (one nats-server, one redis-server),
natscluster.py (a NATS cluster on loopback) and sentinel.py (Redis with a replica and
three sentinels).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from shared.sharding import mapping_config
from shared.tools.natscluster import NatsCluster, start_nats_cluster
from shared.tools.sentinel import RedisSentinels, start_sentinels
from shared.tools.servers import (
    Server,
    free_port,
    spawn,
    start_nats,
    start_redis,
    wait_or_kill,
)

SERVICES = ("watcher", "queue", "cache", "worker", "binder")
LEADER_ELECTED = ("watcher", "queue", "cache")  # one leads, the others stand by
SHARDED = ("watcher", "queue")  # a leader (and standbys) per shard (docs/scale.md §4)
LEADER_METRIC = "leader_election_master_status"


@dataclass
class ServiceProc:
    name: str
    proc: subprocess.Popen[bytes]
    http_port: int
    log_path: Path
    shard: int | None = None  # a watcher or queue shard's number (shards > 1)


@dataclass
class LocalStack:
    """nats-server, redis-server and the five services as separate processes."""

    workdir: Path
    workers: int = 2
    binders: int = 2
    standbys: int = 0  # per leader-elected service (watcher, queue, cache), per shard
    # watcher and queue shards (KSCHED_SHARDS, docs/scale.md §4), each with its leader and
    # standbys; every service is told the count (workers and binders reach every queue
    # shard); the cache is not sharded yet
    shards: int = 1
    # Whether the NATS servers map pods into partitions (shared/sharding.py
    # mapping_config), so that each watcher shard consumes its own alone; None: when
    # sharded. False with shards: every shard reads the whole stream and drops the rest.
    partitioned: bool | None = None
    persist: bool = False  # Redis with its append-only file (restarts keep the data)
    # One nats-server, or a cluster of this many (natscluster.py) whose servers fsync
    # every write with `sync_always`; ksched's streams in `stream_replicas` copies
    # (KSCHED_STREAM_REPLICAS, docs/reliability.md).
    nats_servers: int = 1
    stream_replicas: int = 1
    sync_always: bool = False
    # One redis-server, or a primary, its replica and three sentinels (sentinel.py):
    # the services then follow the primary through Sentinel (redis+sentinel://).
    redis_sentinel: bool = False
    env: dict[str, str] = field(default_factory=dict)
    service_env: dict[str, dict[str, str]] = field(default_factory=dict)  # per service name
    nats: Server | None = None  # the one nats-server; None with a cluster
    nats_cluster: NatsCluster | None = None
    redis: Server | None = None  # the one redis-server; None with Sentinel
    redis_sentinels: RedisSentinels | None = None
    services: list[ServiceProc] = field(default_factory=list)

    @property
    def nats_urls(self) -> list[str]:
        """Every NATS server, in order: what a client fails over between."""
        if self.nats_cluster is not None:
            return self.nats_cluster.urls
        assert self.nats is not None
        return [f"nats://127.0.0.1:{self.nats.port}"]

    @property
    def nats_url(self) -> str:
        """KSCHED_NATS_URL: the servers comma separated (nats.connect takes one of them,
        or the list `nats_urls`)."""
        return ",".join(self.nats_urls)

    def nats_processes(self) -> list[Server]:
        if self.nats_cluster is not None:
            return self.nats_cluster.servers
        return [self.nats] if self.nats is not None else []

    @property
    def redis_url(self) -> str:
        """KSCHED_REDIS_URL; open it with runtime/connections.py connect_redis."""
        if self.redis_sentinels is not None:
            return self.redis_sentinels.url
        assert self.redis is not None
        return f"redis://127.0.0.1:{self.redis.port}/0"

    def redis_processes(self) -> list[Server]:
        if self.redis_sentinels is not None:
            return self.redis_sentinels.processes()
        return [self.redis] if self.redis is not None else []

    @property
    def maps_partitions(self) -> bool:
        return self.shards > 1 if self.partitioned is None else self.partitioned

    def start_servers(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        mappings = mapping_config() if self.maps_partitions else ""
        if self.nats_servers > 1:
            self.nats_cluster = start_nats_cluster(
                self.workdir / "nats",
                self.nats_servers,
                sync_always=self.sync_always,
                extra=mappings,
            )
        elif mappings:
            config = self.workdir / "nats.conf"
            config.write_text(mappings)
            self.nats = start_nats(self.workdir, config=config)
        else:
            self.nats = start_nats(self.workdir)
        if self.redis_sentinel:
            self.redis_sentinels = start_sentinels(self.workdir / "redis")
        else:
            self.redis = start_redis(self.workdir, persist=self.persist)

    def replicas(self, name: str) -> int:
        if name in SHARDED:
            return (1 + self.standbys) * self.shards
        if name in LEADER_ELECTED:
            return 1 + self.standbys
        return {"worker": self.workers, "binder": self.binders}.get(name, 1)

    def start_services(self) -> None:
        for name in SERVICES:
            for _ in range(self.replicas(name)):
                self.start_service(name)

    def start_service(self, name: str, shard: int | None = None) -> ServiceProc:
        """A replica of `name`; of watcher or queue shard `shard` (shards > 1), else of
        the next shard in turn. A supervisor restarting a dead replica names its shard:
        dealt in turn, the restart could leave the dead one's shard without a replica."""
        port = free_port()
        env = {
            **os.environ,
            "KSCHED_NATS_URL": self.nats_url,
            "KSCHED_STREAM_REPLICAS": str(self.stream_replicas),
            "KSCHED_REDIS_URL": self.redis_url,
            "KSCHED_HTTP_PORT": str(port),
            "KSCHED_HTTP_HOST": "127.0.0.1",
            **self.env,
            **self.service_env.get(name, {}),
        }
        index = sum(1 for s in self.services if s.name == name)
        if self.shards > 1:
            env["KSCHED_SHARDS"] = str(self.shards)
            if name in SHARDED:  # dealt round-robin over shards
                shard = index % self.shards if shard is None else shard
                env["KSCHED_SHARD"] = str(shard)
        if name not in SHARDED or self.shards == 1:
            shard = None
        log_path = self.workdir / f"{name}-{index}.log"
        proc = spawn([sys.executable, "-m", f"services.{name}"], log_path, env)
        svc = ServiceProc(name, proc, port, log_path, shard)
        self.services.append(svc)
        return svc

    def wait_ready(self, timeout: float = 60) -> None:
        """Every service answers /readyz with 200. A dozen processes importing at once
        on this shared 2-core machine (load average 20-30) took more than 30 s."""
        deadline = time.monotonic() + timeout
        for svc in self.services:
            while True:
                if svc.proc.poll() is not None:
                    # the tail goes with the error: a temporary stack's log is gone after it
                    raise RuntimeError(
                        f"{svc.name} exited ({svc.proc.returncode}): see {svc.log_path}\n"
                        + log_tail(svc.log_path)
                    )
                with contextlib.suppress(OSError):
                    url = f"http://127.0.0.1:{svc.http_port}/readyz"
                    with urllib.request.urlopen(url, timeout=1) as resp:
                        if resp.status == 200:
                            break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{svc.name} not ready: see {svc.log_path}")
                time.sleep(0.1)

    def leader(self, name: str, shard: int | None = None) -> ServiceProc | None:
        """The live replica of `name` (of shard `shard`) that leads and serves (None
        while none does)."""
        for svc in self.services:
            if svc.name != name or (shard is not None and svc.shard != shard):
                continue
            if svc.proc.poll() is None and _leads(svc.http_port):
                return svc
        return None

    def shard_leaders(self, name: str) -> list[ServiceProc | None]:
        """The leader of each shard of `name` in shard order (one entry when `name` is
        not sharded); None for a shard that no replica leads now."""
        if name in SHARDED and self.shards > 1:
            return [self.leader(name, s) for s in range(self.shards)]
        return [self.leader(name)]

    def wait_shard_leaders(self, name: str, timeout: float = 30) -> list[ServiceProc | None]:
        """`shard_leaders` once every shard of `name` has one, or as they are at the
        `timeout`: /readyz answers 200 on a standby too, so a stack just ready may
        still be electing (and a loaded machine answers /metrics late)."""
        deadline = time.monotonic() + timeout
        while True:
            leaders = self.shard_leaders(name)
            if all(leaders) or time.monotonic() > deadline:
                return leaders
            time.sleep(0.1)

    def stop_services(self) -> None:
        for svc in self.services:
            if svc.proc.poll() is None:
                svc.proc.send_signal(signal.SIGTERM)
        for svc in self.services:
            wait_or_kill(svc.proc, 15)
        self.services.clear()

    def stop_service(self, svc: ServiceProc, how: signal.Signals = signal.SIGTERM) -> None:
        """One instance ended by `how` (SIGTERM: stopped as a rolling update stops it;
        SIGKILL: lost) and waited for; the stack no longer counts it."""
        if svc.proc.poll() is None:
            svc.proc.send_signal(how)
        wait_or_kill(svc.proc, 15)
        self.services.remove(svc)

    def stop(self) -> None:
        self.stop_services()
        for server in [*self.redis_processes(), *self.nats_processes()]:
            server.stop()


def _leads(http_port: int) -> bool:
    """The replica's /metrics says it leads and its /readyz that it serves."""
    try:
        base = f"http://127.0.0.1:{http_port}"
        with urllib.request.urlopen(f"{base}/metrics", timeout=1) as resp:
            metrics = resp.read().decode()
        with urllib.request.urlopen(f"{base}/readyz", timeout=1) as resp:
            ready = resp.status == 200 and resp.read() == b"ok"
    except OSError:
        return False
    return ready and any(
        line.startswith(LEADER_METRIC) and line.rstrip().endswith(" 1.0")
        for line in metrics.splitlines()
    )


def _standbys(stack: LocalStack, name: str) -> int:
    if name in SHARDED:
        return stack.standbys * stack.shards
    return stack.standbys if name in LEADER_ELECTED else 0


@contextlib.contextmanager
def running(stack: LocalStack, services: Sequence[str] = SERVICES) -> Iterator[LocalStack]:
    """The stack's servers and `services` (workers and binders counted) started and
    ready; all stopped afterwards. The standbys start once the rest is ready: on a
    loaded machine, a dozen processes importing at once outlasted wait_ready."""
    try:
        stack.start_servers()
        for name in services:
            for _ in range(stack.replicas(name) - _standbys(stack, name)):
                stack.start_service(name)
        stack.wait_ready()
        # A standby's /readyz says ready too, and so does a replica still electing
        # itself: a request sent then finds no responder (test_pop_reports, loaded
        # machine). Each leader-elected service (each shard) serving first; not raised
        # on: a test may start one that cannot lead, and says so itself.
        for name in services:
            if name in LEADER_ELECTED:
                stack.wait_shard_leaders(name, timeout=30)
        for name in services:
            for _ in range(_standbys(stack, name)):
                stack.start_service(name)
        stack.wait_ready()
        yield stack
    finally:
        stack.stop()


@contextlib.contextmanager
def temporary_stack(
    prefix: str,
    *,
    services: Sequence[str] = SERVICES,
    workers: int = 2,
    binders: int = 2,
    log_level: str = "warning",
    nats_servers: int = 1,
    stream_replicas: int = 1,
    sync_always: bool = False,
    redis_sentinel: bool = False,
    shards: int = 1,
) -> Iterator[LocalStack]:
    """`running` in a temporary directory, for benchmarks; removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        stack = LocalStack(
            Path(tmp),
            workers=workers,
            binders=binders,
            nats_servers=nats_servers,
            stream_replicas=stream_replicas,
            sync_always=sync_always,
            redis_sentinel=redis_sentinel,
            shards=shards,
            env={"KSCHED_LOG_LEVEL": log_level},
        )
        with running(stack, services) as st:
            yield st


def log_tail(path: Path, lines: int = 20) -> str:
    """The last lines of a service's log, for an error that outlives the log."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
