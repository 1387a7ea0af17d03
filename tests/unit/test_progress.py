"""The progress tracker (runtime/progress.py) on a clock the tests move by hand."""

from __future__ import annotations

import asyncio
import threading

import pytest

from shared.runtime.progress import Progress
from tests.unit.conftest import Clock

LIMIT = 30.0


@pytest.fixture
def progress(clock: Clock) -> Progress:
    return Progress(LIMIT, clock)


def test_an_idle_process_is_not_stalled(progress: Progress, clock: Clock) -> None:
    clock.now += 10 * LIMIT  # nothing to do for a long time is no stall
    assert progress.stalled(clock.now) is None
    assert progress.age(clock.now) == 0


def test_a_unit_of_work_in_progress_past_the_limit_is_a_stall(
    progress: Progress, clock: Clock
) -> None:
    with progress.work("handling a batch from consumer watcher-1"):
        clock.now += LIMIT
        assert progress.stalled(clock.now) is None  # at the limit: not yet
        clock.now += 1
        assert progress.stalled(clock.now) == (
            "handling a batch from consumer watcher-1 for 31.0 s (stall limit 30 s)"
        )
        assert progress.age(clock.now) == LIMIT + 1
    assert progress.stalled(clock.now) is None  # it ended: the process moved on


def test_the_oldest_unit_in_progress_counts(progress: Progress, clock: Clock) -> None:
    old = progress.begin("old")
    clock.now += 20
    young = progress.begin("young")
    clock.now += 15
    assert progress.stalled(clock.now) == "old for 35.0 s (stall limit 30 s)"
    progress.end(old)
    assert progress.stalled(clock.now) is None
    clock.now += 20
    assert progress.stalled(clock.now) == "young for 35.0 s (stall limit 30 s)"
    progress.end(young)


def test_a_unit_that_raises_still_ends(progress: Progress, clock: Clock) -> None:
    with pytest.raises(RuntimeError), progress.work("failing"):
        raise RuntimeError("boom")
    clock.now += 2 * LIMIT
    assert progress.stalled(clock.now) is None
    assert progress.completed_at == clock.now - 2 * LIMIT


def test_a_late_heartbeat_means_a_blocked_loop(progress: Progress, clock: Clock) -> None:
    clock.now += 100
    assert progress.stalled(clock.now) is None  # not beating yet: nothing to judge
    progress.beat(clock.now, lag=0.2)
    assert progress.lag == 0.2
    clock.now += LIMIT + 0.5
    assert progress.stalled(clock.now) == ("no event loop heartbeat for 30.5 s (stall limit 30 s)")
    progress.beat(clock.now)
    assert progress.stalled(clock.now) is None


def test_a_backlog_nothing_works_on_is_a_stall(progress: Progress, clock: Clock) -> None:
    clock.now += 100  # long idle: the last unit of work ended long ago
    progress.backlog("consumer binder", 12)
    clock.now += LIMIT  # measured from when the backlog appeared
    assert progress.stalled(clock.now) is None
    progress.backlog("consumer binder", 40)  # growing is no progress
    clock.now += 1
    assert progress.stalled(clock.now) == (
        "40 pending on consumer binder and no work done for 31.0 s (stall limit 30 s)"
    )
    progress.backlog("consumer binder", 39)  # shrinking is
    assert progress.stalled(clock.now) is None
    clock.now += LIMIT + 1
    assert progress.stalled(clock.now) is not None
    with progress.work("a batch"):  # so is finishing a unit of work
        pass
    assert progress.stalled(clock.now) is None
    clock.now += LIMIT + 1
    progress.backlog("consumer binder", 0)  # drained
    assert progress.stalled(clock.now) is None


def test_a_limit_of_zero_turns_the_check_off(clock: Clock) -> None:
    progress = Progress(0, clock)
    progress.begin("forever")
    progress.beat(clock.now)
    clock.now += 1e6
    assert progress.stalled(clock.now) is None
    assert progress.age(clock.now) == 1e6  # still measured


async def test_the_heartbeat_ticks_and_measures_its_lag() -> None:
    progress = Progress(LIMIT)
    beating = asyncio.create_task(progress.heartbeat(0.01))
    await asyncio.sleep(0.05)
    first = progress.beat_at
    assert first is not None
    await asyncio.sleep(0.05)
    assert progress.beat_at is not None and progress.beat_at > first
    assert 0 <= progress.lag < 1
    beating.cancel()
    with pytest.raises(asyncio.CancelledError):
        await beating


def test_reading_from_another_thread_while_the_loop_writes(clock: Clock) -> None:
    """The lease thread asks while units begin and end: no error, ever."""
    progress = Progress(LIMIT, clock)
    done = threading.Event()
    errors: list[BaseException] = []

    def read() -> None:
        try:
            while not done.is_set():
                progress.stalled(clock.now)
        except BaseException as err:
            errors.append(err)

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(50_000):
        token = progress.begin("unit")
        progress.backlog(f"consumer {i % 7}", i % 5)
        progress.end(token)
    done.set()
    reader.join()
    assert errors == []
