"""NodeResourcesBalancedAllocation: args defaults and validation, the best-effort Skip,
and the standard deviation over more than two resources."""

from __future__ import annotations

from typing import Any

import pytest

from shared.config import ConfigError
from shared.framework.cycle_state import CycleState
from shared.framework.handle import Handle
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import Code
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.noderesources import balanced_allocation as ba
from shared.plugins.noderesources.args import ResourceSpec


def node(allocatable: dict[str, str]) -> NodeInfo:
    info = NodeInfo("n")
    info.set_node({"metadata": {"name": "n"}, "status": {"allocatable": allocatable}})
    return info


def pod(**requests: str) -> PodInfo:
    container = {"name": "c", "resources": {"requests": requests}}
    return PodInfo.of({"metadata": {"name": "p"}, "spec": {"containers": [container]}})


def plugin(args: dict[str, Any] | None = None) -> ba.BalancedAllocation:
    return ba.new(args or {}, Handle(ClusterSnapshot([])))


@pytest.mark.parametrize(
    ("args", "want"),
    [
        ({}, (("cpu", 1), ("memory", 1))),
        ({"resources": []}, (("cpu", 1), ("memory", 1))),
        (
            {"resources": [{"name": "cpu"}, {"name": "x.io/y", "weight": 0}]},
            (("cpu", 1), ("x.io/y", 1)),
        ),
    ],
)
def test_args_defaults(args: dict[str, Any], want: tuple) -> None:
    assert ba.parse_args(args).resources == tuple(ResourceSpec(n, w) for n, w in want)


@pytest.mark.parametrize(
    ("args", "field", "message"),
    [
        ({"resources": [{"name": "cpu", "weight": 2}]}, "resources[0].weight", "must be 1"),
        ({"resources": [{"name": "cpu"}, {"name": "cpu"}]}, "resources[1].name", "Duplicate"),
        ({"scoringStrategy": {}}, "args.scoringStrategy", "unknown field"),
        ({"resources": {"name": "cpu"}}, "args.resources", "must be a list"),
    ],
)
def test_args_errors(args: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        ba.parse_args(args)
    text = str(err.value)
    assert text.startswith("pluginConfig[NodeResourcesBalancedAllocation].args.")
    assert field in text and message in text


def test_best_effort_pod_skips() -> None:
    n = node({"cpu": "4", "memory": "4Gi"})
    assert plugin().pre_score(CycleState(), pod(), [n]).code == Code.SKIP
    # Without PreScore, Score gives a best-effort pod 0.
    assert plugin().score(CycleState(), pod(), n) == (0, ba.SUCCESS)


@pytest.mark.parametrize(
    ("args", "requests", "want"),
    [
        # Fractions 0.25 (cpu) and 0.75 (memory): std 0.25.
        ({}, {"cpu": "1", "memory": "3Gi"}, 75),
        # Requested, not non-zero, amounts: memory 0 is a fraction of 0.
        ({}, {"cpu": "2"}, 75),
        # Fractions are capped at 1.
        ({}, {"cpu": "8", "memory": "4Gi"}, 100),
        # Three resources: fractions 0.25, 0.75, 0.5; std sqrt(1/24).
        (
            {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "example.com/gpu"}]},
            {"cpu": "1", "memory": "3Gi", "example.com/gpu": "2"},
            int((1 - (1 / 24) ** 0.5) * 100),
        ),
        # An extended resource the pod does not request is left out.
        (
            {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "example.com/gpu"}]},
            {"cpu": "1", "memory": "3Gi"},
            75,
        ),
    ],
)
def test_score(args: dict[str, Any], requests: dict[str, str], want: int) -> None:
    n = node({"cpu": "4", "memory": "4Gi", "example.com/gpu": "4"})
    plugin_, state, p = plugin(args), CycleState(), pod(**requests)
    assert plugin_.pre_score(state, p, [n]).ok
    assert plugin_.score(state, p, n) == (want, ba.SUCCESS)
    assert plugin_.score(CycleState(), p, n) == (want, ba.SUCCESS)


def test_pod_level_requests_are_balanced_and_not_best_effort() -> None:
    # No container requests anything, the pod does: not skipped as best-effort, and
    # fractions 1/4 (cpu) and 1/4 (memory) balance perfectly.
    raw = {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [{"name": "c"}],
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        },
    }
    p, n, state = PodInfo.of(raw), node({"cpu": "4", "memory": "4Gi"}), CycleState()
    plugin_ = plugin()
    assert plugin_.pre_score(state, p, [n]).ok
    assert plugin_.score(state, p, n) == (100, ba.SUCCESS)
