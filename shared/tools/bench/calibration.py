"""The machine's speed, measured beside every benchmark run (docs/bench.md).

This machine's speed drifts by 2x from day to day and with the other work on it, so a
lone pods/s figure says little: each run records how long a plain Python loop takes
before and after it, and the reports quote ratios measured in the same run.
"""

from __future__ import annotations

import time

LOOP = 10_000_000  # additions


def calibrate() -> float:
    """Seconds for a plain Python loop of 10M additions."""
    started = time.perf_counter()
    total = 0
    for i in range(LOOP):
        total += i
    return time.perf_counter() - started
