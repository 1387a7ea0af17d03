"""A Redis failover in a running HA compose project (docs/deploy.md, Verified).

Against `docker compose -f compose.yaml -f compose.ha.yaml up -d` already running as
project PROJECT (default `ksched-ha`), as the `publisher` user on the given NATS ports:
publishes 10 nodes (named after PREFIX) and 200 pods and waits until they are bound;
kills (SIGKILL) the Redis container the Sentinels name primary; publishes 200 more
pods and waits until every pod is bound, none twice. Prints when the first pod
published after the kill bound. Run it again with another PREFIX after restarting the
killed container to fail over back.

    python -m tests.smoke.compose_ha_failover PORT1 PORT2 PORT3 [PREFIX] [PROJECT]
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import nats

from shared.tools.client import PodTracker, publish_all
from shared.tools.synthetic import make_node, make_pod
from tests.smoke.compose_smoke import wait_for_streams

PODS = 200


def sh(*cmd: str) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()


def primary(project: str) -> str:
    """The service name of the Redis primary, as a Sentinel says (announced by name)."""
    out = sh(
        "docker", "exec", f"{project}_redis-sentinel-1_1", "redis-cli", "-p", "26379",
        "sentinel", "get-master-addr-by-name", "ksched",
    )  # fmt: skip
    return out.splitlines()[0]


async def run(ports: list[str], prefix: str, project: str) -> None:
    password = sh("docker", "exec", f"{project}_nats_1", "cat", "/run/secrets/nats_publisher")
    urls = [f"nats://127.0.0.1:{p}" for p in ports]
    nc = await nats.connect(urls, user="publisher", password=password)
    try:
        await wait_for_streams(nc, 120)
        tracker = PodTracker()
        await tracker.start(nc)
        js = nc.jetstream()
        nodes = [make_node(f"{prefix}ha-node-{i}", cpu="16", memory="64Gi") for i in range(10)]
        await publish_all(js, nodes)  # room for this run's pods, whatever earlier runs hold

        def bound(group: str) -> int:
            return sum(k.startswith(f"default/{prefix}{group}") for k in tracker.bound())

        await publish_all(
            js, [make_pod(f"{prefix}before-{i}", cpu="100m", memory="64Mi") for i in range(PODS)]
        )
        if not await tracker.wait_until(lambda t: bound("before-") == PODS, timeout=180):
            raise SystemExit(f"before the kill: {bound('before-')}/{PODS} bound")
        victim = primary(project)
        killed = time.monotonic()
        sh("docker", "kill", "-s", "KILL", f"{project}_{victim}_1")
        print(f"killed {victim} (SIGKILL)", flush=True)
        publishing = asyncio.create_task(
            publish_all(
                js, [make_pod(f"{prefix}after-{i}", cpu="100m", memory="64Mi") for i in range(PODS)]
            )
        )
        await tracker.wait_until(lambda t: bound("after-") > 0, timeout=180)
        print(f"first pod after the kill bound {time.monotonic() - killed:.1f} s after it")
        await publishing
        everyone = await tracker.wait_until(lambda t: bound("after-") == PODS, timeout=240)
        twice = [k for k, v in tracker.pods.items() if v.bind_count > 1]
        print(
            f"{bound('after-')}/{PODS} bound {time.monotonic() - killed:.1f} s after the kill; "
            f"primary now {primary(project)}; bound twice: {twice}",
            flush=True,
        )
        if not everyone or twice:
            raise SystemExit("compose HA failover: FAILED")
    finally:
        await nc.close()


if __name__ == "__main__":
    args = sys.argv[1:]
    asyncio.run(
        run(args[:3], args[3] if len(args) > 3 else "", args[4] if len(args) > 4 else "ksched-ha")
    )
