"""NodeAffinity behaviour the vectors leave out: addedAffinity validation, PreFilter results,
parse errors, PreScore Skip/Error, and the phases' fallbacks when PreFilter/PreScore did
not run."""

from __future__ import annotations

from typing import Any

import pytest

from shared.config import ConfigError
from shared.framework.cycle_state import CycleState
from shared.framework.handle import Handle
from shared.framework.interface import ClusterEvent, NodeScore
from shared.framework.status import Code
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.nodeaffinity import (
    ERR_REASON_CONFLICT,
    ERR_REASON_ENFORCED,
    ERR_REASON_POD,
    NodeAffinity,
    new,
    required_node_affinity_matches,
)

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def node(name: str, **labels: str) -> NodeInfo:
    info = NodeInfo(name)
    info.set_node({"metadata": {"name": name, "labels": labels}})
    return info


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


def names(*values: str) -> dict[str, Any]:
    return {"matchFields": [expr("metadata.name", "In", *values)]}


def pod(
    *terms: dict[str, Any],
    preferred: list[dict[str, Any]] | None = None,
    node_selector: dict[str, str] | None = None,
) -> PodInfo:
    affinity: dict[str, Any] = {}
    if terms:
        affinity[REQUIRED] = {"nodeSelectorTerms": list(terms)}
    if preferred:
        affinity[PREFERRED] = preferred
    spec: dict[str, Any] = {"affinity": {"nodeAffinity": affinity}}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return PodInfo.of({"metadata": {"name": "p"}, "spec": spec})


def plugin(added: dict[str, Any] | None = None) -> NodeAffinity:
    return new({"addedAffinity": added} if added is not None else {}, Handle())


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {REQUIRED: {"nodeSelectorTerms": list(terms)}}


@pytest.mark.parametrize(
    ("added", "message"),
    [
        (
            {"requiredDuringSchedulingRequiredDuringExecution": {}},
            r"args\.addedAffinity\.requiredDuringSchedulingRequiredDuringExecution: unknown field",
        ),
        (
            required({"matchExpressions": [{**expr("k", "In", "v"), "bogus": 1}]}),
            r"nodeSelectorTerms\[0\]\.matchExpressions\[0\]\.bogus: unknown field",
        ),
        (
            required({"matchExpressions": [expr("k", "Near")]}),
            r"args\.addedAffinity: requiredDuringSchedulingIgnoredDuringExecution\."
            r'nodeSelectorTerms\[0\]\.matchExpressions\[0\]\.operator: Unsupported value: "Near"$',
        ),
        (
            required({"matchFields": [expr("metadata.name", "Exists")]}),
            r'matchFields\[0\]\.operator: Unsupported value: "Exists": '
            r'supported values: "In", "NotIn"',
        ),
        (
            required(names("a", "b")),
            r'matchFields\[0\]\.values: Invalid value: \[\]string\{"a", "b"\}: '
            r"must have one element",
        ),
        (
            {
                PREFERRED: [
                    {"weight": 1, "preference": {"matchExpressions": [expr("a b", "Exists")]}}
                ]
            },
            r"args\.addedAffinity: preferredDuringSchedulingIgnoredDuringExecution\[0\]\."
            r'matchExpressions\[0\]\.key: Invalid value: "a b": name part must consist',
        ),
        (
            {PREFERRED: [{"weight": "1", "preference": {}}]},
            r"args\.addedAffinity: .*weight: Input should be a valid integer",
        ),
        ([], r"args\.addedAffinity: must be a NodeAffinity object"),
    ],
)
def test_added_affinity_is_validated_like_validate_node_affinity_args(
    added: Any, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        plugin(added)


@pytest.mark.parametrize("args", [{}, {"addedAffinity": None}, {"addedAffinity": {}}])
def test_args_default_to_no_added_affinity(args: dict[str, Any]) -> None:
    na = new(args, Handle())
    assert na.added_selector is None and na.added_preferred is None


@pytest.mark.parametrize(
    ("terms", "want_names", "want_code"),
    [
        ([names("a")], {"a"}, Code.SUCCESS),
        ([names("a"), names("b", "c")], {"a", "b", "c"}, Code.SUCCESS),
        # Within a term the name requirements are ANDed.
        (
            [
                {
                    "matchFields": [
                        expr("metadata.name", "In", "a", "b"),
                        expr("metadata.name", "In", "b"),
                    ]
                }
            ],
            {"b"},
            Code.SUCCESS,
        ),
        # A term that does not name nodes lets every node through.
        ([names("a"), {"matchExpressions": [expr("zone", "Exists")]}], None, Code.SUCCESS),
        (
            [{"matchFields": [expr("metadata.name", "In", "a"), expr("metadata.name", "In", "b")]}],
            None,
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        ),
    ],
)
def test_pre_filter_result_from_metadata_name_fields(
    terms: list[dict[str, Any]], want_names: set[str] | None, want_code: Code
) -> None:
    result, status = plugin().pre_filter(CycleState(), pod(*terms), [])
    assert status.code == want_code
    assert (result.node_names if result else None) == want_names
    if want_code != Code.SUCCESS:
        assert status.reasons == [ERR_REASON_CONFLICT]


def test_pre_filter_skips_only_pods_with_nothing_to_check() -> None:
    assert plugin().pre_filter(CycleState(), pod(), [])[1].code == Code.SKIP
    with_selector = pod(node_selector={"zone": "a"})
    assert plugin().pre_filter(CycleState(), with_selector, [])[1].ok
    enforced = plugin(required({"matchExpressions": [expr("pool", "In", "batch")]}))
    assert enforced.pre_filter(CycleState(), pod(), [])[1].ok


@pytest.mark.parametrize("run_pre_filter", [True, False])
def test_filter_checks_enforced_affinity_first_then_the_pods(run_pre_filter: bool) -> None:
    na = plugin(required({"matchExpressions": [expr("pool", "In", "batch")]}))
    p = pod({"matchExpressions": [expr("zone", "In", "a")]}, node_selector={"disk": "ssd"})
    state = CycleState()
    if run_pre_filter:
        na.pre_filter(state, p, [])
    cases = [
        (node("n1", pool="web", zone="a", disk="ssd"), [ERR_REASON_ENFORCED]),
        (node("n2", pool="batch", zone="b", disk="ssd"), [ERR_REASON_POD]),
        (node("n3", pool="batch", zone="a"), [ERR_REASON_POD]),  # nodeSelector too
        (node("n4", pool="batch", zone="a", disk="ssd"), []),
    ]
    for n, reasons in cases:
        status = na.filter(state, p, n)
        assert status.reasons == reasons, n.name
        assert status.code == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE if reasons else Code.SUCCESS)


