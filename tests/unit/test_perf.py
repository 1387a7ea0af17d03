"""SchedulingThroughput computed as scheduler_perf's throughputCollector does."""

from __future__ import annotations

import pytest

from shared.tools.bench.perf import ThroughputCollector


def feed(counts: list[int], times: list[float] | None = None) -> ThroughputCollector:
    collector = ThroughputCollector()
    for i, count in enumerate(counts):
        collector.sample(times[i] if times else float(i + 1), count)
    return collector


def test_waits_for_scheduled_pods_then_drops_the_first_sample() -> None:
    collector = feed([0, 0, 40, 140, 240])
    assert collector.samples == [100.0, 100.0]


def test_an_interval_without_new_pods_is_not_a_zero_sample() -> None:
    # 100 pods, then nothing for two intervals, then 300 more: the 300 are spread over
    # the three intervals and recorded three times.
    collector = feed([10, 110, 110, 110, 410])
    assert collector.samples == [100.0, 100.0, 100.0, 100.0]


def test_rates_use_the_actual_time_between_samples() -> None:
    collector = feed([5, 105, 305], times=[1.0, 2.0, 3.25])
    assert collector.samples == [100.0, 160.0]


def test_summary_takes_percentiles_at_ceil_index() -> None:
    collector = ThroughputCollector(samples=[float(v) for v in range(1, 11)])
    summary = collector.summary()
    assert summary["Average"] == pytest.approx(5.5)
    # n = 10: Perc50 at index ceil(5)-1 = 4, Perc90 at ceil(9)-1 = 8,
    # Perc95 at ceil(9.5)-1 = 9, Perc99 at ceil(9.9)-1 = 9.
    assert (summary["Perc50"], summary["Perc90"], summary["Perc95"], summary["Perc99"]) == (
        5.0,
        9.0,
        10.0,
        10.0,
    )


def test_too_short_a_run_has_no_summary() -> None:
    assert feed([0, 50]).summary() == {}
