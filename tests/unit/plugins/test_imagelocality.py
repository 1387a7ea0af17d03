"""ImageLocality: image name normalization, init containers, spread scaling and args."""

from __future__ import annotations

from typing import Any

import pytest

from shared.config import ConfigError
from shared.framework.cycle_state import CycleState
from shared.framework.handle import Handle
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins import imagelocality as il

MB = 1024 * 1024


def node(name: str, images: dict[str, int]) -> NodeInfo:
    info = NodeInfo(name)
    status = {"images": [{"names": [n], "sizeBytes": size} for n, size in images.items()]}
    info.set_node({"metadata": {"name": name}, "status": status})
    return info


def pod(containers: list[str], init: list[str] | None = None) -> PodInfo:
    spec: dict[str, Any] = {
        "containers": [{"name": f"c{i}", "image": im} for i, im in enumerate(containers)]
    }
    if init:
        spec["initContainers"] = [{"name": f"i{i}", "image": im} for i, im in enumerate(init)]
    return PodInfo.of({"metadata": {"name": "p"}, "spec": spec})


def scores(p: PodInfo, nodes: list[NodeInfo]) -> dict[str, int]:
    snapshot = ClusterSnapshot(nodes)
    snapshot.fill_image_states()
    plugin = il.new({}, Handle(snapshot=snapshot))
    return {n.name: plugin.score(CycleState(), p, n)[0] for n in nodes}


@pytest.mark.parametrize(
    ("image", "want"),
    [
        ("nginx", "nginx:latest"),
        ("nginx:1.25", "nginx:1.25"),
        ("registry:5000/nginx", "registry:5000/nginx:latest"),
        ("registry:5000/nginx:1.25", "registry:5000/nginx:1.25"),
        ("nginx@sha256:abc", "nginx@sha256:abc"),
    ],
)
def test_normalized_image_name(image: str, want: str) -> None:
    assert il.normalized_image_name(image) == want


def test_spread_scales_the_score() -> None:
    # The 500Mi image is on one of two nodes: it counts for 250Mi there.
    nodes = [node("a", {"big:latest": 500 * MB}), node("b", {})]
    want = 100 * (250 * MB - il.MIN_THRESHOLD) // (1000 * MB - il.MIN_THRESHOLD)
    assert scores(pod(["big"]), nodes) == {"a": want, "b": 0}


def test_init_containers_count() -> None:
    # Each container raises the upper threshold by 1000Mi; init containers' images count.
    nodes = [node("a", {"init:v1": 500 * MB, "app:v1": 500 * MB})]
    both = 100 * (1000 - 23) // (2000 - 23)
    assert scores(pod(["app:v1"], init=["init:v1"]), nodes) == {"a": both}
    assert scores(pod(["app:v1", "other:v1"]), nodes) == {"a": 100 * (500 - 23) // (2000 - 23)}


def test_pod_without_containers_scores_zero() -> None:
    assert scores(pod([]), [node("a", {"x:latest": 5000 * MB})]) == {"a": 0}


def test_args_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"pluginConfig\[ImageLocality\]\.args\.x: unknown field"):
        il.new({"x": 1}, Handle())
