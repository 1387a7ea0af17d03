"""A watch event's JSON is decoded as json.loads decodes it, errors included
(shared/wire.py: a shortcut for the common body, json.loads for the rest)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.wire import DecodeError, decode_user_payload

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def _expected(data: bytes) -> tuple[str, Any]:
    try:
        return "ok", json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        return "error", f"invalid JSON: {err}"
    except ValueError as err:  # int(): more than 4300 digits
        return "raised", str(err)


def _got(data: bytes) -> tuple[str, Any]:
    try:
        return "ok", decode_user_payload(data, None)
    except DecodeError as err:
        return "error", str(err)
    except ValueError as err:
        return "raised", str(err)


@settings(max_examples=300, deadline=None)
@given(
    value=st.dictionaries(st.text(), _JSON, max_size=5),
    encoding=st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32"]),
    cut=st.integers(min_value=0, max_value=8),
    tail=st.sampled_from(["", " ", "\n", "}", "x", "\ud800"]),
)
def test_the_same_value_or_error_as_json_loads(
    value: dict[str, Any], encoding: str, cut: int, tail: str
) -> None:
    text = json.dumps(value, ensure_ascii=False) + tail
    data = text.encode(encoding, "surrogatepass")
    for body in (data, data[: len(data) - cut]):
        assert _got(body) == _expected(body)


@pytest.mark.parametrize(
    "body",
    [
        b'{"a": 1}',
        b'{"a": "\xed\xa0\x80"}',  # a lone surrogate: json.loads lets it pass
        b'{"a": 1} ',
        b'{"a": 1}}',
        b'{\x00"a": 1}',
        b"{}",
        b'{"a": 1e400}',
        b'{"a": ' + b"1" * 5000 + b"}",  # more digits than int() takes
    ],
)
def test_bodies_at_the_shortcut_s_edges(body: bytes) -> None:
    assert _got(body) == _expected(body)
