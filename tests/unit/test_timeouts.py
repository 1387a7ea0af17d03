"""within (shared/runtime/timeouts.py): a time limit that never swallows a cancel.

Python 3.11's asyncio.wait_for returned the result when the waiting task was cancelled
in the same loop iteration as the result arrived, and the task ran on: a leader's
hold() cancelled at shutdown just as a renewal landed renewed for ever (CI)."""

from __future__ import annotations

import asyncio

import pytest

from shared.runtime.timeouts import within


async def _spin(turns: int) -> None:
    for _ in range(turns):
        await asyncio.sleep(0)


async def test_a_cancel_that_meets_the_result_still_cancels() -> None:
    answer: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    after: list[int] = []

    async def waiting() -> None:
        after.append(await within(answer, 60))
        await asyncio.Event().wait()  # where a swallowed cancel would leave it

    task = asyncio.create_task(waiting())
    await _spin(2)  # the task now waits on `answer`
    answer.set_result(7)
    task.cancel()  # the same iteration: before the task has seen the result
    await _spin(5)
    assert task.cancelled(), f"the cancel was swallowed: the task went on with {after}"


async def _holding(answers: asyncio.Queue[str], tries: list[str]) -> None:
    """The shape of the elector's hold(): tries (coroutines, not futures) in a loop
    that only a cancel ends."""

    async def attempt() -> str:
        return await answers.get()

    while True:
        tries.append(await within(attempt(), 60))


async def test_a_cancel_that_meets_a_coroutines_end_still_cancels() -> None:
    """The cancel sent at each iteration around a try's end."""
    for delay in range(4):
        answers: asyncio.Queue[str] = asyncio.Queue()
        tries: list[str] = []
        task = asyncio.create_task(_holding(answers, tries))
        await _spin(2)
        answers.put_nowait("renewed")
        await _spin(delay)
        task.cancel()
        await _spin(10)
        assert task.cancelled(), f"swallowed with the cancel {delay} iterations after"
        assert tries in ([], ["renewed"])


async def test_the_limit_raises_timeout_and_cancels_what_it_waited_on() -> None:
    blocked = asyncio.create_task(asyncio.Event().wait())
    with pytest.raises(TimeoutError):
        await within(blocked, 0.01)
    assert blocked.cancelled()


@pytest.mark.parametrize("seconds", [None, 0.0, -1.0, 60.0])
async def test_a_ready_result_is_returned_whatever_the_limit(seconds: float | None) -> None:
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    ready.set_result("ok")
    assert await within(ready, seconds) == "ok"  # a limit already past expires later
