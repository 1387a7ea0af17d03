"""`-o jsonpath=...`: the subset scripts use, as kubectl prints it."""

from __future__ import annotations

import pytest

from shared.tools.cli.jsonpath import JSONPathError, render

LIST = {
    "kind": "List",
    "items": [
        {"metadata": {"name": "a", "labels": {"app": "web"}}, "spec": {"nodeName": "n1"}},
        {"metadata": {"name": "b"}, "spec": {"unschedulable": True}},
    ],
}


@pytest.mark.parametrize(
    ("template", "data", "printed"),
    [
        ("{.metadata.name}", LIST["items"][0], "a"),
        ("{.spec.nodeName}", LIST["items"][0], "n1"),
        ("{.spec.nodeName}", LIST["items"][1], ""),  # missing: nothing
        ("{.items[*].metadata.name}", LIST, "a b"),
        ("{.items[0].metadata.name}", LIST, "a"),
        ("{.items[-1].metadata.name}", LIST, "b"),
        ("{.items[5].metadata.name}", LIST, ""),
        ("name: {.metadata.name}!", LIST["items"][0], "name: a!"),
        (
            '{range .items[*]}{.metadata.name}{"\\t"}{.spec.nodeName}{"\\n"}{end}',
            LIST,
            "a\tn1\nb\t\n",
        ),
        ("{.items[0].metadata.labels}", LIST, '{"app":"web"}'),
        ("{.items[1].spec.unschedulable}", LIST, "true"),
        ("{$.kind}", LIST, "List"),
        ("{.metadata.labels['app']}", LIST["items"][0], "web"),
    ],
)
def test_jsonpath_subset(template: str, data: object, printed: str) -> None:
    assert render(template, data) == printed


@pytest.mark.parametrize(
    ("template", "detail"),
    [
        ("{.metadata.name", "unclosed action"),
        ("{end}", "not in range, nothing to end"),
        ("{range .items[*]}{.a}", "unclosed range"),
        ("{.items[?(@.a)]}", "unrecognized identifier [?(@.a)]"),
        ("{..name}", "unrecognized identifier ..name"),
    ],
)
def test_jsonpath_errors_name_the_template(template: str, detail: str) -> None:
    with pytest.raises(JSONPathError) as err:
        render(template, LIST)
    assert str(err.value) == f"error parsing jsonpath {template}, {detail}"
