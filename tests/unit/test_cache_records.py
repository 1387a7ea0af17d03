"""The cache's NodeInfo records assembled from parts packed once
(services/cache/records.py): byte for byte what packing NodeInfo.to_record gives,
through pods added, re-versioned, removed and node objects replaced."""

from __future__ import annotations

import random

from services.cache.records import NodeRecords
from shared.framework.types import NodeInfo, PodInfo
from shared.tools.synthetic import make_node, make_pod
from shared.wire import pack


def test_records_equal_the_packed_record_over_random_changes() -> None:
    rng = random.Random(5)
    records = NodeRecords()
    nodes = {name: NodeInfo(name) for name in ("n1", "n2")}
    for name, info in nodes.items():
        info.set_node(make_node(name))
    for step in range(300):
        info = nodes[rng.choice(list(nodes))]
        key = f"default/p{rng.randrange(10)}"
        choice = rng.random()
        if choice < 0.4:
            cpu = rng.choice(["100m", "250m", "1"])
            info.add_pod(PodInfo.of(make_pod(key.split("/")[1], cpu=cpu), 1000 + step))
        elif choice < 0.6:
            info.remove_pod(key)
            records.forget_pod(key)
        elif choice < 0.8 and key in info.pods:  # a binding: same pod, new version
            info.add_pod(info.pods[key].with_version(2000 + step))
        elif choice < 0.9:
            info.set_node(make_node(info.name, cpu=rng.choice(["4", "8"])))
        else:
            records.forget_node(info.name)
        info.generation = step + 1
        assert records.record(info) == pack(info.to_record())


def test_a_node_without_pods_or_object() -> None:
    info = NodeInfo("gone")
    records = NodeRecords()
    assert records.record(info) == pack(info.to_record())
    records.clear()
    info.set_node(make_node("gone"))
    assert records.record(info) == pack(info.to_record())
    assert records.node(info) == pack(info.raw_node)
