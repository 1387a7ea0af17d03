"""Profiles to plugins per extension point, with kube-scheduler v1's merge rules."""

from __future__ import annotations

from typing import Any

import pytest

from shared.config import ConfigError, parse_config
from shared.framework.cycle_state import CycleState
from shared.framework.handle import Handle
from shared.framework.interface import (
    BindPlugin,
    FilterPlugin,
    NodeScore,
    PermitPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueSortPlugin,
    ScorePlugin,
)
from shared.framework.profile import build_profile
from shared.framework.runtime import Framework
from shared.framework.schedule_one import num_feasible_nodes_to_find
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.waiting_pods import MAX_PERMIT_TIMEOUT

# --- stub plugins with the default plugins' extension points -------------------


class Base:
    def __init__(self, name: str, args: dict[str, Any]) -> None:
        self.name = name
        self.args = args


class Sort(Base, QueueSortPlugin):
    def less(self, a: Any, b: Any) -> bool:
        return bool(a.priority > b.priority)


class Filt(Base, FilterPlugin):
    def filter(self, state: CycleState, pod: Any, node: Any) -> Status:
        return SUCCESS


class Full(Base, PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin):
    def pre_filter(self, state: CycleState, pod: Any, nodes: Any) -> tuple[None, Status]:
        return None, SUCCESS

    def pre_filter_extensions(self) -> None:
        return None

    def filter(self, state: CycleState, pod: Any, node: Any) -> Status:
        return SUCCESS

    def pre_score(self, state: CycleState, pod: Any, nodes: Any) -> Status:
        return SUCCESS

    def score(self, state: CycleState, pod: Any, node: Any) -> tuple[int, Status]:
        return 10, SUCCESS

    def score_extensions(self) -> None:
        return None


class Scorer(Base, ScorePlugin):
    def score(self, state: CycleState, pod: Any, node: Any) -> tuple[int, Status]:
        return 1, SUCCESS

    def score_extensions(self) -> None:
        return None


class Preempt(Base, PostFilterPlugin):
    def post_filter(
        self, state: CycleState, pod: Any, node_to_status: dict[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        return None, Status(Code.UNSCHEDULABLE)


class Binder(Base, BindPlugin):
    async def bind(self, state: CycleState, pod: Any, node_name: str) -> Status:
        return SUCCESS


KINDS = {
    "PrioritySort": Sort,
    "SchedulingGates": Base,
    "NodeUnschedulable": Filt,
    "NodeName": Filt,
    "TaintToleration": Full,
    "NodeAffinity": Full,
    "NodePorts": Filt,
    "NodeResourcesFit": Full,
    "PodTopologySpread": Full,
    "InterPodAffinity": Full,
    "NodeResourcesBalancedAllocation": Scorer,
    "ImageLocality": Scorer,
    "DefaultPreemption": Preempt,
    "DefaultBinder": Binder,
    "Extra": Filt,
}
REGISTRY = {
    name: (lambda n, k: lambda args, h: k(n, args))(name, kind) for name, kind in KINDS.items()
}


def plugins_of(profile: dict[str, Any] | None = None):  # type: ignore[no-untyped-def]
    doc = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
    if profile is not None:
        doc["profiles"] = [profile]
    config = parse_config(doc)
    return build_profile(config.profiles[0], REGISTRY, Handle())


def names(plugins: list[Any]) -> list[str]:
    return [p.name for p in plugins]


def test_default_profile_order_and_weights() -> None:
    out = plugins_of()
    assert names(out.by_point["filter"]) == [
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
    ]
    assert out.weights == {
        "TaintToleration": 3,
        "NodeAffinity": 2,
        "NodeResourcesFit": 1,
        "PodTopologySpread": 2,
        "InterPodAffinity": 2,
        "NodeResourcesBalancedAllocation": 1,
        "ImageLocality": 1,
    }
    assert names(out.by_point["queueSort"]) == ["PrioritySort"]
    assert names(out.by_point["postFilter"]) == ["DefaultPreemption"]
    assert names(out.by_point["bind"]) == ["DefaultBinder"]


def test_disabling_a_plugin_at_one_extension_point() -> None:
    out = plugins_of({"plugins": {"score": {"disabled": [{"name": "ImageLocality"}]}}})
    assert "ImageLocality" not in names(out.by_point["score"])
    assert "ImageLocality" not in out.weights


def test_multipoint_reconfigured_default_keeps_its_place() -> None:
    out = plugins_of(
        {"plugins": {"multiPoint": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]}}}
    )
    assert out.weights["NodeResourcesFit"] == 5
    assert names(out.by_point["filter"]).index("NodeResourcesFit") == 5


def test_explicit_score_entry_overrides_and_goes_first() -> None:
    out = plugins_of({"plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": 4}]}}})
    assert names(out.by_point["score"])[0] == "ImageLocality"
    assert out.weights["ImageLocality"] == 4


def test_star_disables_every_default_at_that_point() -> None:
    out = plugins_of(
        {"plugins": {"filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeName"}]}}}
    )
    assert names(out.by_point["filter"]) == ["NodeName"]
    assert "TaintToleration" in names(out.by_point["score"])


def test_zero_weight_means_one() -> None:
    out = plugins_of(
        {"plugins": {"multiPoint": {"enabled": [{"name": "ImageLocality", "weight": 0}]}}}
    )
    assert out.weights["ImageLocality"] == 1


def test_args_reach_the_plugin() -> None:
    out = plugins_of({"pluginConfig": [{"name": "NodeAffinity", "args": {"x": 1}}]})
    assert out.instances["NodeAffinity"].args == {"x": 1}


