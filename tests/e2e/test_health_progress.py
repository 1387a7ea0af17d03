"""Liveness means progress: a watcher leader wedged on purpose (runtime/failpoints.py)
reports the stall on /readyz and /livez, gives up its lease, and its standby takes over
and binds every pod; the wedged process exits 1."""

from __future__ import annotations

import asyncio
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import nats
import pytest

from shared.tools.client import PodTracker, publish_all
from shared.tools.devstack import LocalStack, ServiceProc, running
from shared.tools.synthetic import make_node, make_pod
from tests.conftest import make_test_stack

pytestmark = pytest.mark.e2e

STALL_SECONDS = 3.0
PODS = 200
# the stall limit, then two renewals (0.5 s apart) and the standby's next try: a few
# seconds; the bound is generous (the measured time is printed)
TAKEOVER_TIMEOUT = 30.0


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    """Short leases (tests/conftest.py SHORT_ELECTION) and a 3 s stall limit, every
    service but the watcher: each test starts its watchers itself."""
    stack = make_test_stack(tmp_path / "stack")
    stack.env["KSCHED_STALL_SECONDS"] = str(STALL_SECONDS)
    with running(stack, ("queue", "cache", "worker", "binder")) as st:
        yield st


def probe(port: int, path: str) -> tuple[int, str] | None:
    """(status, body) of a GET, or None when the service does not answer in time."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=0.5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return None


async def eventually(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(check):
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        await asyncio.sleep(0.1)


async def start_wedged_leader_and_standby(
    stack: LocalStack, action: str
) -> tuple[ServiceProc, ServiceProc]:
    """A watcher leader that wedges on its first batch, and a healthy standby."""
    stack.service_env["watcher"] = {"KSCHED_FAILPOINTS": f"consume.handle={action}"}
    wedged = stack.start_service("watcher")
    await eventually("the first watcher leads", lambda: stack.leader("watcher") is wedged, 30)
    stack.service_env["watcher"] = {}
    standby = stack.start_service("watcher")
    await eventually(
        "the second watcher stands by",
        lambda: probe(standby.http_port, "/readyz") == (200, "ok"),
        30,
    )
    assert stack.leader("watcher") is wedged
    return wedged, standby


async def wedge_and_fail_over(stack: LocalStack, action: str) -> list[tuple[str, int, str]]:
    """Publish nodes and pods to a stack whose watcher leader wedges on them; wait for
    its standby to lead and for every pod to bind once. Returns what the wedged leader's
    /readyz and /livez answered meanwhile: (path, status, body), None status 0."""
    wedged, standby = await start_wedged_leader_and_standby(stack, action)
    nc = await nats.connect(stack.nats_url)
    answers: list[tuple[str, int, str]] = []

    def poll() -> bool:
        """Probe the wedged leader; True once the standby leads."""
        for path in ("/readyz", "/livez"):
            got = probe(wedged.http_port, path)
            answers.append((path, *(got or (0, ""))))
        return stack.leader("watcher") is standby

    try:
        tracker = PodTracker()
        await tracker.start(nc)
        js = nc.jetstream()
        started = time.monotonic()
        await publish_all(js, [make_node(f"n{i}", cpu="16", memory="64Gi") for i in range(4)])
        await publish_all(js, [make_pod(f"p-{i}", cpu="100m") for i in range(PODS)])
        await eventually("the standby leads", poll, TAKEOVER_TIMEOUT)
        took = time.monotonic() - started
        print(f"watcher ({action}): the standby leads {took:.1f} s after the wedge")
        assert await asyncio.to_thread(wedged.proc.wait, 15) == 1
        assert await tracker.wait_until(lambda t: len(t.bound()) == PODS, timeout=60), (
            f"{len(tracker.bound())} of {PODS} bound"
        )
        assert all(v.bind_count == 1 for v in tracker.pods.values())
    finally:
        await nc.close()
    return answers


async def test_a_leader_whose_handler_hangs_steps_down(stack: LocalStack) -> None:
    """The batch never finishes while the loop turns: both probes say so, with the
    reason, until the leader gives its lease up and exits."""
    answers = await wedge_and_fail_over(stack, "hang")
    stalled = "stalled: handling a batch from consumer watcher-"
    for path in ("/readyz", "/livez"):
        assert any(
            p == path and status == 503 and body.startswith(stalled) for p, status, body in answers
        ), f"{path} never said the watcher is stalled: {sorted(set(answers))}"


async def test_a_leader_whose_event_loop_is_blocked_steps_down(stack: LocalStack) -> None:
    """The loop is frozen, the lease thread lives: it gives the lease up, and since
    the loop cannot stop the process, exits it. The probes get no answer meanwhile (a
    liveness probe's timeout)."""
    answers = await wedge_and_fail_over(stack, "block")
    assert any(status == 0 for _, status, _ in answers)
