"""NodeInfo records: a reader that applies a record to its previous NodeInfo ends up
with exactly what a fresh read gives, and parses only what changed."""

from __future__ import annotations

import random

from shared.framework.types import NodeInfo, PodInfo
from shared.tools.synthetic import make_node, make_pod


def _node(pods: list[PodInfo], cpu: str = "4") -> NodeInfo:
    info = NodeInfo("n1")
    info.set_node(make_node("n1", cpu=cpu))
    for pod in pods:
        info.add_pod(pod)
    return info


def _summary(info: NodeInfo) -> tuple:
    return (
        info.name,
        info.raw_node,
        info.allocatable,
        dict(info.requested),
        info.nonzero_cpu,
        info.nonzero_memory,
        dict(info.used_ports),
        info.generation,
        {k: (p.version, p.slim()) for k, p in info.pods.items()},
    )


def test_incremental_read_equals_fresh_read_over_random_changes() -> None:
    rng = random.Random(3)
    pods = {f"default/p{i}": PodInfo.of(make_pod(f"p{i}"), i + 1) for i in range(8)}
    writer = _node(list(pods.values()))
    reader = NodeInfo.from_record(writer.to_record())
    for step in range(200):
        choice = rng.random()
        name = f"p{rng.randrange(12)}"
        key = f"default/{name}"
        if choice < 0.4:
            cpu = rng.choice(["100m", "250m", "1"])
            writer.add_pod(PodInfo.of(make_pod(name, cpu=cpu), 1000 + step))
        elif choice < 0.7:
            writer.remove_pod(key)
        elif choice < 0.9 and key in writer.pods:  # re-versioned, same content (a binding)
            writer.add_pod(writer.pods[key].with_version(2000 + step))
        else:
            writer.set_node(make_node("n1", cpu=rng.choice(["4", "8"])))
        writer.generation = step + 1
        rec = writer.to_record()
        reader = NodeInfo.from_record(rec, reader)
        assert _summary(reader) == _summary(NodeInfo.from_record(rec))


def test_unchanged_pods_are_not_parsed_again() -> None:
    a, b = PodInfo.of(make_pod("a"), 1), PodInfo.of(make_pod("b"), 2)
    old = NodeInfo.from_record(_node([a, b]).to_record())
    parsed = old.node
    writer = _node([a.with_version(5), b, PodInfo.of(make_pod("c"), 3)])
    new = NodeInfo.from_record(writer.to_record(), old)
    assert new.pods["default/b"] is old.pods["default/b"]
    # re-versioned: the same raw pod and resources, nothing unpacked or summed again
    assert new.pods["default/a"].raw is old.pods["default/a"].raw
    assert new.pods["default/a"].resources is old.pods["default/a"].resources
    assert new.pods["default/a"].version == 5
    assert new.pods["default/c"]._pod is None  # from a record: parsed on first use
    assert new.pods["default/c"].pod.metadata.name == "c"
    assert new.node is parsed and old.pods.keys() == {"default/a", "default/b"}


def test_flags_read_the_raw_pod_as_the_model_does() -> None:
    plain = PodInfo.of_slim(PodInfo.of(make_pod("x")).slim_bytes, 1)
    assert not plain.has_affinity and not plain.has_required_anti_affinity
    assert plain._pod is None  # asking did not parse it
    raw = make_pod("y")
    raw["spec"]["affinity"] = {"podAntiAffinity": {}}
    assert PodInfo.of(raw).has_affinity and not PodInfo.of(raw).has_required_anti_affinity
    term = {"labelSelector": {}, "topologyKey": "kubernetes.io/hostname"}
    raw["spec"]["affinity"]["podAntiAffinity"] = {
        "requiredDuringSchedulingIgnoredDuringExecution": [term]
    }
    assert PodInfo.of(raw).has_required_anti_affinity
    assert (
        "nodeName" not in PodInfo.of(raw | {"spec": raw["spec"] | {"nodeName": "n"}}).slim()["spec"]
    )
