"""SchedulingThroughput as kube-scheduler's scheduler_perf computes it (pure).

scheduler_perf samples the number of scheduled measured pods every second. It
waits for the first sample with any pod scheduled and drops it (sampling and pod
creation start independently, so it is an outlier). An interval in which no new pod
was scheduled is not recorded as 0 pods/s: the next interval that sees new pods
records its rate once for itself and once per skipped interval. The summary is the
average and the Perc50/90/95/99 of the sorted samples, each percentile taken at
index ceil(n * p / 100) - 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

SAMPLE_INTERVAL = 1.0  # seconds, scheduler_perf's throughputSampleInterval
PERCENTILES = (50, 90, 95, 99)


@dataclass
class ThroughputCollector:
    """Feed `sample(now, scheduled)` once per interval; read `summary()` at the end."""

    samples: list[float] = field(default_factory=list)
    _started: bool = False
    _last_count: int = 0
    _last_time: float = 0.0
    _skipped: int = 0

    def sample(self, now: float, scheduled: int) -> None:
        """`scheduled`: measured pods bound so far, seen at time `now` (seconds)."""
        if scheduled == 0:
            return
        if not self._started:
            self._started = True
            self._last_count, self._last_time = scheduled, now
            return
        new = scheduled - self._last_count
        if new == 0:
            self._skipped += 1
            return
        duration = now - self._last_time  # the actual time, not the nominal interval
        rate = new / duration if duration > 0 else 0.0
        self.samples.extend([rate] * (self._skipped + 1))
        self._last_count, self._last_time, self._skipped = scheduled, now, 0

    def summary(self) -> dict[str, float]:
        """Average and percentiles in pods/s; empty if no sample was recorded (a run
        shorter than two intervals)."""
        if not self.samples:
            return {}
        ordered = sorted(self.samples)
        n = len(ordered)
        result = {"Average": sum(ordered) / n}
        for p in PERCENTILES:
            result[f"Perc{p}"] = ordered[math.ceil(n * p / 100) - 1]
        return result
