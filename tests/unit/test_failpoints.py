"""Failpoints, the test hook that wedges a service on purpose (runtime/failpoints.py)."""

from __future__ import annotations

import asyncio

import pytest

from shared.runtime import failpoints


def test_failpoints_parse() -> None:
    assert failpoints.parse("") == {}
    assert failpoints.parse("consume.handle=hang") == {"consume.handle": "hang"}
    assert failpoints.parse(" a = hang ; b=block; ") == {"a": "hang", "b": "block"}
    assert failpoints.parse("worker.handed=pause:2.5") == {"worker.handed": "pause:2.5"}


@pytest.mark.parametrize(
    "spec", ["consume.handle", "=hang", "consume.handle=panic", "a=pause", "a=pause:-1"]
)
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


async def test_pause_returns_after_its_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(failpoints, "_ACTIVE", {"worker.handed": "pause:0.2"})
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(failpoints.hit("worker.handed"), 0.05)
    await asyncio.wait_for(failpoints.hit("worker.handed"), 2)
