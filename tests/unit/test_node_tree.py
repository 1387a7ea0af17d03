"""The nodeTree order: zones interleaved so that sampling spreads over zones."""

from __future__ import annotations

from shared.cli.workload import make_node
from shared.framework.node_tree import node_tree_order, zone_key
from shared.framework.types import NodeInfo


def info(name: str, zone: str | None, region: str | None = None) -> NodeInfo:
    raw = make_node(name)
    labels = raw["metadata"]["labels"]
    labels.pop("topology.kubernetes.io/zone")
    if zone is not None:
        labels["topology.kubernetes.io/zone"] = zone
    if region is not None:
        labels["topology.kubernetes.io/region"] = region
    node = NodeInfo(name)
    node.set_node(raw)
    return node


def test_zones_are_interleaved_round_robin() -> None:
    nodes = [
        info("a1", "a"),
        info("a2", "a"),
        info("a3", "a"),
        info("b1", "b"),
        info("x1", None),
        info("x2", None),
    ]
    # Zone keys sort as "" (no zone), then ":\x00:a", ":\x00:b".
    order = [n.name for n in node_tree_order(reversed(nodes))]
    assert order == ["x1", "a1", "b1", "x2", "a2", "a3"]


def test_zone_key_includes_the_region() -> None:
    assert zone_key({}) == ""
    assert zone_key({"topology.kubernetes.io/zone": "z"}) == ":\x00:z"
    labels = {"topology.kubernetes.io/zone": "z", "topology.kubernetes.io/region": "r"}
    assert zone_key(labels) == "r:\x00:z"
    assert node_tree_order([info("n", "z", "r1"), info("m", "z", "r0")])[0].name == "m"
