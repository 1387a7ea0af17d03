"""The nodeTree order: zones interleaved so that sampling spreads over zones."""

from __future__ import annotations

from shared.framework.node_tree import node_tree_order
from shared.framework.types import NodeInfo, zone_key
from shared.tools.synthetic import make_node


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


def test_a_nodes_zone_and_image_sizes_follow_a_new_node_object() -> None:
    """Both are memoized per node object (a snapshot rebuild reads them for every node);
    a new object is read again, and a copy shares what was read."""
    node = info("n", "a")
    raw = make_node("n", zone="b")
    raw["status"]["images"] = [{"names": ["img:1", "img:latest"], "sizeBytes": 5}]
    assert (node.zone, node.image_sizes) == (":\x00:a", {})
    node.set_node(raw)
    assert (node.zone, node.image_sizes) == (":\x00:b", {"img:1": 5, "img:latest": 5})
    copy = node.clone()
    assert copy.image_sizes is node.image_sizes
    copy.set_node(make_node("n", zone="c"))
    assert (copy.zone, copy.image_sizes) == (":\x00:c", {})
    assert node.zone == ":\x00:b"
