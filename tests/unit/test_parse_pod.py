"""parse_pod reuses validated specs: the same Pods and the same errors as validating
each pod whole."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from shared.api.models import Pod, describe_validation_error
from shared.api.podparse import BUILT_FIELDS, parse_pod
from shared.tools.synthetic import make_pod

names = st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True)


def errors_of(raw: dict[str, Any], parse: Any) -> str | None:
    try:
        parse(raw)
    except ValidationError as err:
        return describe_validation_error(err)
    return None


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(
            names,
            names,
            st.dictionaries(names, names, max_size=3),
            st.sampled_from([None, "", "node-1", "node-2", 7, None]),
        ),
        min_size=1,
    ),
    st.sampled_from(["100m", "1", "2500m", "-1", "abc"]),
)
def test_pods_of_one_template_parse_as_each_alone(
    metas: list[tuple[str, str, dict[str, str], Any]], cpu: str
) -> None:
    """Bound or not (nodeName, valid or not), the template's spec is reused."""
    for name, namespace, labels, node_name in metas:
        raw = make_pod(name, namespace=namespace, cpu="100m", labels=labels)
        raw["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
        if node_name is not None:
            raw["spec"]["nodeName"] = node_name
        assert errors_of(raw, parse_pod) == errors_of(raw, Pod.model_validate)
        if errors_of(raw, Pod.model_validate) is None:
            assert parse_pod(raw) == Pod.model_validate(raw)


def test_a_known_spec_is_shared_and_bad_metadata_still_fails() -> None:
    first, second = make_pod("a", cpu="1"), make_pod("b", cpu="1")
    assert parse_pod(first).spec is parse_pod(second).spec
    bad = make_pod("c", cpu="1")
    bad["metadata"]["labels"] = {"app": 5}
    with pytest.raises(ValidationError) as err:
        parse_pod(bad)
    assert describe_validation_error(err.value) == errors_of(bad, Pod.model_validate)


def test_bound_pods_of_one_template_share_one_memo_entry() -> None:
    unbound = parse_pod(make_pod("u", cpu="3"))
    bound = []
    for i in range(3):
        raw = make_pod(f"b{i}", cpu="3")
        raw["spec"]["nodeName"] = f"node-{i}"
        bound.append(parse_pod(raw))
    assert [p.spec.node_name for p in bound] == ["node-0", "node-1", "node-2"]
    assert unbound.spec.node_name == ""
    assert all(p.spec.containers is unbound.spec.containers for p in bound)


def test_a_spec_msgpack_cannot_pack_is_validated_whole() -> None:
    raw = make_pod("big", cpu="1")
    raw["spec"]["unknownField"] = 10**30  # ignored by the model, but no msgpack key
    assert errors_of(raw, parse_pod) == errors_of(raw, Pod.model_validate)
    assert parse_pod(raw) == Pod.model_validate(raw)


# --- metadata and status built without pydantic (podparse._plain_pod) ---------------

# Values of every shape a field may meet: plain ones, and ones only pydantic judges.
odd = st.sampled_from([None, 5, True, 1.5, b"x", [], {}, ["a"], {"a": 1}])
text = st.sampled_from(["", "x", "node-1", "2024-01-01T00:00:00Z"]) | odd
string_map = st.dictionaries(names, names, max_size=2) | st.sampled_from([None, {"a": 5}, {5: "a"}])
condition = st.dictionaries(
    st.sampled_from(["type", "status", "reason", "message", "lastTransitionTime"]),
    text,
) | st.sampled_from([{"type": "PodScheduled", "status": "True"}, None, "x"])


def some_of(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects with any of these fields."""
    return st.fixed_dictionaries({}, optional=fields)


@settings(max_examples=300, deadline=None)
@given(
    meta=some_of(
        name=text,
        namespace=text,
        uid=text,
        labels=string_map,
        annotations=string_map,
        creationTimestamp=text,
        deletionTimestamp=text,
        generateName=text,
        creation_timestamp=text,
    )
    | odd,
    status=some_of(
        phase=text,
        conditions=st.lists(condition, max_size=2) | odd,
        nominatedNodeName=text,
        startTime=text,
        start_time=text,
        hostIP=text,
    )
    | odd,
    top=some_of(apiVersion=text, kind=st.sampled_from(["Pod", "Node"]) | text, api_version=text),
    node_name=st.sampled_from([None, "node-1"]),
)
def test_metadata_and_status_of_every_shape_parse_as_pydantic_does(
    meta: Any, status: Any, top: dict[str, Any], node_name: str | None
) -> None:
    """With the spec known, the pod parses to the same object (fields, the fields set,
    their order) or fails with the same errors as validating it whole."""
    template = make_pod("t", cpu="250m")
    parse_pod(template)  # the spec is known from here on
    raw = {**top, "metadata": meta, "spec": dict(template["spec"]), "status": status}
    if node_name:
        raw["spec"]["nodeName"] = node_name
    expected = errors_of(raw, Pod.model_validate)
    assert errors_of(raw, parse_pod) == expected
    if expected is None:
        assert_same_model(parse_pod(raw), Pod.model_validate(raw))


def assert_same_model(got: Any, want: Any) -> None:
    """Equal, and equal in what == leaves out: the fields set, the fields' order."""
    assert type(got) is type(want)
    if isinstance(want, BaseModel):
        assert got.model_fields_set == want.model_fields_set
        assert list(got.__dict__) == list(want.__dict__)
        assert got.__pydantic_extra__ == want.__pydantic_extra__
        for name in want.__dict__:
            assert_same_model(getattr(got, name), getattr(want, name))
    elif isinstance(want, list):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert_same_model(g, w)
    else:
        assert got == want


@pytest.mark.parametrize("model", list(BUILT_FIELDS))
def test_the_plain_builders_fill_every_field_of_their_model(model: type[BaseModel]) -> None:
    assert BUILT_FIELDS[model] == tuple(model.model_fields)


def test_a_plain_pod_of_a_known_template_is_not_validated_by_pydantic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The metadata and status of a plain pod (what the watcher meets almost always)
    skip pydantic, bound or not; they are the same objects as pydantic's."""
    pending = make_pod("p1", cpu="333m", labels={"app": "a"})
    bound = make_pod("p2", cpu="333m")
    bound["spec"]["nodeName"] = "node-3"
    bound["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "True", "lastProbeTime": None}],
    }
    parse_pod(make_pod("p0", cpu="333m"))
    wanted = [Pod.model_validate(pending), Pod.model_validate(bound)]

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("validated by pydantic")

    monkeypatch.setattr(Pod, "model_validate", refuse)
    for raw, want in zip([pending, bound], wanted, strict=True):
        assert_same_model(parse_pod(raw), want)


PLAIN_FIELDS = [
    *(("metadata", f) for f in ("name", "namespace", "uid", "labels", "annotations")),
    *(("metadata", f) for f in ("creationTimestamp", "deletionTimestamp")),
    *(("status", f) for f in ("phase", "conditions", "nominatedNodeName", "startTime")),
    *(("condition", f) for f in ("type", "status", "reason", "message")),
    ("condition", "lastTransitionTime"),
    *((None, f) for f in ("apiVersion", "kind", "metadata", "status")),
]


@pytest.mark.parametrize(("where", "field"), PLAIN_FIELDS)
@pytest.mark.parametrize("value", [None, 5, True, 1.5, b"x", "", "x", [], {}, {"a": 5}])
def test_one_odd_field_in_a_plain_pod_parses_as_pydantic_does(
    where: str | None, field: str, value: Any
) -> None:
    """Each field alone of each type, the rest plain (where the builders' type checks
    decide), bound or not."""
    parse_pod(make_pod("t0", cpu="275m"))
    for node in ("", "node-1"):
        raw = make_pod("t1", cpu="275m", node=node)
        raw["status"] = {"conditions": [{"type": "PodScheduled", "status": "True"}]}
        target = {
            None: raw,
            "metadata": raw["metadata"],
            "status": raw["status"],
            "condition": raw["status"]["conditions"][0],
        }[where]
        target[field] = value
        expected = errors_of(raw, Pod.model_validate)
        assert errors_of(raw, parse_pod) == expected
        if expected is None:
            assert_same_model(parse_pod(raw), Pod.model_validate(raw))
