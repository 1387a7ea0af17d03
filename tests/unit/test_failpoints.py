"""Failpoints, the test hook that wedges a service on purpose (runtime/failpoints.py)."""

from __future__ import annotations

import asyncio

import pytest

from shared.runtime import failpoints


def test_failpoints_parse() -> None:
    assert failpoints.parse("") == {}
    assert failpoints.parse("consume.handle=hang") == {"consume.handle": "hang"}
    assert failpoints.parse(" a = hang ; b=block; ") == {"a": "hang", "b": "block"}


@pytest.mark.parametrize("spec", ["consume.handle", "=hang", "consume.handle=panic"])
def test_a_bad_failpoint_is_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="KSCHED_FAILPOINTS"):
        failpoints.parse(spec)


async def test_an_unset_failpoint_does_nothing_and_hang_never_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await asyncio.wait_for(failpoints.hit("consume.handle"), 1)
    monkeypatch.setattr(failpoints, "_ACTIVE", {"consume.handle": "hang"})
    await asyncio.wait_for(failpoints.hit("other"), 1)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(failpoints.hit("consume.handle"), 0.1)
