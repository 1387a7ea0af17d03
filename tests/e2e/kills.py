"""A run with one service killed (SIGKILL) part way: every pod must still bind, once."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from nats.aio.client import Client as NATS

from shared.tools.chaos import publish_new
from shared.tools.client import PodTracker, publish_all
from shared.tools.devstack import SHARDED, LocalStack
from shared.tools.synthetic import make_node, make_pod


async def run_and_kill(
    stack: LocalStack,
    nc: NATS,
    tracker: PodTracker,
    service: str,
    *,
    nodes: int,
    node_cpu: str,
    pods: int,
    kill_after: int,
) -> None:
    """Publish `nodes` and `pods` (100m each), kill one `service` once `kill_after` pods
    are bound, then wait for all of them: each bound exactly once."""
    js = nc.jetstream()
    await publish_all(js, [make_node(f"n{i}", cpu=node_cpu, memory="256Gi") for i in range(nodes)])
    await publish_all(js, [make_pod(f"p-{i}", cpu="100m", memory="64Mi") for i in range(pods)])
    assert await tracker.wait_until(lambda t: len(t.bound()) >= kill_after, timeout=30)
    victim = next(s for s in stack.services if s.name == service)
    victim.proc.send_signal(signal.SIGKILL)

    assert await tracker.wait_until(lambda t: len(t.bound()) == pods, timeout=45), (
        f"{len(tracker.bound())} of {pods} bound"
    )
    assert all(v.bind_count == 1 for v in tracker.pods.values())


def kill_and_restart(stack: LocalStack, service: str) -> None:
    """SIGKILL every instance of `service`, then start one new (one per shard of a sharded
    service, shared/tools/devstack.py) and wait until it is ready."""
    for victim in [s for s in stack.services if s.name == service]:
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait()
        stack.services.remove(victim)
    for _ in range(stack.shards if service in SHARDED else 1):
        stack.start_service(service)
    stack.wait_ready()


async def publish_until_bound(
    nc: NATS, nodes: list[dict[str, Any]], pods: list[dict[str, Any]], bound: int
) -> tuple[PodTracker, asyncio.Task[None]]:
    """Publish `nodes`, then start publishing `pods`, 40 at a time, each once (retrying
    through a server's failover), and return once `bound` of them are bound: time to
    kill something under load. The returned task goes on publishing the rest."""
    js = nc.jetstream(timeout=5)
    tracker = PodTracker()
    await tracker.start(nc)
    await publish_all(js, nodes)

    async def publish() -> None:
        for start in range(0, len(pods), 40):
            await asyncio.gather(*(publish_new(js, p) for p in pods[start : start + 40]))

    publishing = asyncio.create_task(publish())
    assert await tracker.wait_until(lambda t: len(t.bound()) >= bound, timeout=60)
    return tracker, publishing
