"""Test harness: real nats-server and redis-server on free ports, services as processes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NATS

from shared.client import PodTracker
from shared.devstack import LocalStack


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    """The whole ksched: both servers and the five services, fresh for each test."""
    st = LocalStack(
        tmp_path / "stack",
        workers=2,
        binders=2,
        # short leases so that the kill tests recover quickly
        env={"KSCHED_QUEUE_LEASE_SECONDS": "3", "KSCHED_LOG_LEVEL": "debug"},
    )
    try:
        st.start_servers()
        st.start_services()
        st.wait_ready()
        yield st
    finally:
        st.stop()


@pytest.fixture
async def nc(stack: LocalStack) -> AsyncIterator[NATS]:
    client = await nats.connect(stack.nats_url)
    yield client
    await client.close()


@pytest.fixture
async def tracker(nc: NATS) -> PodTracker:
    t = PodTracker()
    await t.start(nc)
    return t
