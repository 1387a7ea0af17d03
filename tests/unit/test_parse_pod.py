"""parse_pod reuses validated specs: the same Pods and the same errors as validating
each pod whole."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from shared.api.models import Pod, describe_validation_error, parse_pod
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
