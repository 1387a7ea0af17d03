"""Toleration matching (core/v1 ToleratesTaint) and the plugins built on it:
TaintToleration's Filter/Score and NodeUnschedulable."""

from __future__ import annotations

from typing import Any

import pytest

from shared.api.models import Taint, Toleration
from shared.config import ConfigError
from shared.framework.cycle_state import CycleState
from shared.framework.handle import Handle
from shared.framework.interface import ClusterEvent, NodeScore
from shared.framework.status import Code
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins import nodeunschedulable, tainttoleration
from shared.plugins.tainttoleration import ERR_REASON_NOT_MATCH, tolerates

DEDICATED = Taint(key="dedicated", value="user1", effect="NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "want"),
    [
        ({"key": "dedicated", "value": "user1", "effect": "NoSchedule"}, True),
        ({"key": "dedicated", "operator": "Equal", "value": "user2"}, False),
        ({"key": "dedicated", "operator": "Exists"}, True),  # any value
        ({"key": "dedicated", "value": "user1"}, True),  # empty effect: every effect
        ({"key": "dedicated", "value": "user1", "effect": "PreferNoSchedule"}, False),
        ({"operator": "Exists"}, True),  # empty key + Exists: every taint
        ({"operator": "Exists", "effect": "NoExecute"}, False),
        # ToleratesTaint does not insist on Exists for an empty key (validation does).
        ({"value": "user1"}, True),
        ({"value": "other"}, False),
        ({"key": "other", "operator": "Exists"}, False),
    ],
)
def test_tolerates_taint(toleration: dict[str, Any], want: bool) -> None:
    assert tolerates(Toleration.model_validate(toleration), DEDICATED) is want


def node(name: str, taints: list[dict[str, str]], unschedulable: bool = False) -> NodeInfo:
    info = NodeInfo(name)
    info.set_node(
        {"metadata": {"name": name}, "spec": {"taints": taints, "unschedulable": unschedulable}}
    )
    return info


def pod(*tolerations: dict[str, str]) -> PodInfo:
    return PodInfo.of({"metadata": {"name": "p"}, "spec": {"tolerations": list(tolerations)}})


@pytest.mark.parametrize(
    ("taints", "tolerations", "fits"),
    [
        ([{"key": "a", "value": "1", "effect": "NoExecute"}], [], False),
        ([{"key": "a", "value": "1", "effect": "PreferNoSchedule"}], [], True),
        (
            [
                {"key": "a", "value": "1", "effect": "NoSchedule"},
                {"key": "b", "effect": "NoSchedule"},
            ],
            [{"key": "a", "operator": "Exists"}],
            False,
        ),
        (
            [
                {"key": "a", "value": "1", "effect": "NoSchedule"},
                {"key": "b", "effect": "NoSchedule"},
            ],
            [{"key": "a", "operator": "Exists"}, {"key": "b", "effect": "NoSchedule"}],
            True,
        ),
    ],
)
def test_filter_rejects_untolerated_hard_taints(
    taints: list[dict[str, str]], tolerations: list[dict[str, str]], fits: bool
) -> None:
    status = tainttoleration.new({}, Handle()).filter(
        CycleState(), pod(*tolerations), node("n", taints)
    )
    if fits:
        assert status.ok
    else:
        assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == [ERR_REASON_NOT_MATCH] == ["node(s) had untolerated taint(s)"]


@pytest.mark.parametrize("run_pre_score", [True, False])
def test_score_counts_untolerated_prefer_no_schedule_taints_reversed(run_pre_score: bool) -> None:
    tt = tainttoleration.new({}, Handle())
    soft = [{"key": k, "effect": "PreferNoSchedule"} for k in ("a", "b", "c")]
    nodes = [node("n0", []), node("n1", soft[:1]), node("n3", soft)]
    # Only tolerations with an empty or PreferNoSchedule effect count for scoring.
    p = pod(
        {"key": "a", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "c", "operator": "Exists"},
    )
    state = CycleState()
    if run_pre_score:
        assert tt.pre_score(state, p, nodes).ok
    scores = [NodeScore(n.name, tt.score(state, p, n)[0]) for n in nodes]
    assert [s.score for s in scores] == [0, 1, 2]
    assert tt.normalize_score(state, p, scores).ok
    assert [s.score for s in scores] == [100, 50, 0]


def test_normalize_gives_every_node_the_maximum_when_none_has_untolerated_taints() -> None:
    scores = [NodeScore("a", 0), NodeScore("b", 0)]
    tainttoleration.new({}, Handle()).normalize_score(CycleState(), pod(), scores)
    assert [s.score for s in scores] == [100, 100]


@pytest.mark.parametrize(
    ("tolerations", "fits"),
    [
        ([], False),
        (
            [
                {
                    "key": "node.kubernetes.io/unschedulable",
                    "operator": "Exists",
                    "effect": "NoSchedule",
                }
            ],
            True,
        ),
        ([{"key": "node.kubernetes.io/unschedulable"}], True),  # Equal "" to the taint's ""
        ([{"operator": "Exists"}], True),
        ([{"operator": "Exists", "effect": "NoExecute"}], False),
        ([{"key": "node.kubernetes.io/unschedulable", "value": "x"}], False),
    ],
)
def test_cordoned_node_takes_only_pods_tolerating_the_unschedulable_taint(
    tolerations: list[dict[str, str]], fits: bool
) -> None:
    nu = nodeunschedulable.new({}, Handle())
    status = nu.filter(CycleState(), pod(*tolerations), node("c", [], unschedulable=True))
    assert status.ok is fits
    if not fits:
        assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.reasons == ["node(s) were unschedulable"]
    assert nu.filter(CycleState(), pod(*tolerations), node("ok", [])).ok


def test_events_include_toleration_updates() -> None:
    for module in (tainttoleration, nodeunschedulable):
        events = [e.event for e in module.new({}, Handle()).events_to_register()]
        assert ClusterEvent("Node", "UpdateNodeTaint") in events
        assert ClusterEvent("Pod", "UpdatePodToleration") in events


@pytest.mark.parametrize("module", [tainttoleration, nodeunschedulable])
def test_args_must_be_empty(module: Any) -> None:
    with pytest.raises(ConfigError, match=r"args\.weight: unknown field"):
        module.new({"weight": 1}, Handle())
