"""shared/sharding.py computes the partition nats-server's subject mapping gives each
pod subject: a real nats-server with `mapping_config()`, names of every shape a DNS
subdomain allows (dots included), each mapped subject compared with the prediction;
the services' probe reads the partition count off that server, and none off a server
without the mapping."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import nats
import pytest
from nats.aio.msg import Msg

from shared.runtime.partitions import probe_partitions
from shared.sharding import PARTITIONS, mapping_config, partitioned_pod_subject
from shared.subjects import PARTITIONED_PODS_PREFIX, PODS_PREFIX
from shared.tools.servers import start_nats

pytestmark = pytest.mark.e2e

ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


def dns_name(rng: random.Random) -> str:
    labels = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        inner = "".join(rng.choice(ALPHABET + "-") for _ in range(rng.randint(0, 20)))
        labels.append(rng.choice(ALPHABET) + inner.strip("-") + rng.choice(ALPHABET))
    return ".".join(labels)


async def test_the_server_puts_each_subject_in_the_predicted_partition(tmp_path: Path) -> None:
    config = tmp_path / "nats.conf"
    config.write_text(mapping_config())
    server = start_nats(tmp_path, config=config)
    try:
        nc = await nats.connect(f"nats://127.0.0.1:{server.port}")
        seen: list[str] = []

        async def record(msg: Msg) -> None:
            seen.append(msg.subject)

        await nc.subscribe(f"{PARTITIONED_PODS_PREFIX}.>", cb=record)
        await nc.subscribe(f"{PODS_PREFIX}.>", cb=record)  # none may stay unmapped
        rng = random.Random(21)
        expected: set[str] = set()
        for i in range(800):
            ns, pod = f"ns-{i % 13}", dns_name(rng)
            await nc.publish(f"{PODS_PREFIX}.{ns}.{pod}", b"")
            expected.add(partitioned_pod_subject(ns, pod))
        await nc.flush()
        for _ in range(100):
            if len(set(seen)) >= len(expected):
                break
            await asyncio.sleep(0.05)
        probed = await probe_partitions(nc)
        await nc.close()
    finally:
        server.stop()
    assert set(seen) == expected
    used = {int(s.split(".")[3]) for s in seen}
    assert len(used) > PARTITIONS // 2  # spread, not one bucket
    assert probed == PARTITIONS


async def test_a_server_without_the_mapping_is_probed_as_unmapped(tmp_path: Path) -> None:
    server = start_nats(tmp_path)
    try:
        nc = await nats.connect(f"nats://127.0.0.1:{server.port}")
        assert await probe_partitions(nc) is None
        await nc.close()
    finally:
        server.stop()
