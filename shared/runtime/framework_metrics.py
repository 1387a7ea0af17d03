"""The framework's durations (shared/framework/instrument.py) into a service's
registry: scheduler_framework_extension_point_duration_seconds and, for sampled
cycles, scheduler_plugin_execution_duration_seconds."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry

from shared.framework.instrument import MetricsRecorder
from shared.framework.runtime import Framework
from shared.runtime import metrics
from shared.runtime.histogram import LabelledHistogram, Series


class _Observer:
    """A histogram family and the series of each label set seen, kept: extension
    points are observed on every cycle, several times."""

    def __init__(self, family: LabelledHistogram) -> None:
        self._family = family
        self._series: dict[tuple[str, str, str], Series] = {}

    def observe(self, key: tuple[str, str, str], seconds: float) -> None:
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = self._family.series(*key)
        series.observe(seconds)


class PrometheusRecorder(MetricsRecorder):
    def __init__(self, registry: CollectorRegistry) -> None:
        points = metrics.FRAMEWORK_EXTENSION_POINT_DURATION.cheap_histogram(registry)
        plugins = metrics.PLUGIN_EXECUTION_DURATION.cheap_histogram(registry)
        self._points, self._plugins = _Observer(points), _Observer(plugins)

    def extension_point(self, point: str, status: str, profile: str, seconds: float) -> None:
        self._points.observe((point, status, profile), seconds)

    def plugin(self, point: str, plugin: str, status: str, seconds: float) -> None:
        self._plugins.observe((plugin, point, status), seconds)


def record_frameworks(frameworks: Iterable[Framework], registry: CollectorRegistry) -> None:
    """Have every framework report its durations into `registry` (one recorder)."""
    recorder = PrometheusRecorder(registry)
    for framework in frameworks:
        framework.recorder = recorder
