"""A NATS cluster on one machine: three nats-servers on loopback, joined by routes.

Each server has its own ports (clients, routes, monitoring), its own JetStream store
and `server_name`, and the same `cluster { name, routes }`; JetStream replicates
ksched's streams across them by Raft (docs/reliability.md). For the cluster tests
and `ksched bench --nats-servers 3`; one nats-server stays the default everywhere.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.tools.servers import Server, find_nats_server, free_port, restart, spawn, wait_port

CLUSTER_NAME = "ksched"
HEALTHY_TIMEOUT = 30.0  # a cluster elects its JetStream meta leader in a few seconds


@dataclass(frozen=True)
class Member:
    """One server's identity and ports."""

    name: str
    port: int  # clients
    route_port: int
    monitor_port: int
    host: str = "127.0.0.1"  # where clients and probes reach it (a netns host's address)


def server_config(
    member: Member,
    peers: list[Member],
    store: Path,
    *,
    sync_always: bool = False,
    extra: str = "",
) -> str:
    """The server's configuration file: routes to every member (itself included, which
    nats-server skips), JetStream in its own store, and `extra` (e.g. the partition
    mapping). `sync_always` fsyncs every write before the ack (jetstream.sync_interval:
    always, docs/reliability.md)."""
    routes = ", ".join(f'"nats-route://127.0.0.1:{p.route_port}"' for p in peers)
    sync = "\n  sync_interval: always" if sync_always else ""
    return (
        f'server_name: "{member.name}"\n'
        f'listen: "127.0.0.1:{member.port}"\n'
        f'http: "127.0.0.1:{member.monitor_port}"\n'
        f'jetstream {{\n  store_dir: "{store}"{sync}\n}}\n'
        f"cluster {{\n"
        f'  name: "{CLUSTER_NAME}"\n'
        f'  listen: "127.0.0.1:{member.route_port}"\n'
        f"  routes: [{routes}]\n"
        f"}}\n"
        f"{extra}"
    )


@dataclass
class NatsCluster:
    members: list[Member]
    servers: list[Server]

    @property
    def urls(self) -> list[str]:
        return [f"nats://{m.host}:{m.port}" for m in self.members]

    def index(self, server_name: str) -> int:
        return next(i for i, m in enumerate(self.members) if m.name == server_name)

    def kill(self, i: int) -> None:
        """kill -9: no goodbye to clients or peers."""
        proc = self.servers[i].proc
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()

    def restart(self, i: int) -> None:
        """Start server i again on its ports and store; back once the cluster is healthy."""
        self.servers[i] = restart(self.servers[i])
        self.wait_healthy()

    def alive(self) -> list[int]:
        return [i for i, s in enumerate(self.servers) if s.proc.poll() is None]

    def wait_healthy(self, timeout: float = HEALTHY_TIMEOUT) -> None:
        """Every live server says healthy (JetStream current with its meta leader), and
        the meta leader sees every live peer current: before that, it places no R3
        stream ("no suitable peers for placement")."""
        deadline = time.monotonic() + timeout
        for i in self.alive():
            while not (_healthy(self.members[i]) and self._meta_sees_all()):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"nats-server {self.members[i].name} not healthy")
                time.sleep(0.1)

    def _meta_sees_all(self) -> bool:
        """The JetStream meta leader counts every live server as a current peer (only
        the leader's view of its peers is kept up to date)."""
        live = {self.members[i].name for i in self.alive()}
        meta = _meta_cluster(self.members[self.alive()[0]])
        leader = meta.get("leader")
        if leader not in live:
            return False
        meta = _meta_cluster(self.members[self.index(leader)])
        current = {r["name"] for r in meta.get("replicas") or [] if r.get("current")}
        return meta.get("leader") == leader and live - {leader} <= current

    def meta_leader(self) -> int:
        """The server that leads the JetStream meta group (which answers, among others,
        every stream info request)."""
        leader = _meta_cluster(self.members[self.alive()[0]]).get("leader")
        if not isinstance(leader, str):
            raise LookupError("the JetStream meta group has no leader")
        return self.index(leader)

    def client_names(self, i: int) -> list[str]:
        """The names of the clients connected to server i (its /connz)."""
        url = f"{_monitor(self.members[i])}/connz?limit=1024"
        with urllib.request.urlopen(url, timeout=2) as resp:
            conns = json.load(resp).get("connections") or []
        return [c.get("name", "") for c in conns]

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


def _monitor(member: Member) -> str:
    return f"http://{member.host}:{member.monitor_port}"


def _healthy(member: Member) -> bool:
    with contextlib.suppress(OSError):
        url = f"{_monitor(member)}/healthz"
        with urllib.request.urlopen(url, timeout=1) as resp:
            return resp.status == 200
    return False


def _meta_cluster(member: Member) -> dict[str, Any]:
    """The server's view of the JetStream meta group (its /jsz)."""
    with contextlib.suppress(OSError, ValueError):
        url = f"{_monitor(member)}/jsz"
        with urllib.request.urlopen(url, timeout=1) as resp:
            return dict(json.load(resp).get("meta_cluster") or {})
    return {}


def start_nats_cluster(
    workdir: Path, size: int = 3, *, sync_always: bool = False, extra: str = ""
) -> NatsCluster:
    """`size` nats-servers routed into one cluster, each with its own store and `extra`
    configuration; returns once JetStream is up on all of them."""
    members = [Member(f"n{i}", free_port(), free_port(), free_port()) for i in range(size)]
    servers = []
    binary = find_nats_server()
    for member in members:
        home = workdir / member.name
        home.mkdir(parents=True, exist_ok=True)
        conf = home / "nats.conf"
        conf.write_text(
            server_config(member, members, home / "jetstream", sync_always=sync_always, extra=extra)
        )
        args = [binary, "-c", str(conf)]
        log_path = home / "nats.log"
        servers.append(Server(spawn(args, log_path), member.port, args, log_path))
    cluster = NatsCluster(members, servers)
    try:
        for server in servers:
            wait_port(server.port, server.proc, "nats-server")
        cluster.wait_healthy()
    except Exception:
        cluster.stop()
        raise
    return cluster
