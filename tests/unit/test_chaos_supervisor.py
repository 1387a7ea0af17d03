"""The chaos monkey's supervisor restarts a killed replica of a watcher or queue shard
into that same shard (shared/tools/chaos.py, shared/tools/devstack.py).

Dealt round-robin by count, the restart of shard 0's replica out of [0, 1, 0, 1] went to
shard 1: over a sharded chaos run a shard could be left without a replica, its pods
never scheduled. The replicas here are real processes that only sleep: what is checked
is the stack's bookkeeping and the KSCHED_SHARD each replica is started with."""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.tools import devstack
from shared.tools.chaos import ChaosConfig, ChaosReport, Monkey
from shared.tools.devstack import LocalStack

STARTED_IN: dict[int, str | None] = {}  # pid -> the KSCHED_SHARD it was started with


def sleeper(
    args: list[str], log_path: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """What devstack spawns instead of a service: a process that sleeps."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    STARTED_IN[proc.pid] = (env or {}).get("KSCHED_SHARD")
    return proc


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalStack]:
    """Real nats-server and redis-server (their URLs go to every replica); two watcher
    shards with a standby each, as the sharded chaos test runs them."""
    monkeypatch.setattr(devstack, "spawn", sleeper)
    st = LocalStack(tmp_path, standbys=1, shards=2)
    try:
        st.start_servers()
        for _ in range(st.replicas("watcher")):
            st.start_service("watcher")
        yield st
    finally:
        st.stop_services()
        st.stop()


def shards_of(stack: LocalStack) -> list[int | None]:
    return sorted(s.shard for s in stack.services)  # type: ignore[type-var]


async def supervise_once(stack: LocalStack) -> ChaosReport:
    report = ChaosReport(ChaosConfig())
    task = asyncio.create_task(Monkey(stack, report, random.Random(1)).supervise())
    while report.restarts == 0:
        await asyncio.sleep(0.05)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return report


async def test_a_killed_replica_comes_back_in_its_own_shard(stack: LocalStack) -> None:
    assert shards_of(stack) == [0, 0, 1, 1]
    victim = stack.services[0]  # shard 0's leader-to-be
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait()

    await supervise_once(stack)

    assert shards_of(stack) == [0, 0, 1, 1]
    assert sorted(STARTED_IN[s.proc.pid] or "" for s in stack.services) == ["0", "0", "1", "1"]


def test_a_replica_named_into_a_shard_is_started_there(stack: LocalStack) -> None:
    svc = stack.start_service("watcher", shard=1)
    assert svc.shard == 1 and STARTED_IN[svc.proc.pid] == "1"
    assert stack.start_service("cache", shard=1).shard is None  # the cache is not sharded
