"""The watcher's and the cache's per-pod shortcuts (docs/scale.md §1, branch wcost)
agree with the longer ways they replace."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from services.cache.cache import Cache
from services.cache.feed import _changed
from shared.api.immutable import _FIELDS, _at, _in_no_gang, immutable_fields
from shared.config import Profile
from shared.framework.columns import NodeColumns
from shared.framework.runtime import Framework
from shared.framework.types import PodInfo
from shared.plugins import REGISTRY
from shared.tools.synthetic import make_node, make_pod
from tests.unit.conftest import Clock

FW = Framework.from_profile(Profile(), REGISTRY)

# --- the watcher: a pod's immutable fields -------------------------------------------

_VALUES = st.one_of(
    st.none(),
    st.just({}),
    st.just(""),
    st.text(max_size=3),
    st.dictionaries(st.sampled_from(["name", "podGroup"]), st.text(max_size=3), max_size=2),
)
_SPECS = st.one_of(
    st.none(),
    st.text(max_size=2),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(
        st.sampled_from(["workloadRef", "schedulingGroup", "containers", "nodeName"]),
        _VALUES,
        max_size=4,
    ),
)


@settings(max_examples=300, deadline=None)
@given(spec=_SPECS, with_spec=st.booleans())
def test_a_pods_immutable_fields_are_the_values_at_their_paths(spec: Any, with_spec: bool) -> None:
    raw: dict[str, Any] = {"metadata": {"name": "p"}}
    if with_spec:
        raw["spec"] = spec
    walked = tuple(_at(raw, path) for path in _FIELDS["pod"])
    if _in_no_gang(raw):  # the shortcut: no path walked
        assert walked == (None,) * len(walked)
    # all empty: the one tuple of Nones shared by the pods in no gang
    assert immutable_fields("pod", raw) == (walked if any(walked) else (None,) * len(walked))


def test_a_pod_in_no_gang_shares_one_tuple() -> None:
    first = immutable_fields("pod", make_pod("a"))
    assert first == (None, None)
    assert immutable_fields("pod", make_pod("b")) is first


# --- the cache: columns brought up to date when read ---------------------------------


def _cache(nodes: int = 4) -> Cache:
    cache = Cache(Clock(), ttl=30, unbound_ttl=300)
    for i in range(nodes):
        cache.add_or_update_node(make_node(f"n{i}", cpu="4", memory="4Gi", pods=20))
    return cache


def _same_columns(got: NodeColumns, cache: Cache) -> None:
    fresh = NodeColumns([n for n in cache.nodes.values() if n.raw_node is not None])
    assert list(got.index) == list(fresh.index)
    for column in ("num_pods", "nonzero_cpu", "nonzero_memory", "has_ports"):
        assert np.array_equal(getattr(got, column), getattr(fresh, column)), column
    for res, col in fresh._requested.items():
        assert np.array_equal(got._requested[res], col), res


def test_an_assume_whose_verdict_holds_writes_no_column() -> None:
    cache = _cache()
    columns = cache.cluster().columns
    version = columns.version
    raw = make_pod("a", cpu="100m")
    assert cache.verdict_holds(FW, raw, "n1", cache.nodes["n1"].generation)
    assert cache.assume_pod(FW, PodInfo.lazy(raw, 1), "n1", "ua", 1, validate=False).ok
    assert columns.version == version  # not at the assume...
    _same_columns(cache.cluster().columns, cache)  # ...but before anything reads them


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["assume", "forget", "add", "node"]),
        st.integers(0, 5),  # pod
        st.integers(0, 3),  # node
        st.booleans(),  # validate (reads the columns) or trust the verdict
    ),
    max_size=30,
)


@settings(max_examples=80, deadline=None)
@given(ops=_OPS)
def test_the_columns_validation_reads_are_the_nodes_as_they_are(
    ops: list[tuple[str, int, int, bool]],
) -> None:
    cache = _cache()
    columns = cache.cluster().columns
    version = columns.version
    for seq, (op, p, n, validate) in enumerate(ops, start=1):
        key, node = f"default/p{p}", f"n{n}"
        raw = make_pod(f"p{p}", cpu=f"{100 * (p + 1)}m", memory="10Mi")
        if op == "assume":
            cache.assume_pod(FW, PodInfo.of(raw, seq), node, f"u{p}", seq, validate=validate)
        elif op == "forget":
            cache.forget_pod(key, f"u{p}")
        elif op == "add":
            cache.add_pod(key, f"u{p}", node, PodInfo.of(raw, seq), seq)
        else:
            cache.add_or_update_node(make_node(node, cpu=f"{4 + p}", memory="4Gi", pods=20))
        if not validate:  # the nodes stay the same four: the columns are these ones
            assert columns.version == version  # written only when read
        if validate:
            _same_columns(cache.cluster().columns, cache)
        version = columns.version
    _same_columns(cache.cluster().columns, cache)


# --- the cache: the feed's delta of a node -------------------------------------------


def _pod(i: int, version: int) -> PodInfo:
    return PodInfo.lazy(make_pod(f"p{i}"), version)


@settings(max_examples=300, deadline=None)
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["append", "replace", "remove", "readd"]), st.integers(0, 6)),
        max_size=12,
    ),
    start=st.integers(0, 6),
)
def test_a_nodes_delta_is_every_pod_new_or_replaced_and_every_key_gone(
    ops: list[tuple[str, int]], start: int
) -> None:
    now: dict[str, PodInfo] = {}
    for i in range(start):
        now[f"default/p{i}"] = _pod(i, 1)
    known = [*now.values()]
    for version, (op, i) in enumerate(ops, start=2):
        key = f"default/p{i}"
        if op == "append" and key not in now:
            now[key] = _pod(i, version)
        elif op == "replace" and key in now:
            now[key] = _pod(i, version)  # in place: a re-versioned pod keeps its position
        elif op == "remove":
            now.pop(key, None)
        elif op == "readd" and key in now:
            now[key] = now.pop(key)  # removed and placed again: last
    by_key = {pod.key: pod for pod in known}
    added, removed = _changed(known, now)
    assert added == [pod for k, pod in now.items() if by_key.get(k) is not pod]
    assert removed == [k for k in by_key if k not in now]
