"""ksched on three hosts made of network namespaces (netns.py), as on three machines.

Each host runs one nats-server (the three routed into one cluster, ksched's streams
in 3 replicas), one redis-server (h1 the primary, the others its replicas) with a
Sentinel, and a share of the services: a worker and a binder on every host, and two
replicas of each leader-elected service on two different hosts, so that whichever
host is lost, every leader has a standby elsewhere:

    h1: watcher, cache, worker, binder
    h2: watcher, queue, worker, binder
    h3: queue, cache, worker, binder

With `shards` > 1 (watcher and queue shards, docs/scale.md §4) each shard's watcher
and queue pair is placed the same way, turned by one host per shard (shard 1's
watchers on h2 and h3, its queues on h3 and h1, ...): each shard keeps its standby on
another host, and the shards' leaders spread over the hosts.

Every process listens on its host's own address; the tools in the root namespace (load,
probes) reach them through the bridge. `kill_host` is kill -9 of every process of a
host, `start_host` brings them back (servers, then services).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.subjects import CLUSTER_STREAM
from shared.tools.devstack import LEADER_ELECTED, LEADER_METRIC, SHARDED
from shared.tools.natscluster import CLUSTER_NAME, Member, NatsCluster
from shared.tools.netns import HostNet
from shared.tools.servers import Server, find_nats_server, find_redis_server

NATS_PORT, ROUTE_PORT, MONITOR_PORT = 4222, 6222, 8222
REDIS_PORT, SENTINEL_PORT = 6379, 26379
SERVER_PING_INTERVAL = "2s"  # nats-server pings to clients and routes: nats_config
SERVER_PING_MAX = 2
MASTER_NAME = "ksched"  # the Sentinel name of the Redis primary
FIRST_HTTP_PORT = 9100  # services' /metrics, one port each within a host
PRIMARY_HOST = 1  # the Redis primary at start
PLACEMENT: dict[int, tuple[str, ...]] = {
    1: ("watcher", "cache", "worker", "binder"),
    2: ("watcher", "queue", "worker", "binder"),
    3: ("queue", "cache", "worker", "binder"),
}
READY_TIMEOUT = 60.0
# Of the three Redis servers, the primary writes only with one replica at most this many
# seconds behind: one host lost leaves it that replica, a host cut off leaves its old
# primary none. (With two Redis servers this would stop every write when one is lost.)
MIN_REPLICAS_TO_WRITE, MIN_REPLICAS_MAX_LAG = 1, 3


@dataclass
class HostService:
    name: str
    host: int
    identity: str  # its lease identity, and the Ksched-Bound-By of a binder's writes
    proc: subprocess.Popen[bytes]
    url: str  # its /metrics, /readyz base
    log_path: Path
    shard: int | None = None  # a watcher's or queue's shard (None: unsharded)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


def _get(url: str, timeout: float = 1.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return int(resp.status), bytes(resp.read())
    except OSError:
        return 0, b""


def nats_config(net: HostNet, host: int, store: Path) -> str:
    """The host's nats-server: clients, routes and monitoring on its own address; the
    routes to every host; fsync on every write (a host's loss is a machine's loss).

    Pings every 2 s, 2 outstanding, on routes too (nats-server's default is 2 min): a
    route to a host cut off goes silent, and until it is dropped the servers keep the
    interest of that host's subscribers, so a request to a queue group (the services'
    endpoints) may still be handed to the member there and is never answered. With
    the defaults that lasted the whole of a 25 s cut; with these, about 5 s."""
    routes = ", ".join(f'"nats-route://{net.address(h)}:{ROUTE_PORT}"' for h in net.hosts)
    address = net.address(host)
    return (
        f'server_name: "h{host}"\n'
        f'listen: "{address}:{NATS_PORT}"\n'
        f'http: "{address}:{MONITOR_PORT}"\n'
        f'ping_interval: "{SERVER_PING_INTERVAL}"\n'
        f"ping_max: {SERVER_PING_MAX}\n"
        f'jetstream {{\n  store_dir: "{store}"\n  sync_interval: always\n}}\n'
        f'cluster {{\n  name: "{CLUSTER_NAME}"\n  listen: "{address}:{ROUTE_PORT}"\n'
        f"  routes: [{routes}]\n  no_advertise: true\n}}\n"
    )


def sentinel_config(net: HostNet, host: int) -> str:
    """Short timings for a test bed: the primary is down after 1 s without an answer."""
    return (
        f"port {SENTINEL_PORT}\nbind {net.address(host)}\nprotected-mode no\n"
        f"sentinel announce-ip {net.address(host)}\n"
        f"sentinel monitor {MASTER_NAME} {net.address(PRIMARY_HOST)} {REDIS_PORT} 2\n"
        f"sentinel down-after-milliseconds {MASTER_NAME} 1000\n"
        f"sentinel failover-timeout {MASTER_NAME} 5000\n"
    )


@dataclass
class Hosts:
    """The three hosts with ksched on them; `env` goes to every service."""

    net: HostNet
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    # KSCHED_REDIS_URL names the Sentinels (redis+sentinel://) rather than h1's Redis
    sentinel_url: bool = False
    shards: int = 1  # watcher and queue shards (KSCHED_SHARDS)
    services: list[HostService] = field(default_factory=list)
    servers: dict[int, dict[str, subprocess.Popen[bytes]]] = field(default_factory=dict)
    _incarnation: itertools.count[int] = field(default_factory=itertools.count)
    # kill_host, start_host and restart_exited run in threads: one at a time, so that a
    # host's processes killed on purpose are not taken for ones that exited
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # --- addresses ----------------------------------------------------------------

    @property
    def nats_urls(self) -> list[str]:
        return [f"nats://{self.net.address(h)}:{NATS_PORT}" for h in self.net.hosts]

    def redis_url(self, host: int) -> str:
        """KSCHED_REDIS_URL for a service of `host`: the Sentinels, its own host's first.
        redis-py asks them in turn and waits on a silent one (a host cut off) before the
        next: with a far one first, every service would pay that wait at each reconnect."""
        order = [host, *(h for h in self.net.hosts if h != host)]
        sentinels = ",".join(f"{self.net.address(h)}:{SENTINEL_PORT}" for h in order)
        if self.sentinel_url:
            return f"redis+sentinel://{sentinels}/{MASTER_NAME}/0"
        return f"redis://{self.net.address(PRIMARY_HOST)}:{REDIS_PORT}/0"

    def nats_cluster(self) -> NatsCluster:
        """The NATS servers as natscluster sees them (health, meta leader, kill)."""
        members = [
            Member(f"h{h}", NATS_PORT, ROUTE_PORT, MONITOR_PORT, self.net.address(h))
            for h in self.net.hosts
        ]
        servers = [
            Server(self.servers[h]["nats"], NATS_PORT, [], self.workdir / f"h{h}" / "nats.log")
            for h in self.net.hosts
        ]
        return NatsCluster(members, servers)

    # --- starting and killing -------------------------------------------------------

    def start(self) -> None:
        for host in self.net.hosts:
            self.start_servers(host, PRIMARY_HOST)
        self.nats_cluster().wait_healthy(READY_TIMEOUT)
        self._wait_replicas(PRIMARY_HOST)  # the primary takes no write before (above)
        for host in self.net.hosts:
            self.start_services(host)
        self.wait_ready()

    def start_servers(self, host: int, primary: int | None) -> None:
        """The host's nats-server, redis-server (a replica of `primary` unless it is the
        primary) and Sentinel."""
        home = self.workdir / f"h{host}"
        home.mkdir(parents=True, exist_ok=True)
        conf = home / "nats.conf"
        conf.write_text(nats_config(self.net, host, home / "jetstream"))
        procs = {
            "nats": self.net.spawn(host, [find_nats_server(), "-c", str(conf)], home / "nats.log")
        }
        redis = self._redis_args(host, home, primary)
        procs["redis"] = self.net.spawn(host, redis, home / "redis.log")
        sentinel = home / "sentinel.conf"
        if not sentinel.exists():  # Sentinel rewrites it with what it learnt: keep that
            sentinel.write_text(sentinel_config(self.net, host))
        redis_server, _ = find_redis_server()
        args = [redis_server, str(sentinel), "--sentinel"]
        procs["sentinel"] = self.net.spawn(host, args, home / "sentinel.log")
        self.servers[host] = procs

    def _redis_args(self, host: int, home: Path, primary: int | None) -> list[str]:
        """A replica of `primary`, or the primary itself (no persistence: what Redis
        holds is derived from the log, DESIGN.md). Whichever is primary takes writes only
        while a replica follows it closely (`min-replicas-*`): a primary cut off with
        its host keeps taking its own host's writes otherwise, until Sentinel turns it
        into a replica after the heal, and those writes (a deposed queue shard leader's,
        acknowledged to a watcher) vanish with the resync (docs/reliability.md)."""
        redis_server, _ = find_redis_server()
        args = [
            redis_server, "--port", str(REDIS_PORT), "--bind", self.net.address(host),
            "--protected-mode", "no", "--dir", str(home), "--save", "", "--appendonly", "no",
            "--replica-announce-ip", self.net.address(host),
            "--min-replicas-to-write", str(MIN_REPLICAS_TO_WRITE),
            "--min-replicas-max-lag", str(MIN_REPLICAS_MAX_LAG),
        ]  # fmt: skip
        if primary not in (None, host):
            args += ["--replicaof", self.net.address(primary), str(REDIS_PORT)]
        return args

    def start_services(self, host: int) -> None:
        for name, shard in self.placed(host):
            self.start_service(name, host, shard)

    def placed(self, host: int) -> list[tuple[str, int | None]]:
        """The services `host` runs, each with its shard (None: unsharded)."""
        if self.shards == 1:
            return [(name, None) for name in PLACEMENT[host]]
        hosts = sorted(PLACEMENT)
        placed: list[tuple[str, int | None]] = []
        for name in PLACEMENT[host]:
            if name not in SHARDED:
                placed.append((name, None))
        for shard in range(self.shards):
            # the host that runs this shard's share as `host` runs shard 0's
            turned = hosts[(hosts.index(host) - shard) % len(hosts)]
            placed += [(name, shard) for name in PLACEMENT[turned] if name in SHARDED]
        return placed

    def start_service(self, name: str, host: int, shard: int | None = None) -> HostService:
        incarnation = next(self._incarnation)
        port = FIRST_HTTP_PORT + incarnation  # never one a live service of the host holds
        identity = f"h{host}-{name}-{incarnation}"
        env = {
            **os.environ,
            "KSCHED_NATS_URL": ",".join(self.nats_urls),
            "KSCHED_STREAM_REPLICAS": "3",
            "KSCHED_REDIS_URL": self.redis_url(host),
            "KSCHED_HTTP_HOST": self.net.address(host),
            "KSCHED_HTTP_PORT": str(port),
            "KSCHED_LEADER_ELECT_IDENTITY": identity,
            **self.env,
        }
        if self.shards > 1:
            env["KSCHED_SHARDS"] = str(self.shards)
            if shard is not None:
                env["KSCHED_SHARD"] = str(shard)
        log_path = self.workdir / f"h{host}" / f"{identity}.log"
        proc = self.net.spawn(host, [sys.executable, "-m", f"services.{name}"], log_path, env)
        url = f"http://{self.net.address(host)}:{port}"
        svc = HostService(name, host, identity, proc, url, log_path, shard)
        self.services.append(svc)
        return svc

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        for svc in [s for s in self.services if s.alive]:
            while _get(f"{svc.url}/readyz") != (200, b"ok"):
                if not svc.alive:
                    raise RuntimeError(f"{svc.identity} exited: see {svc.log_path}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{svc.identity} not ready: see {svc.log_path}")
                time.sleep(0.2)

    def kill_host(self, host: int) -> int:
        """kill -9 every process of the host; how many there were."""
        with self._lock:
            killed = len(self.net.kill(host))
            for svc in self.services:
                if svc.host == host:
                    svc.proc.wait()
            self.services = [s for s in self.services if s.host != host]
            self.servers.pop(host, None)
        return killed

    def start_host(self, host: int) -> None:
        """Bring a killed host back: its servers (NATS rejoins, Redis as a replica), then
        its services once the NATS cluster is whole again."""
        with self._lock:
            self.start_servers(host, self.redis_primary())  # rejoins as a replica
            self.nats_cluster().wait_healthy(READY_TIMEOUT)
            self.start_services(host)
        self.wait_ready()

    def restart_exited(self) -> int:
        """Start again every service that exited on a host that is up, as compose's
        restart policy does (a deposed leader exits); how many."""
        with self._lock:
            gone = [s for s in self.services if not s.alive and s.host in self.servers]
            for svc in gone:
                self.services.remove(svc)
                self.start_service(svc.name, svc.host, svc.shard)
        return len(gone)

    def kill_server(self, host: int, what: str) -> None:
        """kill -9 one server ("nats", "redis") of a host."""
        proc = self.servers[host][what]
        proc.kill()
        proc.wait()

    def restart_server(self, host: int, what: str) -> None:
        home = self.workdir / f"h{host}"
        if what == "nats":
            args = [find_nats_server(), "-c", str(home / "nats.conf")]
        else:
            args = self._redis_args(host, home, self.redis_primary())
        self.servers[host][what] = self.net.spawn(host, args, home / f"{what}.log")
        if what == "nats":
            self.nats_cluster().wait_healthy(READY_TIMEOUT)

    def stop(self) -> None:
        self.net.destroy()

    def wait_whole(self, timeout: float = READY_TIMEOUT) -> None:
        """Every host back to full strength, as an operator waits before the next fault:
        the NATS servers healthy (every stream and consumer replica current: a replica
        still catching up after a fault counts for no quorum), each leader-elected
        service led, and the Redis primary with every replica in sync."""
        deadline = time.monotonic() + timeout
        self.nats_cluster().wait_healthy(timeout)
        while not self._whole():
            if time.monotonic() > deadline:
                raise TimeoutError("hosts not whole again: see the services' logs")
            time.sleep(0.5)

    def _whole(self) -> bool:
        if any(leader is None for leader in self.leaders()):
            return False
        primary = self.redis_primary()
        if primary is None:
            return False
        info = self._redis_info(primary)
        return f"connected_slaves:{len(self.servers) - 1}" in info

    def _wait_replicas(self, primary: int, timeout: float = READY_TIMEOUT) -> None:
        """Until every other host's Redis follows `primary`."""
        deadline = time.monotonic() + timeout
        want = f"connected_slaves:{len(self.net.hosts) - 1}"
        while want not in self._redis_info(primary):
            if time.monotonic() > deadline:
                raise TimeoutError(f"Redis replicas not following h{primary}")
            time.sleep(0.2)

    def _redis_info(self, host: int) -> str:
        with contextlib.suppress(RuntimeError):
            return self.net.run(
                host, "redis-cli", "-h", self.net.address(host), "-p", str(REDIS_PORT),
                "info", "replication",
            )  # fmt: skip
        return ""

    # --- looking -------------------------------------------------------------------------

    def leaders(self) -> list[HostService | None]:
        """The leader of each leader-elected service, of each shard of a sharded one."""
        return [
            self.leader(name, shard)
            for name in LEADER_ELECTED
            for shard in (range(self.shards) if name in SHARDED and self.shards > 1 else [None])
        ]

    def leader(self, name: str, shard: int | None = None) -> HostService | None:
        """The live replica of `name` (of shard `shard`) whose /metrics says it leads."""
        for svc in self.services:
            if svc.name == name and svc.alive and (shard is None or svc.shard == shard):
                status, body = _get(f"{svc.url}/metrics")
                if status == 200 and any(
                    line.startswith(LEADER_METRIC) and line.rstrip().endswith(" 1.0")
                    for line in body.decode().splitlines()
                ):
                    return svc
        return None

    def stream_leader(self, stream: str = CLUSTER_STREAM) -> int | None:
        """The host whose nats-server leads `stream` (its Raft group), as /jsz says."""
        for host in self.servers:
            url = f"http://{self.net.address(host)}:{MONITOR_PORT}/jsz?streams=true"
            status, body = _get(url)
            if status != 200:
                continue
            with contextlib.suppress(ValueError, KeyError, TypeError):
                leader = _stream_leader(json.loads(body), stream)
                if leader:
                    return int(leader.removeprefix("h"))
        return None

    def redis_primary(self) -> int | None:
        """The host whose redis-server says it is the primary (role:master)."""
        for host in self.servers:
            if "role:master" in self._redis_info(host):
                return host
        return None


def _stream_leader(jsz: dict[str, Any], stream: str) -> str:
    for account in jsz.get("account_details") or []:
        for detail in account.get("stream_detail") or []:
            if detail.get("name") == stream:
                return str((detail.get("cluster") or {}).get("leader") or "")
    return ""
