"""Services outlive their servers: they reconnect and carry on."""

from __future__ import annotations

import subprocess
import sys

import nats
import pytest

from shared.tools.client import PodTracker, publish_all
from shared.tools.devstack import LocalStack
from shared.tools.servers import restart
from shared.tools.synthetic import make_node, make_pod

pytestmark = pytest.mark.e2e


async def test_nats_restart_mid_run_loses_no_pod(stack: LocalStack) -> None:
    nc = await nats.connect(stack.nats_url)
    js = nc.jetstream()
    await publish_all(js, [make_node(f"n{i}", cpu="8", memory="32Gi") for i in range(5)])
    await publish_all(js, [make_pod(f"before-{i}") for i in range(50)])
    tracker = PodTracker()
    await tracker.start(nc)
    assert await tracker.wait_until(lambda t: len(t.bound()) == 50, timeout=30)
    await nc.close()

    assert stack.nats is not None
    stack.nats = restart(stack.nats)  # JetStream file store: the streams survive

    nc = await nats.connect(stack.nats_url)
    try:
        js = nc.jetstream()
        await publish_all(js, [make_pod(f"after-{i}") for i in range(50)])
        tracker = PodTracker()
        await tracker.start(nc)
        assert await tracker.wait_until(lambda t: len(t.bound()) == 100, timeout=60), (
            f"{len(tracker.bound())} of 100 bound"
        )
        assert all(v.bind_count == 1 for v in tracker.pods.values())
        assert all(s.proc.poll() is None for s in stack.services), "a service died"
    finally:
        await nc.close()


def test_demo_schedules_and_prints_the_summary(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """What `make run` does, small: every service up, demo scheduled, summary printed."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "shared.tools.cli.main",
            "demo",
            "--exit",
            "--nodes",
            "6",
            "--pods",
            "60",
            "--workdir",
            str(tmp_path / "demo"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "summary" in out.stdout
    bound = next(line for line in out.stdout.splitlines() if line.strip().startswith("bound"))
    unschedulable = next(
        line for line in out.stdout.splitlines() if line.strip().startswith("unschedulable")
    )
    got_bound = int(bound.split()[1].split("/")[0])
    got_pending = int(unschedulable.split()[1])
    assert got_bound + got_pending == 60
    assert got_bound > 0
    assert "double-bound   0" in out.stdout
