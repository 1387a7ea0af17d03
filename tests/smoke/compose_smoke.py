"""`make compose-smoke`: on a fresh clone of this repository's HEAD (nothing the working
tree has beyond git), `docker compose up` with 2 replicas of every service, as a user
runs it; schedule a small workload through the published NATS port as the `publisher`
user, check it, tear down.

Needs a Docker engine (on a machine without registry access, first run
../shared/tools/standin-images.sh as root).
"""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nats

from shared.subjects import STREAMS
from shared.tools.client import PodTracker, publish_all
from shared.tools.servers import free_port
from shared.tools.synthetic import make_node, make_pod

PROJECT = "ksched-smoke"
PUBLISHER_ERRORS: list[str] = []
REPO = Path(__file__).resolve().parents[2]
NODES, PODS, TOO_BIG = 10, 200, 10


def compose_cmd(*args: str) -> list[str]:
    return [*shlex.split(os.environ.get("COMPOSE", "docker-compose")), "-p", PROJECT, *args]


def compose(*args: str, check: bool = True, env: dict[str, str] | None = None) -> int:
    cmd = compose_cmd(*args)
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=check, env=env).returncode


def publisher_password(env: dict[str, str]) -> str:
    """What a user is told to run: the password the `secrets` service created."""
    cmd = compose_cmd("exec", "-T", "nats", "cat", "/run/secrets/nats_publisher")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return out.strip()


async def drive(port: int, password: str) -> None:
    nc = await connect(f"nats://127.0.0.1:{port}", password, timeout=120)
    try:
        await wait_for_streams(nc, timeout=120)
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
        expected = (
            f"0/{NODES} nodes are available: {NODES} Insufficient cpu. preemption: "
            f"0/{NODES} nodes are available: {NODES} Preemption is not helpful for scheduling."
        )
        if set(tracker.reasons()) != {expected}:
            raise SystemExit(f"smoke: unexpected reasons {dict(tracker.reasons())}")
        if any(v.bind_count > 1 for v in tracker.pods.values()):
            raise SystemExit("smoke: a pod was bound twice")
        await check_publisher_is_kept_out(nc)
    finally:
        await nc.close()


async def wait_for_streams(nc: nats.NATS, timeout: float) -> None:
    """The services create the streams; a publisher may only look them up."""
    deadline = time.monotonic() + timeout
    for spec in STREAMS:
        while True:
            try:
                await nc.jetstream(timeout=2).stream_info(spec.name)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(1)


async def check_publisher_is_kept_out(nc: nats.NATS) -> None:
    """The publisher's credentials cannot publish on an internal subject: the server
    refuses (a permissions violation, reported asynchronously) and no bind request lands."""
    before = (await nc.jetstream().stream_info("KSCHED_BIND")).state.last_seq
    await nc.publish("ksched.internal.bind", b"forged")
    await nc.flush()
    await asyncio.sleep(0.5)
    if not any("permissions violation" in e.lower() for e in PUBLISHER_ERRORS):
        raise SystemExit(
            f"smoke: publisher was not refused on an internal subject: {PUBLISHER_ERRORS}"
        )
    if (await nc.jetstream().stream_info("KSCHED_BIND")).state.last_seq != before:
        raise SystemExit("smoke: a forged bind request reached the bind stream")
    print("publisher refused on ksched.internal.bind: ok", flush=True)


def check_image_user() -> None:
    out = subprocess.run(
        ["docker", "run", "--rm", "--entrypoint", "id", "ksched:latest", "-u"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if out == "0":
        raise SystemExit("smoke: the image runs as root")
    print(f"image runs as uid {out}: ok", flush=True)


async def on_error(err: Exception) -> None:
    PUBLISHER_ERRORS.append(str(err))


async def connect(url: str, password: str, timeout: float) -> nats.NATS:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await nats.connect(
                url,
                error_cb=on_error,
                connect_timeout=2,
                max_reconnect_attempts=0,
                user="publisher",  # what compose.yaml's NATS lets a publisher do, no more
                password=password,
            )
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


def fresh_clone(into: str) -> Path:
    clone = Path(into) / "ksched"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    return clone


def main() -> int:
    port = free_port()
    env = {**os.environ, "KSCHED_NATS_PORT": str(port)}
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(fresh_clone(tmp))
        return run(env, port)


def run(env: dict[str, str], port: int) -> int:
    try:
        scale = [f"--scale={name}=2" for name in ("watcher", "queue", "cache", "worker", "binder")]
        compose("up", "-d", "--build", *scale, env=env)  # what README says, nothing before it
        check_image_user()
        asyncio.run(drive(port, publisher_password(env)))
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
