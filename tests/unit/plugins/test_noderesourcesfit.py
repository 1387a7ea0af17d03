"""NodeResourcesFit: args defaults and validation, ignored resources, status codes, and
scoring details the conformance vectors do not cover (Go integer division and rounding,
missing PreScore state)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.config import ConfigError
from shared.framework.cycle_state import CycleState
from shared.framework.handle import Handle
from shared.framework.interface import ClusterEvent
from shared.framework.normalize import go_div, go_round
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import Code
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.noderesources import fit
from shared.plugins.noderesources.args import ResourceSpec, ScoringStrategy
from shared.plugins.noderesources.resources import (
    is_extended_resource_name,
    is_scalar_resource_name,
)


def node(allocatable: dict[str, str], pods: int = 10, name: str = "n") -> NodeInfo:
    info = NodeInfo(name)
    alloc = {"pods": str(pods), **allocatable}
    info.set_node({"metadata": {"name": name}, "status": {"allocatable": alloc}})
    return info


def pod(name: str = "p", **requests: str) -> PodInfo:
    container = {"name": "c", "resources": {"requests": requests}}
    return PodInfo.of({"metadata": {"name": name}, "spec": {"containers": [container]}})


def plugin(args: dict[str, Any] | None = None) -> fit.NodeResourcesFit:
    return fit.new(args or {}, Handle(ClusterSnapshot([])))


def rtcr(*shape: tuple[int, int], resources: list[dict[str, Any]] | None = None) -> dict:
    return {
        "scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "resources": resources or [{"name": "cpu", "weight": 1}],
            "requestedToCapacityRatio": {
                "shape": [{"utilization": u, "score": s} for u, s in shape]
            },
        }
    }


# --- args -------------------------------------------------------------------------


def test_defaults() -> None:
    args = fit.parse_args({})
    assert args.scoring_strategy == ScoringStrategy(
        "LeastAllocated", (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))
    )
    assert args.ignored_resources == frozenset()


@pytest.mark.parametrize(
    ("strategy", "resources"),
    [
        ({"type": "MostAllocated"}, (("cpu", 1), ("memory", 1))),
        ({"type": "MostAllocated", "resources": []}, (("cpu", 1), ("memory", 1))),
        ({"type": "LeastAllocated", "resources": [{"name": "x.io/y"}]}, (("x.io/y", 1),)),
        ({"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 0}]}, (("cpu", 1),)),
    ],
)
def test_resource_defaults(strategy: dict[str, Any], resources: tuple) -> None:
    got = fit.parse_args({"scoringStrategy": strategy}).scoring_strategy.resources
    assert got == tuple(ResourceSpec(n, w) for n, w in resources)


@pytest.mark.parametrize(
    ("args", "field", "message"),
    [
        ({"bogus": 1}, "args.bogus", "unknown field"),
        ({"scoringStrategy": {"type": "Spread"}}, "scoringStrategy.type", "must be one of"),
        ({"scoringStrategy": {}}, "scoringStrategy.type", "LeastAllocated, MostAllocated"),
        (
            {
                "scoringStrategy": {
                    "type": "MostAllocated",
                    "resources": [{"name": "cpu", "weight": 101}],
                }
            },
            "scoringStrategy.resources[0].weight",
            "not in valid range (0, 100]",
        ),
        (
            {
                "scoringStrategy": {
                    "type": "MostAllocated",
                    "resources": [{"name": "cpu", "weight": -1}],
                }
            },
            "scoringStrategy.resources[0].weight",
            "not in valid range",
        ),
        (
            {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "w": 1}]}},
            "scoringStrategy.resources[0].w",
            "unknown field",
        ),
        (rtcr(), "requestedToCapacityRatio.shape", "at least one point"),
        (rtcr((0, 0), (0, 5)), "shape[1].utilization", "sorted in increasing order"),
        (rtcr((50, 0), (10, 5)), "shape[1].utilization", "sorted in increasing order"),
        (rtcr((0, 0), (101, 5)), "shape[1].utilization", "not in valid range [0, 100]"),
        (rtcr((0, 11)), "shape[0].score", "not in valid range [0, 10]"),
        (rtcr((0, -1)), "shape[0].score", "not in valid range [0, 10]"),
        (
            {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
            "scoringStrategy.requestedToCapacityRatio",
            "Required value",
        ),
        (
            {"ignoredResourceGroups": ["example.com/aaa"]},
            "ignoredResourceGroups[0]",
            "can't contain",
        ),
        ({"ignoredResources": ["-bad-"]}, "ignoredResources[0]", "Invalid value"),
        ({"ignoredResources": "example.com/a"}, "ignoredResources", "must be a list"),
    ],
)
def test_args_errors(args: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        fit.parse_args(args)
    text = str(err.value)
    assert text.startswith("pluginConfig[NodeResourcesFit].args.")
    assert field in text and message in text


# --- filter -----------------------------------------------------------------------


def filter_status(plugin_: fit.NodeResourcesFit, p: PodInfo, n: NodeInfo) -> tuple[Code, list]:
    state = CycleState()
    plugin_.pre_filter(state, p, [n])
    status = plugin_.filter(state, p, n)
    return status.code, status.reasons


GPU_NODE = {"cpu": "4", "memory": "4Gi", "example.com/gpu": "2"}


@pytest.mark.parametrize(
    ("args", "requests", "want"),
    [
        # A request the node could hold once other pods leave: Unschedulable.
        ({}, {"cpu": "3"}, (Code.UNSCHEDULABLE, ["Insufficient cpu"])),
        # More than the node's whole allocatable: UnschedulableAndUnresolvable.
        ({}, {"cpu": "5"}, (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["Insufficient cpu"])),
        (
            {},
            {"cpu": "3", "memory": "5Gi"},
            (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["Insufficient cpu", "Insufficient memory"]),
        ),
        ({"ignoredResources": ["example.com/gpu"]}, {"example.com/gpu": "9"}, (Code.SUCCESS, [])),
        ({"ignoredResourceGroups": ["example.com"]}, {"example.com/gpu": "9"}, (Code.SUCCESS, [])),
        (
            {"ignoredResourceGroups": ["other.com"]},
            {"example.com/gpu": "9"},
            (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["Insufficient example.com/gpu"]),
        ),
        # Only extended resources can be ignored; hugepages are always checked.
        (
            {"ignoredResources": ["hugepages-2Mi"]},
            {"hugepages-2Mi": "4Mi"},
            (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["Insufficient hugepages-2Mi"]),
        ),
        # A name that is not a scalar resource is not accounted by kube-scheduler.
        ({}, {"foo": "100"}, (Code.SUCCESS, [])),
    ],
)
def test_filter(args: dict[str, Any], requests: dict[str, str], want: tuple) -> None:
    n = node(GPU_NODE)
    n.add_pod(pod("existing", cpu="2", memory="1Gi"))
    assert filter_status(plugin(args), pod(**requests), n) == want


def test_too_many_pods_is_resolvable() -> None:
    n = node({"cpu": "4"}, pods=1)
    n.add_pod(pod("existing"))
    assert filter_status(plugin(), pod(cpu="5"), n) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        ["Too many pods", "Insufficient cpu"],
    )
    assert filter_status(plugin(), pod(cpu="1"), n) == (Code.UNSCHEDULABLE, ["Too many pods"])


AMOUNTS = st.dictionaries(st.sampled_from(["cpu", "memory", "example.com/gpu"]), st.integers(0, 4))


@given(wanted=AMOUNTS, num_pods=st.integers(0, 4), requested=AMOUNTS, allocatable=AMOUNTS)
def test_lacks_any_is_the_verdict_of_fits_amounts(
    wanted: dict[str, int], num_pods: int, requested: dict[str, int], allocatable: dict[str, int]
) -> None:
    args = (list(wanted.items()), num_pods, requested, {"pods": 3, **allocatable})
    assert fit.lacks_any(*args) == bool(fit.fits_amounts(*args))


def test_filter_without_prefilter_recomputes() -> None:
    status = plugin().filter(CycleState(), pod(cpu="3"), node({"cpu": "2"}))
    assert status.reasons == ["Insufficient cpu"]


@pytest.mark.parametrize(
    ("name", "scalar", "extended"),
    [
        ("example.com/gpu", True, True),
        ("hugepages-1Gi", True, False),
        ("kubernetes.io/something", True, False),
        ("attachable-volumes-aws-ebs", True, False),
        ("cpu", False, False),
        ("pods", False, False),
        ("requests.example.com/gpu", False, False),
        ("example.com/-bad", False, False),
    ],
)
def test_resource_name_kinds(name: str, scalar: bool, extended: bool) -> None:
    assert is_scalar_resource_name(name) is scalar
    assert is_extended_resource_name(name) is extended


# --- score ------------------------------------------------------------------------


def score(args: dict[str, Any], p: PodInfo, n: NodeInfo, pre_score: bool = True) -> int:
    plugin_ = plugin(args)
    state = CycleState()
    if pre_score:
        assert plugin_.pre_score(state, p, [n]).ok
    value, status = plugin_.score(state, p, n)
    assert status.ok
    return value


def test_score_without_prescore_recomputes() -> None:
    n = node({"cpu": "4", "memory": "4Gi"})
    p = pod(cpu="1", memory="1Gi")
    assert score({}, p, n, pre_score=False) == score({}, p, n) == 75


def test_least_allocated_counts_nonzero_defaults() -> None:
    # A pod without requests counts as 100m cpu and 200Mi memory.
    n = node({"cpu": "1", "memory": "1000Mi"})
    assert score({}, pod(), n) == ((1000 - 100) * 100 // 1000 + (1000 - 200) * 100 // 1000) // 2


def test_most_allocated_caps_at_capacity() -> None:
    args = {"scoringStrategy": {"type": "MostAllocated"}}
    assert score(args, pod(cpu="8", memory="8Gi"), node({"cpu": "4", "memory": "4Gi"})) == 100


def test_extended_resource_not_requested_is_left_out() -> None:
    args = {
        "scoringStrategy": {
            "type": "LeastAllocated",
            "resources": [{"name": "cpu", "weight": 1}, {"name": "example.com/gpu", "weight": 5}],
        }
    }
    n = node({"cpu": "4", "memory": "4Gi", "example.com/gpu": "4"})
    assert score(args, pod(cpu="1"), n) == 75
    assert score(args, pod(cpu="1", **{"example.com/gpu": "4"}), n) == (75 * 1 + 0 * 5) // 6


def test_requested_to_capacity_ratio_truncates_toward_zero() -> None:
    # Falling shape 10 -> 0 over 0..30: at 10% Go computes 100 + (-100*10)/30 = 100 - 33.
    args = rtcr((0, 10), (30, 0))
    assert score(args, pod(cpu="100m"), node({"cpu": "1", "memory": "1Gi"})) == 67


def test_requested_to_capacity_ratio_rounds_half_away_from_zero() -> None:
    # cpu scores 50 (weight 1), memory 100 (weight 3): the mean 87.5 rounds to 88.
    resources = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 3}]
    args = rtcr((0, 0), (100, 10), resources=resources)
    n = node({"cpu": "1", "memory": "1Gi"})
    assert score(args, pod(cpu="500m", memory="1Gi"), n) == 88
    # A resource scoring 0 does not count toward the mean.
    assert score(args, pod(cpu="0", memory="512Mi"), n) == 50


def test_go_division_and_rounding() -> None:
    assert [go_div(a, b) for a, b in ((7, 2), (-7, 2), (7, -2), (0, -3))] == [3, -3, -3, 0]
    assert [go_round(x) for x in (0.5, 1.5, 2.5, -2.5, 2.49)] == [1, 2, 3, -3, 2]


def test_events_to_register() -> None:
    events = {e.event for e in plugin().events_to_register()}
    assert events == {
        ClusterEvent("Pod", "Delete"),
        ClusterEvent("Pod", "UpdatePodScaleDown"),
        ClusterEvent("Node", "Add"),
        ClusterEvent("Node", "UpdateNodeAllocatable"),
    }


# --- pod-level resources (spec.resources) -----------------------------------------


def level_pod(
    name: str = "p", containers: list[dict[str, str]] | None = None, **requests: str
) -> PodInfo:
    """A pod with pod-level `requests` and containers requesting `containers` (one each)."""
    spec = {
        "containers": [
            {"name": f"c{i}", "resources": {"requests": r}}
            for i, r in enumerate(containers or [{}])
        ],
        "resources": {"requests": requests},
    }
    return PodInfo.of({"metadata": {"name": name, "uid": name}, "spec": spec})


RTCR_RISING = rtcr((0, 0), (100, 10), resources=[{"name": "cpu"}, {"name": "memory"}])


@pytest.mark.parametrize(
    ("args", "want"),
    [
        # Requested 1 cpu and 1Gi of 4 and 4Gi: the pod's, not its container's 500m.
        ({}, 75),
        ({"scoringStrategy": {"type": "MostAllocated"}}, 25),
        (RTCR_RISING, 25),
    ],
    ids=["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"],
)
def test_strategies_score_pod_level_requests(args: dict[str, Any], want: int) -> None:
    p = level_pod(containers=[{"cpu": "500m"}], cpu="1", memory="1Gi")
    assert score(args, p, node({"cpu": "4", "memory": "4Gi"})) == want


def test_scoring_defaults_each_container_missing_a_request_the_pod_level_leaves_out() -> None:
    # calculatePodResourceRequest: 500m + the 100m default of the second container,
    # though NodeInfo counts this pod as 500m (calculateResource defaults no cpu here).
    p = level_pod(containers=[{"cpu": "500m"}, {}], memory="1Gi")
    n = node({"cpu": "1", "memory": "2Gi"})
    assert score({}, p, n) == ((1000 - 600) * 100 // 1000 + 50) // 2
    n.add_pod(p)
    assert (n.nonzero_cpu, n.requested["cpu"]) == (500, 500)


def test_filter_checks_pod_level_requests() -> None:
    n = node({"cpu": "900m", "memory": "4Gi"})
    docs_like = level_pod(containers=[{"cpu": "500m", "memory": "50Mi"}, {}], cpu="1")
    assert filter_status(plugin(), docs_like, n) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        ["Insufficient cpu"],
    )
    assert (
        filter_status(plugin(), docs_like, node({"cpu": "1", "memory": "4Gi"}))[0] == Code.SUCCESS
    )


# Test_isSchedulableAfterPodChange, its pod-level cases (InPlacePodVerticalScaling on).
@pytest.mark.parametrize(
    ("target", "old", "new", "queue"),
    [
        # skip-queue-on-other-pod-unrelated-pod-level-resource-scaled-down
        (("pod1", {"cpu": "1"}), ("pod2", {"memory": "2"}), ("pod2", {"memory": "1"}), False),
        # queue-on-other-pod-some-pod-level-resource-scale-down
        (("pod1", {"cpu": "1"}), ("pod2", {"cpu": "2"}), ("pod2", {"cpu": "1"}), True),
        # queue-on-target-pod-some-pod-level-resource-scale-down
        (("pod1", {"cpu": "1"}), ("pod1", {"cpu": "2"}), ("pod1", {"cpu": "1"}), True),
    ],
)
def test_pod_level_scale_down_hints(
    target: tuple[str, dict[str, str]],
    old: tuple[str, dict[str, str]],
    new: tuple[str, dict[str, str]],
    queue: bool,
) -> None:
    def made(name: str, requests: dict[str, str], bound: bool) -> PodInfo:
        spec: dict[str, Any] = {"resources": {"requests": requests}}
        if bound:
            spec["nodeName"] = "fake"
        return PodInfo.of({"metadata": {"name": name, "uid": name}, "spec": spec})

    other = old[0] != target[0]  # upstream binds the other pod to "fake", not the target
    hint = plugin().is_schedulable_after_pod_event(
        made(*target, bound=False), made(*old, bound=other), made(*new, bound=other)
    )
    assert hint is queue
