"""shared/sharding.py computes the partition nats-server's subject mapping gives each
pod and node subject: a real nats-server with `mapping_config()`, names of every shape
a DNS subdomain allows (dots included), each mapped subject compared with the
prediction."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import nats
import pytest
from nats.aio.msg import Msg

from shared.sharding import PARTITIONS, mapping_config, node_partition, pod_partition
from shared.subjects import CLUSTER_PREFIX, NODES_PREFIX, PODS_PREFIX
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

        await nc.subscribe(f"{CLUSTER_PREFIX}.>", cb=record)
        rng = random.Random(21)
        expected: set[str] = set()
        for i in range(400):
            node, ns, pod = dns_name(rng), f"ns-{i % 13}", dns_name(rng)
            await nc.publish(f"{NODES_PREFIX}.{node}", b"")
            await nc.publish(f"{PODS_PREFIX}.{ns}.{pod}", b"")
            expected.add(f"{NODES_PREFIX}.{node_partition(node)}.{node}")
            expected.add(f"{PODS_PREFIX}.{pod_partition(ns, pod)}.{ns}.{pod}")
        await nc.flush()
        for _ in range(100):
            if len(set(seen)) >= len(expected):
                break
            await asyncio.sleep(0.05)
        await nc.close()
    finally:
        server.stop()
    assert set(seen) == expected
    used = {int(s.split(".")[3]) for s in seen}
    assert len(used) > PARTITIONS // 2  # spread, not one bucket
