"""A leader frozen (SIGSTOP) past its lease, against a real nats-server and Redis, with
two candidate processes (tests/e2e/lease_candidate.py, the real runtime): the standby
takes over with a higher epoch, and the thawed leader's writes are refused."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from shared import keys
from shared.runtime.leasestore import LeaseStore
from shared.tools.devstack import Server
from tests.e2e.lease_candidate import SERVICE, WRITES

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ELECTION = {  # lease 1 s, renew deadline 0.6 s, retry 0.2 s
    "KSCHED_LEADER_ELECT_LEASE_DURATION": "1",
    "KSCHED_LEADER_ELECT_RENEW_DEADLINE": "0.6",
    "KSCHED_LEADER_ELECT_RETRY_PERIOD": "0.2",
}
FROZEN_SECONDS = 3.0  # well past the lease


@dataclass
class Candidate:
    identity: str
    proc: subprocess.Popen[bytes]
    out: Path
    log: Path

    def said(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out.read_text().splitlines() if line]

    def wait_until(self, what: str, timeout: float = 20) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            found = [e for e in self.said() if what in e]
            if found:
                return found[0]
            assert self.proc.poll() is None, f"{self.identity} exited: {self.log}"
            assert time.monotonic() < deadline, f"{self.identity} never said {what}: {self.log}"
            time.sleep(0.02)

    def wait_logged(self, text: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log.read_text():
            assert self.proc.poll() is None, f"{self.identity} exited: {self.log}"
            assert time.monotonic() < deadline, f"{self.identity} never logged {text!r}"
            time.sleep(0.02)


Start = Callable[[str], Candidate]


@pytest.fixture
def start_candidate(tmp_path: Path, nats_server: Server, redis_server: Server) -> Iterator[Start]:
    started: list[Candidate] = []

    def start(identity: str) -> Candidate:
        env = {
            **os.environ,
            "KSCHED_NATS_URL": f"nats://127.0.0.1:{nats_server.port}",
            "KSCHED_REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
            "KSCHED_HTTP_HOST": "127.0.0.1",
            "KSCHED_HTTP_PORT": "0",
            "KSCHED_LEADER_ELECT_IDENTITY": identity,
            **ELECTION,
        }
        out, log = tmp_path / f"{identity}.out", tmp_path / f"{identity}.log"
        with out.open("wb") as stdout, log.open("wb") as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.e2e.lease_candidate"],
                stdout=stdout,
                stderr=stderr,
                env=env,
                cwd=ROOT,
            )
        started.append(Candidate(identity, proc, out, log))
        return started[-1]

    yield start
    for c in started:
        if c.proc.poll() is None:
            c.proc.send_signal(signal.SIGCONT)
            c.proc.kill()
            c.proc.wait()


async def landed(redis: aioredis.Redis, identity: str) -> int:
    return int(await redis.hget(WRITES, identity) or 0)


async def test_a_frozen_leader_is_succeeded_and_its_writes_refused_once_thawed(
    start_candidate: Start, store: LeaseStore, redis: aioredis.Redis
) -> None:
    leader = start_candidate("a")
    epoch = leader.wait_until("leading", timeout=30)["leading"]
    standby = start_candidate("b")
    standby.wait_logged("standing by for the lease", timeout=30)
    while await landed(redis, leader.identity) == 0:
        await asyncio.sleep(0.01)

    leader.proc.send_signal(signal.SIGSTOP)
    succeeded = standby.wait_until("leading")["leading"]
    assert succeeded > epoch
    record, _ = await store.read(SERVICE)
    assert record is not None and (record.holder, record.epoch) == (standby.identity, succeeded)
    assert int(await redis.get(keys.lease_epoch_key(SERVICE)) or 0) == succeeded
    await asyncio.sleep(FROZEN_SECONDS)  # frozen well past the lease
    before_thaw = await landed(redis, leader.identity)

    leader.proc.send_signal(signal.SIGCONT)
    assert leader.proc.wait(20) == 1  # deposed: it exits, to stand by when restarted
    ending = leader.said()[-1]
    assert "fenced" in ending or "lost" in ending, ending
    assert await landed(redis, leader.identity) == before_thaw  # nothing of it landed
    successor_writes = await landed(redis, standby.identity)
    while await landed(redis, standby.identity) <= successor_writes:  # the successor goes on
        assert standby.proc.poll() is None, standby.log
        await asyncio.sleep(0.01)