def test_a_required_selector_without_terms_matches_no_node() -> None:
    p = PodInfo.of({"spec": {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": []}}}}})
    state = CycleState()
    assert plugin().pre_filter(state, p, [])[1].ok
    assert plugin().filter(state, p, node("n")).reasons == [ERR_REASON_POD]
    assert not required_node_affinity_matches(p, node("n"))


def test_pre_score_reports_a_broken_preferred_term_as_an_error() -> None:
    bad = pod(
        preferred=[
            {"weight": 2, "preference": {"matchExpressions": [expr("invalid key", "In", "bar")]}}
        ]
    )
    status = plugin().pre_score(CycleState(), bad, [node("n")])
    assert status.code == Code.ERROR
    assert status.reasons == [
        '[0].matchExpressions[0].key: Invalid value: "invalid key": name part must consist of '
        "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
        "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    ]
    score, status = plugin().score(CycleState(), bad, node("n"))  # without PreScore
    assert (score, status.code) == (0, Code.ERROR)


def test_pre_score_skips_without_preferred_terms_unless_some_are_enforced() -> None:
    assert plugin().pre_score(CycleState(), pod(), [node("n")]).code == Code.SKIP
    added = {PREFERRED: [{"weight": 3, "preference": {"matchExpressions": [expr("k", "Exists")]}}]}
    assert plugin(added).pre_score(CycleState(), pod(), [node("n")]).ok


@pytest.mark.parametrize("run_pre_score", [True, False])
def test_score_sums_added_and_pod_weights_then_normalizes(run_pre_score: bool) -> None:
    added = {
        PREFERRED: [{"weight": 3, "preference": {"matchExpressions": [expr("key", "In", "value")]}}]
    }
    na = plugin(added)
    p = pod(
        preferred=[
            {"weight": 2, "preference": {"matchExpressions": [expr("foo", "In", "bar")]}},
            {"weight": 0, "preference": {"matchExpressions": [expr("foo", "Exists")]}},
            {"weight": 4, "preference": names("n3")},
        ]
    )
    nodes = [node("n1", foo="bar"), node("n2", key="value"), node("n3", foo="bar", key="value")]
    state = CycleState()
    if run_pre_score:
        assert na.pre_score(state, p, nodes).ok
    scores = [NodeScore(n.name, na.score(state, p, n)[0]) for n in nodes]
    assert [s.score for s in scores] == [2, 3, 9]
    assert na.normalize_score(state, p, scores).ok
    assert [s.score for s in scores] == [22, 33, 100]  # 100 * s // max, truncated


def test_events_are_node_add_and_label_updates() -> None:
    assert [e.event for e in plugin().events_to_register()] == [
        ClusterEvent("Node", "Add"),
        ClusterEvent("Node", "UpdateNodeLabel"),
    ]
