"""Fixtures shared by the pure unit tests."""

from __future__ import annotations

import pytest


class Clock:
    """A clock the test moves by hand (`clock.now += 30`)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()
