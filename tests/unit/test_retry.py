"""retry_forever (shared/runtime/retry.py): tries until the action succeeds, and, given
`until`, gives a failing action up once the service stops instead of retrying it
through the shutdown grace."""

from __future__ import annotations

import asyncio

import pytest

from shared.runtime.retry import Stopped, retry_forever


class Flaky:
    def __init__(self, failures: int) -> None:
        self.failures, self.calls = failures, 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError("no responders")
        return "done"


async def test_a_failing_action_is_tried_until_it_succeeds() -> None:
    action = Flaky(failures=3)
    assert await retry_forever("act", action, max_delay=0.01) == "done"
    assert action.calls == 4


async def test_a_stopping_service_gives_the_action_up_between_tries() -> None:
    action, stopping = Flaky(failures=10**6), asyncio.Event()
    task = asyncio.create_task(retry_forever("deliver", action, max_delay=60, until=stopping))
    while action.calls < 3:  # backing off: the next try is up to a minute away
        await asyncio.sleep(0.01)
    stopping.set()
    with pytest.raises(Stopped, match="deliver: no responders"):
        await asyncio.wait_for(task, 5)  # not a minute: the wait ends with the event


async def test_until_does_not_stop_an_action_that_succeeds() -> None:
    stopping = asyncio.Event()
    stopping.set()
    assert await retry_forever("act", Flaky(failures=0), until=stopping) == "done"
