"""The preemption scenarios' cluster: a fresh stack whose nodes are full of
priority-0 pods, so that any pod of higher priority must preempt."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import nats
from nats.aio.client import Client as NATS

from shared.tools.client import PodTracker, publish_all
from shared.tools.devstack import running
from shared.tools.synthetic import make_node, make_pod
from tests.conftest import make_test_stack


@contextlib.asynccontextmanager
async def full_cluster(
    workers: int, workdir: Path, nodes: int, pods_per_node: int
) -> AsyncIterator[tuple[NATS, PodTracker]]:
    """A stack with `workers` workers and `nodes` 4-cpu nodes (node-N), each holding
    `pods_per_node` bound 1-cpu priority-0 pods (low-N-I); its client and a tracker."""
    stack = make_test_stack(workdir)
    stack.workers = workers
    with running(stack) as st:
        nc = await nats.connect(st.nats_url)
        try:
            tracker = PodTracker()
            await tracker.start(nc)
            js = nc.jetstream()
            await publish_all(js, [make_node(f"node-{n}", cpu="4") for n in range(nodes)])
            low = [
                make_pod(f"low-{n}-{i}", cpu="1", priority=0, node=f"node-{n}")
                for n in range(nodes)
                for i in range(pods_per_node)
            ]
            await publish_all(js, low)
            assert await tracker.wait_until(lambda t: len(t.bound()) == len(low), timeout=30)
            yield nc, tracker
        finally:
            await nc.close()
