"""Redis with Sentinel on one machine: a primary, a replica of it and three sentinels
(`redis-server --sentinel`), each a process on its own loopback port.

The sentinels watch the primary under MASTER_NAME with a quorum of two. Their timings
are short so that tests see a failover within seconds: a primary that does not answer
for DOWN_AFTER_MS is down to a sentinel, the quorum agrees it is down, one sentinel is
elected and promotes the replica (docs/reliability.md). Production keeps Redis's
defaults or close (compose.ha.yaml). For the Sentinel tests and
`LocalStack(redis_sentinel=True)` (devstack.py); one redis-server stays the default.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass
from pathlib import Path

from redis import Redis
from redis.exceptions import RedisError

from shared.tools.servers import Server, find_redis_server, free_port, spawn, start_redis, wait_port

MASTER_NAME = "ksched"
QUORUM = 2
DOWN_AFTER_MS = 1000  # Redis's default: 30 000
FAILOVER_TIMEOUT_MS = 3000  # Redis's default: 180 000
READY_TIMEOUT = 30.0  # the sentinels find each other through the primary's hello channel


def sentinel_config(port: int, primary_port: int, home: Path) -> str:
    """One sentinel's configuration file (sentinel rewrites it with what it learns)."""
    name = MASTER_NAME
    return (
        f"port {port}\n"
        "bind 127.0.0.1\n"
        f'dir "{home}"\n'
        f"sentinel monitor {name} 127.0.0.1 {primary_port} {QUORUM}\n"
        f"sentinel down-after-milliseconds {name} {DOWN_AFTER_MS}\n"
        f"sentinel failover-timeout {name} {FAILOVER_TIMEOUT_MS}\n"
        f"sentinel parallel-syncs {name} 1\n"
    )


@dataclass
class RedisSentinels:
    """The data servers (the primary first at start; Sentinel decides after) and the
    sentinels watching them."""

    data: list[Server]
    sentinels: list[Server]

    @property
    def url(self) -> str:
        """KSCHED_REDIS_URL for this set: every sentinel, the master's name, db 0."""
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{MASTER_NAME}/0"

    def primary_port(self) -> int | None:
        """The primary's port, as the first sentinel that answers says (None: none)."""
        for sentinel in self.sentinels:
            if sentinel.proc.poll() is not None:
                continue
            try:
                with Redis(port=sentinel.port, socket_timeout=1) as client:
                    addr = client.sentinel_get_master_addr_by_name(MASTER_NAME)
            except RedisError:
                continue
            if addr:
                return int(addr[1])
        return None

    def primary(self) -> int:
        """Index in `data` of the server the sentinels name primary."""
        port = self.primary_port()
        return next(i for i, s in enumerate(self.data) if s.port == port)

    def kill(self, i: int) -> None:
        """kill -9 data server i: no goodbye to clients, replicas or sentinels."""
        proc = self.data[i].proc
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()

    def wait_promoted(self, old_port: int, timeout: float = READY_TIMEOUT) -> int:
        """The port of the primary that replaced `old_port`, once it says so itself."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            port = self.primary_port()
            if port is not None and port != old_port and role(port) == "master":
                return port
            time.sleep(0.05)
        raise TimeoutError(f"no replica promoted in place of port {old_port}")

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Every sentinel knows the primary, its replica and the other sentinels: only
        then can the quorum agree on a failover."""
        deadline = time.monotonic() + timeout
        for sentinel in self.sentinels:
            while not _knows_all(sentinel.port, len(self.data) - 1, len(self.sentinels) - 1):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"sentinel on port {sentinel.port} sees not everyone")
                time.sleep(0.1)

    def wait_role(self, port: int, wanted: str, timeout: float = READY_TIMEOUT) -> None:
        """Until the server on `port` says it is `wanted` (a demoted primary: "slave")."""
        deadline = time.monotonic() + timeout
        while role(port) != wanted:
            if time.monotonic() > deadline:
                raise TimeoutError(f"redis on port {port} is no {wanted}")
            time.sleep(0.05)

    def processes(self) -> list[Server]:
        return [*self.data, *self.sentinels]

    def stop(self) -> None:
        for server in self.processes():
            server.stop()


def role(port: int) -> str:
    """What the server on `port` says it is: master, slave, sentinel ("" if no answer)."""
    try:
        with Redis(port=port, socket_timeout=1) as client:
            return str(client.execute_command("ROLE")[0], "ascii")
    except (RedisError, OSError):
        return ""


def _knows_all(port: int, replicas: int, others: int) -> bool:
    try:
        with Redis(port=port, socket_timeout=1) as client:
            state = client.sentinel_master(MASTER_NAME)
    except RedisError:
        return False
    return bool(
        state.get("num-slaves", 0) >= replicas
        and state.get("num-other-sentinels", 0) >= others
        and not state.get("is_sdown")
    )


def start_sentinels(workdir: Path, *, replicas: int = 1, sentinels: int = 3) -> RedisSentinels:
    """A primary, `replicas` replicas of it and `sentinels` sentinels; returns once every
    sentinel sees them all."""
    primary = start_redis(_home(workdir, "redis-0"))
    data = [primary]
    for i in range(1, replicas + 1):
        replicaof = ["--replicaof", "127.0.0.1", str(primary.port)]
        data.append(start_redis(_home(workdir, f"redis-{i}"), extra=replicaof))
    watchers = [
        _start_sentinel(_home(workdir, f"sentinel-{i}"), primary.port) for i in range(sentinels)
    ]
    found = RedisSentinels(data, watchers)
    try:
        found.wait_ready()
    except BaseException:
        found.stop()
        raise
    return found


def _home(workdir: Path, name: str) -> Path:
    home = workdir / name
    home.mkdir(parents=True, exist_ok=True)
    return home


def _start_sentinel(home: Path, primary_port: int) -> Server:
    port = free_port()
    conf = home / "sentinel.conf"
    conf.write_text(sentinel_config(port, primary_port, home))
    args = [find_redis_server()[0], str(conf), "--sentinel"]
    log_path = home / "sentinel.log"
    proc = spawn(args, log_path)
    wait_port(port, proc, "redis-sentinel")
    return Server(proc, port, args, log_path)