def test_a_profile_builds_the_same_plugins_every_time() -> None:
    config = parse_config(
        {
            "profiles": [
                {
                    "plugins": {
                        "filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeName"}]},
                        "score": {"disabled": [{"name": "ImageLocality"}]},
                    }
                }
            ]
        }
    )
    first, again = (build_profile(config.profiles[0], REGISTRY, Handle()) for _ in range(2))
    assert names(again.by_point["filter"]) == ["NodeName"]
    assert "ImageLocality" not in names(again.by_point["score"])
    assert {p: names(ps) for p, ps in again.by_point.items()} == {
        p: names(ps) for p, ps in first.by_point.items()
    }


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        ({"plugins": {"filter": {"enabled": [{"name": "Nope"}]}}}, "unknown plugin 'Nope'"),
        ({"pluginConfig": [{"name": "Extra", "args": {}}]}, "plugins that are not enabled"),
        ({"plugins": {"queueSort": {"disabled": [{"name": "*"}]}}}, "exactly one queueSort"),
        ({"plugins": {"bind": {"disabled": [{"name": "*"}]}}}, "at least one bind"),
        (
            {"plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": -1}]}}},
            "must be non-negative",
        ),
        ({"plugins": {"filtre": {"enabled": []}}}, "unknown extension point"),
        (
            {"plugins": {"score": {"enabled": [{"name": "NodePorts"}]}}},
            "does not implement extension point score",
        ),
    ],
)
def test_bad_profiles_fail_with_a_clear_message(profile: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        plugins_of(profile)


# --- the runner -----------------------------------------------------------------


class Skipper(Full):
    def pre_filter(self, state: CycleState, pod: Any, nodes: Any) -> tuple[None, Status]:
        return None, Status(Code.SKIP)

    def filter(self, state: CycleState, pod: Any, node: Any) -> Status:
        raise AssertionError("a skipped plugin's Filter must not run")


class OnlyNode(Full):
    def pre_filter(self, state: CycleState, pod: Any, nodes: Any) -> tuple[PreFilterResult, Status]:
        return PreFilterResult({self.args["node"]}), SUCCESS


class Normalizing(Scorer):
    def score(self, state: CycleState, pod: Any, node: Any) -> tuple[int, Status]:
        return {"a": 2, "b": 8}[node.name], SUCCESS

    def score_extensions(self) -> Normalizing:
        return self

    def normalize_score(self, state: CycleState, pod: Any, scores: list[NodeScore]) -> Status:
        top = max(s.score for s in scores)
        for s in scores:
            s.score = s.score * 100 // top
        return SUCCESS


class Waiter(Base, PermitPlugin):
    def permit(self, state: CycleState, pod: Any, node_name: str) -> tuple[Status, float]:
        return Status(Code.WAIT), float(self.args["timeout"])


class Node:
    def __init__(self, name: str) -> None:
        self.name = name


def framework(**plugins: Any) -> Framework:
    registry = dict(REGISTRY)
    enabled = []
    for name, kind in plugins.items():
        registry[name] = (lambda n, k: lambda args, h: k(n, args))(name, kind[0])
        enabled.append({"name": name, **({"weight": kind[1]} if len(kind) > 1 else {})})
    config = parse_config(
        {
            "profiles": [
                {
                    "plugins": {"multiPoint": {"enabled": enabled}},
                    "pluginConfig": [
                        {"name": n, "args": k[2]} for n, k in plugins.items() if len(k) > 2
                    ],
                }
            ]
        }
    )
    return Framework.from_profile(config.profiles[0], registry)


def test_prefilter_skip_skips_that_plugins_filter() -> None:
    fw = framework(Skipper=(Skipper,))
    state = CycleState()
    _, status = fw.run_pre_filter_plugins(state, object(), [])  # type: ignore[arg-type]
    assert status.ok and "Skipper" in state.skip_filter_plugins
    assert fw.run_filter_plugins(state, object(), Node("a")).ok  # type: ignore[arg-type]


def test_prefilter_results_intersect_and_empty_is_unresolvable() -> None:
    fw = framework(A=(OnlyNode, 1, {"node": "a"}), B=(OnlyNode, 1, {"node": "b"}))
    result, status = fw.run_pre_filter_plugins(CycleState(), object(), [])  # type: ignore[arg-type]
    assert result is not None and result.node_names == set()
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_scores_are_normalized_then_weighted() -> None:
    fw = framework(Norm=(Normalizing, 3))
    fw.scores = [p for p in fw.scores if p.name == "Norm"]
    totals, status = fw.run_score_plugins(CycleState(), object(), [Node("a"), Node("b")])  # type: ignore[arg-type, list-item]
    assert status.ok
    assert [(t.name, t.total) for t in totals] == [("a", 75), ("b", 300)]


def test_permit_waits_with_each_plugins_timeout_capped() -> None:
    fw = framework(W1=(Waiter, 1, {"timeout": 10}), W2=(Waiter, 1, {"timeout": 10_000}))
    status, waits = fw.run_permit_plugins(CycleState(), object(), "a")  # type: ignore[arg-type]
    assert status.code == Code.WAIT
    assert waits == {"W1": 10.0, "W2": MAX_PERMIT_TIMEOUT}


@pytest.mark.parametrize(
    ("percentage", "nodes", "want"),
    [
        (None, 50, 50),  # fewer than 100 nodes: all
        (None, 500, 230),  # 50 - 500/125 = 46%
        (None, 5000, 500),  # 50 - 40 = 10%
        (None, 6000, 300),  # 50 - 48 = 2% -> at least 5%
        (None, 1000, 420),
        (100, 5000, 5000),
        (1, 5000, 100),  # never fewer than 100
        (30, 1000, 300),
    ],
)
def test_num_feasible_nodes_to_find(percentage: int | None, nodes: int, want: int) -> None:
    assert num_feasible_nodes_to_find(percentage, nodes) == want
