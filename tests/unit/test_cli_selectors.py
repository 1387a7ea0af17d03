"""kubectl's `-l` (labels.Parse) and `--field-selector` (fields.ParseSelector), and the
query `get`/`delete` build from them."""

from __future__ import annotations

from typing import Any

import pytest

from shared.tools.cli.fields import FieldSelectorError, parse_field_selector
from shared.tools.cli.labels import SelectorError, format_labels, parse_selector, selects
from shared.tools.cli.query import BadRequest, Query, QueryError, resource_args, selector
from shared.tools.synthetic import make_node, make_pod

LABELS = {"app": "web", "tier": "front", "version": "3"}


@pytest.mark.parametrize(
    ("text", "selected"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app!=web", False),
        ("app!=db", True),
        ("missing!=x", True),  # != also selects objects without the label
        ("app in (db,web)", True),
        ("app in (db)", False),
        ("app notin (db)", True),
        ("missing notin (db)", True),
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("app=web,tier=front", True),  # comma is AND
        ("app=web,tier=back", False),
        ("app = web , tier in ( front )", True),  # whitespace separates tokens
        ("version>2", True),
        ("version<3", False),
        ("app=", False),  # the empty value
        ("in in (in)", False),  # `in` is a key and a value where one is expected
    ],
)
def test_label_selector_grammar_and_matching(text: str, selected: bool) -> None:
    assert selects(parse_selector(text), LABELS) is selected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a in x", "unable to parse requirement: found 'x', expected: '('"),
        ("a in (x y)", "unable to parse requirement: found 'y', expected: ',' or ')'"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        (",", "found ',', expected: !, identifier, or 'end of string'"),
        ("a,", "found '', expected: identifier after ','"),
        ("a b", "unable to parse requirement: found 'b', expected: '=', '!=', '==', 'in', notin'"),
        ("a=%", 'unable to parse requirement: values[0][a]: Invalid value: "%": a valid label'),
        ("-a=b", 'unable to parse requirement: key: Invalid value: "-a": name part must'),
    ],
)
def test_label_selector_errors_are_apimachinerys(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as err:
        parse_selector(text)
    assert str(err.value).startswith(message)


def test_set_values_with_empty_entries() -> None:
    assert selects(parse_selector("x in (a,)"), {"x": ""})
    assert selects(parse_selector("x in (,a)"), {"x": "a"})
    assert selects(parse_selector("x notin ()"), {"x": "a"})
    assert not selects(parse_selector("x in ()"), {"x": "a"})


def test_show_labels_column_is_sorted_k_equals_v() -> None:
    assert format_labels({"tier": "front", "app": "web"}) == "app=web,tier=front"
    assert format_labels({}) == "<none>"
    assert format_labels(None) == "<none>"


def pod(name: str, **spec: Any) -> dict[str, Any]:
    p = make_pod(name)
    p["spec"].update(spec)
    return p


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("metadata.name=a", ["a"]),
        ("metadata.name==a", ["a"]),
        ("metadata.name!=a", ["b", "c"]),
        ("spec.nodeName=n1", ["b"]),
        ("spec.nodeName=", ["a", "c"]),  # not bound
        ("spec.nodeName!=,metadata.name!=x", ["b"]),
        ("spec.schedulerName=default-scheduler", ["a", "b"]),  # the default filled in
        ("spec.schedulerName=other", ["c"]),
        ("status.phase=Pending", ["a", "b", "c"]),  # no phase: Pending, as defaulted
        ("metadata.namespace=default", ["a", "b", "c"]),
    ],
)
def test_pod_field_selectors(text: str, names: list[str]) -> None:
    pods = [pod("a"), pod("b", nodeName="n1"), pod("c", schedulerName="other")]
    query = Query("pod", selects=selector("pod", "", text))
    assert [p["metadata"]["name"] for p in pods if query.wants(p)] == names


def test_node_field_selectors() -> None:
    cordoned = make_node("n2")
    cordoned["spec"] = {"unschedulable": True}
    nodes = [make_node("n1"), cordoned]
    for text, names in (("spec.unschedulable=true", ["n2"]), ("spec.unschedulable=false", ["n1"])):
        query = Query("node", namespace=None, selects=selector("node", "", text))
        assert [n["metadata"]["name"] for n in nodes if query.wants(n)] == names


def test_field_selector_escapes_and_errors() -> None:
    assert parse_field_selector(r"metadata.name=a\,b")[0].value == "a,b"
    with pytest.raises(FieldSelectorError, match="can't understand 'bogus'"):
        parse_field_selector("bogus")
    with pytest.raises(FieldSelectorError, match="unescaped character in value: 61"):
        parse_field_selector("metadata.name=a=b")
    with pytest.raises(BadRequest) as err:
        selector("pod", "app=web", "spec.nodeNmae=n1")
    assert str(err.value) == (
        'Unable to find "/v1, Resource=pods" that match label selector "app=web", '
        'field selector "spec.nodeNmae=n1": field label not supported: spec.nodeNmae'
    )


def test_query_namespace_names_and_selectors_together() -> None:
    a, b, c = make_pod("a"), make_pod("b"), make_pod("c")
    c["metadata"]["namespace"] = "other"
    b["metadata"]["labels"] = {"app": "web"}
    table = {"default/a": a, "default/b": b, "other/c": c}
    assert Query("pod").select(table, lambda o: o) == [a, b]
    assert Query("pod", namespace=None).select(table, lambda o: o) == [a, b, c]
    assert Query("pod", namespace="other").select(table, lambda o: o) == [c]
    assert Query("pod", ("b", "x")).missing([b]) == ["x"]
    web = Query("pod", selects=selector("pod", "app=web", ""))
    assert web.select(table, lambda o: o) == [b]


def test_resource_args_take_kubectl_forms() -> None:
    assert resource_args(["pods", "a", "b"]) == ("pod", ["a", "b"])
    assert resource_args(["po"]) == ("pod", [])
    assert resource_args(["pod/a", "pods/b"]) == ("pod", ["a", "b"])
    assert resource_args(["ev"]) == ("event", [])
    with pytest.raises(QueryError, match='doesn\'t have a resource type "deploy"'):
        resource_args(["deploy"])
