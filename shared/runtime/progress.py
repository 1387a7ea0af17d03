"""Whether a service makes progress, not merely whether its threads live.

A leader can wedge while everything around it looks healthy: a handler retries the
same undeliverable batch forever, or the event loop is blocked, while the lease
thread keeps renewing and /readyz keeps answering. The tracker records what the
process is doing, and `stalled(now)` says why it is not getting anywhere:

- a unit of work (one batch handed to a consumer's handler, one request answered)
  in progress for longer than the stall limit;
- the event loop's heartbeat (a task ticking every HEARTBEAT_SECONDS) older than the
  limit: the loop is blocked;
- a backlog (a consumer's pending messages) that nothing has worked on for longer
  than the limit: no unit of work completed, and the backlog did not shrink, since
  it appeared.

Health (/livez, /readyz) and the lease (runtime/elector.py) ask it; the runtime
(runtime/service.py) installs one tracker per process, and the shared loops report
to it (runtime/consume.py, runtime/rpc.py) without the services passing it along.

The lease thread reads it while the event loop writes it: reads are plain
attribute reads and C-level dict copies, atomic under the GIL; nothing here calls
into asyncio from another thread.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from types import TracebackType

HEARTBEAT_SECONDS = 0.5
DEFAULT_STALL_SECONDS = 30.0

Clock = Callable[[], float]


class Progress:
    """Units of work, the loop's heartbeat and backlogs, judged against `limit`
    seconds (0: never stalled)."""

    def __init__(self, limit: float, clock: Clock = time.monotonic) -> None:
        self.limit = limit
        self.clock = clock
        started = clock()
        # token -> (what, since); insertion order is start order, so the first entry
        # is the oldest unit still in progress
        self._working: dict[int, tuple[str, float]] = {}
        self._tokens = itertools.count()
        self.completed_at = started  # when a unit of work last ended
        self.beat_at: float | None = None  # the loop's last heartbeat (None: not beating)
        self.lag = 0.0  # how late the last heartbeat ticked
        # what -> (pending, since: when it appeared or last shrank)
        self._backlogs: dict[str, tuple[int, float]] = {}

    # --- what the process reports ------------------------------------------------

    def begin(self, what: str) -> int:
        token = next(self._tokens)
        self._working[token] = (what, self.clock())
        return token

    def end(self, token: int) -> None:
        self._working.pop(token, None)
        self.completed_at = self.clock()

    def work(self, what: str) -> Work:
        """`with progress.work("handling a batch"): ...`: one unit of work, ended
        however it ends (an exception ends it too: the process moved on)."""
        return Work(self, what)

    def beat(self, now: float, lag: float = 0.0) -> None:
        self.beat_at, self.lag = now, lag

    async def heartbeat(self, interval: float = HEARTBEAT_SECONDS) -> None:
        """Tick until cancelled: the time of each tick, and how late it came."""
        self.beat(self.clock())
        while True:
            due = self.clock() + interval
            await asyncio.sleep(interval)
            now = self.clock()
            self.beat(now, max(now - due, 0.0))

    def backlog(self, what: str, pending: int) -> None:
        """How much work waits on `what` (e.g. a consumer's pending messages)."""
        previous = self._backlogs.get(what)
        if pending <= 0:
            self._backlogs.pop(what, None)
        elif previous is None or pending < previous[0]:
            self._backlogs[what] = (pending, self.clock())  # appeared, or moved
        else:
            self._backlogs[what] = (pending, previous[1])

    # --- what health and the lease ask -------------------------------------------

    def worst(self, now: float) -> tuple[float, str]:
        """The longest the process has gone without progress on something it has to
        do, and what (0 s, "" when it has nothing to do)."""
        age, what = 0.0, ""
        working = self._working.copy()
        if working:
            doing, since = next(iter(working.values()))
            age, what = now - since, doing
        beat_at = self.beat_at
        if beat_at is not None and now - beat_at > age:
            age, what = now - beat_at, "no event loop heartbeat"
        completed_at = self.completed_at
        for name, (pending, since) in self._backlogs.copy().items():
            idle = now - max(since, completed_at)
            if idle > age:
                age, what = idle, f"{pending} pending on {name} and no work done"
        return age, what

    def age(self, now: float) -> float:
        return self.worst(now)[0]

    def stalled(self, now: float) -> str | None:
        """Why the process is stalled, or None while it makes progress."""
        if self.limit <= 0:
            return None
        age, what = self.worst(now)
        if age <= self.limit:
            return None
        return f"{what} for {age:.1f} s (stall limit {self.limit:g} s)"


class Work:
    """One unit of work of a Progress, as a context manager (cheaper than a
    generator-based one: it wraps every request and batch)."""

    __slots__ = ("_progress", "_token", "_what")

    def __init__(self, progress: Progress, what: str) -> None:
        self._progress = progress
        self._what = what
        self._token = -1

    def __enter__(self) -> None:
        self._token = self._progress.begin(self._what)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._progress.end(self._token)


# The process's tracker: the runtime installs its own; until then (tools, tests
# driving the shared loops without a runtime) one that nobody reads.
_process = Progress(0)


def current() -> Progress:
    return _process


def install(progress: Progress) -> None:
    global _process
    _process = progress
