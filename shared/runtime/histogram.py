"""A labelled Prometheus histogram cheap enough for the scheduling cycle.

prometheus_client's Histogram takes a lock, and `labels()` builds and looks up a key,
on every observation: about 2 µs, and the framework observes several times a cycle
(shared/framework/instrument.py). Here an observation is a bisect and two additions
on plain lists; the registry reads the series at scrape time. For one thread only: a
service's event loop observes and serves /metrics (shared/runtime/http.py).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString


class Series:
    """One label set: a count per bucket (the last for +Inf) and the sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        # bisect_left: the first bucket whose upper bound is >= value (`le` is inclusive)
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value


class LabelledHistogram(Collector):
    """A histogram family registered in `registry`; `series(*labels)` is kept by the
    caller and observed directly."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str],
        buckets: Sequence[float],
        registry: CollectorRegistry,
    ) -> None:
        self._name, self._doc, self._labels = name, documentation, list(labels)
        self._bounds = sorted(buckets)
        self._les = [floatToGoString(b) for b in self._bounds] + ["+Inf"]
        self._series: dict[tuple[str, ...], Series] = {}
        registry.register(self)

    def series(self, *labels: str) -> Series:
        found = self._series.get(labels)
        if found is None:
            if len(labels) != len(self._labels):
                raise ValueError(f"{self._name} takes labels {self._labels}, got {labels}")
            found = self._series[labels] = Series(self._bounds)
        return found

    def describe(self) -> list[HistogramMetricFamily]:
        return [HistogramMetricFamily(self._name, self._doc, labels=self._labels)]

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(self._name, self._doc, labels=self._labels)
        for labels, series in list(self._series.items()):
            cumulative, buckets = 0, []
            for le, count in zip(self._les, list(series.counts), strict=True):
                cumulative += count
                buckets.append((le, float(cumulative)))
            family.add_metric(list(labels), buckets, series.sum)
        yield family
