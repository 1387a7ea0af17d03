"""`make compose-smoke`: build the image, run compose.yaml with 2 workers and 2 binders,
schedule a small workload through the published NATS port, check it, tear down.

Needs a Docker engine (on a machine without registry access, first run
../shared/tools/standin-images.sh as root).
"""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import sys
import time

import nats

from shared.cli.workload import make_node, make_pod
from shared.client import PodTracker, publish_all
from shared.devstack import free_port

PROJECT = "ksched-smoke"
NODES, PODS, TOO_BIG = 10, 200, 10


def compose(*args: str, check: bool = True, env: dict[str, str] | None = None) -> int:
    cmd = [*shlex.split(os.environ.get("COMPOSE", "docker-compose")), "-p", PROJECT, *args]
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=check, env=env).returncode


async def drive(port: int) -> None:
    nc = await connect(f"nats://127.0.0.1:{port}", timeout=120)
    try:
        tracker = PodTracker()
        await tracker.start(nc)
        js = nc.jetstream()
        await publish_all(
            js, [make_node(f"smoke-node-{i}", cpu="4", memory="8Gi") for i in range(NODES)]
        )
        pods = [make_pod(f"smoke-{i}", cpu="100m", memory="64Mi") for i in range(PODS)]
        pods += [make_pod(f"too-big-{i}", cpu="8", memory="64Mi") for i in range(TOO_BIG)]
        started = time.monotonic()
        await publish_all(js, pods)
        ok = await tracker.wait_until(
            lambda t: len(t.bound()) == PODS and len(t.unschedulable()) == TOO_BIG, timeout=180
        )
        elapsed = time.monotonic() - started
        print(
            f"bound {len(tracker.bound())}/{PODS}, unschedulable {len(tracker.unschedulable())}"
            f"/{TOO_BIG} in {elapsed:.1f} s; reasons: {dict(tracker.reasons())}",
            flush=True,
        )
        if not ok:
            raise SystemExit("smoke: not every pod reached its expected state")
        expected = f"0/{NODES} nodes are available: {NODES} Insufficient cpu."
        if set(tracker.reasons()) != {expected}:
            raise SystemExit(f"smoke: unexpected reasons {dict(tracker.reasons())}")
        if any(v.bind_count > 1 for v in tracker.pods.values()):
            raise SystemExit("smoke: a pod was bound twice")
    finally:
        await nc.close()


async def connect(url: str, timeout: float) -> nats.NATS:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await nats.connect(url, connect_timeout=2, max_reconnect_attempts=0)
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(1)


def wait_healthy(timeout: float = 120) -> None:
    """Every container of the project reports (healthy): the in-image healthchecks work."""
    deadline = time.monotonic() + timeout
    while True:
        out = (
            subprocess.run(
                [
                    "docker",
                    "ps",
                    "--filter",
                    f"label=com.docker.compose.project={PROJECT}",
                    "--format",
                    "{{.Names}}\t{{.Status}}",
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            .stdout.strip()
            .splitlines()
        )
        unhealthy = [line for line in out if "(healthy)" not in line]
        if out and not unhealthy:
            print(f"all {len(out)} containers healthy", flush=True)
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"smoke: containers not healthy: {unhealthy}")
        time.sleep(2)


def main() -> int:
    port = free_port()
    env = {**os.environ, "KSCHED_NATS_PORT": str(port)}
    try:
        compose("build", env=env)
        compose("up", "-d", "--scale", "worker=2", "--scale", "binder=2", env=env)
        asyncio.run(drive(port))
        wait_healthy()
        compose("ps", env=env)
        print("compose smoke: OK", flush=True)
        return 0
    except (SystemExit, Exception) as err:
        print(f"compose smoke FAILED: {err}", file=sys.stderr, flush=True)
        compose("logs", "--tail", "60", check=False, env=env)
        return 1
    finally:
        compose("down", "-v", "--remove-orphans", check=False, env=env)


if __name__ == "__main__":
    sys.exit(main())
