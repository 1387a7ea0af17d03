"""Label / node selector semantics beyond the vectors: labels.NewRequirement validation
(an invalid term matches no node), Go integer parsing, field selectors, error text."""

from __future__ import annotations

from typing import Any

import pytest

from shared.api.models import LabelSelector, NodeSelectorTerm, PreferredSchedulingTerm
from shared.framework.selectors import (
    aggregate,
    label_selector_error,
    label_selector_matches,
    label_value_errors,
    node_selector_term_matches,
    parse_int64,
    parse_preferred_terms,
    qualified_name_errors,
)

NAME = {"metadata.name": "node-a"}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


def term(*exprs: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> NodeSelectorTerm:
    return NodeSelectorTerm.model_validate(
        {"matchExpressions": list(exprs), "matchFields": fields or []}
    )


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("0204", 204),
        ("+5", 5),
        ("-5", -5),
        ("9223372036854775807", 2**63 - 1),
        ("9223372036854775808", None),  # out of int64 range
        (" 5", None),
        ("1_000", None),  # Python's int() would accept it, Go's ParseInt(s, 10, 64) not
        ("\u0663", None),  # a non-ASCII digit
        ("", None),
    ],
)
def test_parse_int64_is_go_strict(text: str, want: int | None) -> None:
    assert parse_int64(text) == want


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("foo", True),
        ("example.com/foo", True),
        ("Foo_Bar.baz-1", True),
        ("a/b/c", False),
        ("/foo", False),
        ("Example.com/foo", False),  # the prefix is a lowercase DNS subdomain
        ("-foo", False),
        ("x" * 64, False),
        ("", False),
    ],
)
def test_qualified_name(key: str, valid: bool) -> None:
    assert (not qualified_name_errors(key)) is valid


@pytest.mark.parametrize(
    ("value", "valid"), [("", True), ("a_b.c-d", True), ("-1", False), ("x" * 64, False)]
)
def test_label_value(value: str, valid: bool) -> None:
    assert (not label_value_errors(value)) is valid


LABELS = {"zone": "a", "gen": "7", "name": "x"}


@pytest.mark.parametrize(
    ("case", "node_term", "want"),
    [
        ("In", term(expr("zone", "In", "a", "b")), True),
        ("In, missing key", term(expr("rack", "In", "a")), False),
        ("NotIn, missing key matches", term(expr("rack", "NotIn", "a")), True),
        ("NotIn", term(expr("zone", "NotIn", "a")), False),
        ("Exists", term(expr("zone", "Exists")), True),
        ("DoesNotExist", term(expr("zone", "DoesNotExist")), False),
        ("Gt", term(expr("gen", "Gt", "6")), True),
        ("Lt", term(expr("gen", "Lt", "7")), False),
        ("Gt on a non-integer label", term(expr("name", "Gt", "1")), False),
        ("ANDed expressions", term(expr("zone", "In", "a"), expr("gen", "Lt", "5")), False),
        # Terms that labels.NewRequirement refuses match no node, even where the
        # requirement alone would match.
        ("NotIn with an invalid value", term(expr("zone", "NotIn", "bad value!")), False),
        ("NotIn without values", term(expr("zone", "NotIn")), False),
        ("Exists with values", term(expr("zone", "Exists", "a")), False),
        ("Gt with a negative bound (not a label value)", term(expr("gen", "Gt", "-1")), False),
        ("Gt with two values", term(expr("gen", "Gt", "1", "2")), False),
        ("an invalid key", term(expr("bad key", "DoesNotExist")), False),
        ("empty term", term(), False),
        ("field In", term(fields=[expr("metadata.name", "In", "node-a")]), True),
        ("field NotIn", term(fields=[expr("metadata.name", "NotIn", "node-a")]), False),
        ("field In two names", term(fields=[expr("metadata.name", "In", "node-a", "b")]), False),
        ("field Exists", term(fields=[expr("metadata.name", "Exists")]), False),
        ("field other than the name", term(fields=[expr("spec.x", "In", "")]), True),
    ],
)
def test_node_selector_term(case: str, node_term: NodeSelectorTerm, want: bool) -> None:
    assert node_selector_term_matches(node_term, LABELS, NAME) is want, case


def test_match_fields_are_not_checked_for_a_node_without_a_name() -> None:
    only_b = term(fields=[expr("metadata.name", "In", "node-b")])
    assert not node_selector_term_matches(only_b, LABELS, NAME)
    assert node_selector_term_matches(only_b, LABELS, {})


@pytest.mark.parametrize(
    ("selector", "want"),
    [
        (None, False),  # nil selects nothing
        ({}, True),  # empty selects everything
        ({"matchLabels": {"zone": "a"}}, True),
        ({"matchLabels": {"zone": "a", "rack": ""}}, False),
        ({"matchExpressions": [expr("rack", "NotIn", "r1")]}, True),
        ({"matchLabels": {"zone": "a"}, "matchExpressions": [expr("gen", "DoesNotExist")]}, False),
    ],
)
def test_label_selector_matches(selector: dict[str, Any] | None, want: bool) -> None:
    parsed = LabelSelector.model_validate(selector) if selector is not None else None
    assert label_selector_matches(parsed, LABELS) is want


@pytest.mark.parametrize(
    ("selector", "want"),
    [
        ({"matchLabels": {"zone": "a"}}, None),
        (
            {"matchExpressions": [expr("zone", "In")]},
            "values: Invalid value: []string(nil): "
            "for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            {"matchLabels": {"zone": "a b"}},
            'values[0][zone]: Invalid value: "a b": a valid label must be an empty string',
        ),
    ],
)
def test_label_selector_error(selector: dict[str, Any], want: str | None) -> None:
    got = label_selector_error(LabelSelector.model_validate(selector))
    assert got == want if want is None else (got or "").startswith(want)


def test_preferred_terms_skip_zero_weights_and_report_paths_like_go() -> None:
    terms = [
        PreferredSchedulingTerm.model_validate(t)
        for t in [
            {"weight": 0, "preference": {"matchExpressions": [expr("zone", "In", "a")]}},
            {"weight": 3, "preference": {"matchExpressions": [expr("zone", "In", "a")]}},
            {"weight": 5, "preference": {}},
        ]
    ]
    parsed, errs = parse_preferred_terms(terms)
    assert not errs and parsed.score(LABELS, "node-a") == 3
    bad = [
        PreferredSchedulingTerm.model_validate(
            {"weight": 1, "preference": term(expr("k", "Gt", "x")).model_dump(by_alias=True)}
        )
    ]
    _, errs = parse_preferred_terms(bad)
    assert errs == [
        '[0].matchExpressions[0].values[0]: Invalid value: "x": '
        "for 'Gt', 'Lt' operators, the value must be an integer"
    ]


def test_aggregate_drops_duplicates_and_brackets_several() -> None:
    assert aggregate(["a"]) == "a"
    assert aggregate(["a", "a"]) == "a"
    assert aggregate(["a", "b", "a"]) == "[a, b]"
