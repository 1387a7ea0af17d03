"""A run with one service killed (SIGKILL) part way: every pod must still bind, once."""

from __future__ import annotations

import signal

from nats.aio.client import Client as NATS

from shared.tools.client import PodTracker, publish_all
from shared.tools.devstack import LocalStack
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
