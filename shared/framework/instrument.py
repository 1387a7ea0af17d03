"""How long the framework's extension points and plugins take, told to a recorder
(kube-scheduler's FrameworkExtensionPointDuration and PluginExecutionDuration, recorded
by framework/runtime and the queue's runPreEnqueuePlugins).

The framework stays free of Prometheus: it calls a `MetricsRecorder` that a service
wires to its registry (shared/runtime/framework_metrics.py). Without a recorder nothing
is timed. Extension points are timed on every call, as upstream; plugins only in a
sampled cycle (PLUGIN_METRICS_SAMPLE_PERCENT of them, decided when the cycle starts),
because a plugin runs once per node in Filter and Score.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from shared.framework.status import CODE_NAMES, Code, Status

# The extension_point label values (kube's metrics.PreFilter, metrics.Filter, ...).
PRE_ENQUEUE = "PreEnqueue"
PRE_FILTER = "PreFilter"
FILTER = "Filter"
PRE_FILTER_EXTENSION_ADD_POD = "PreFilterExtensionAddPod"
PRE_FILTER_EXTENSION_REMOVE_POD = "PreFilterExtensionRemovePod"
POST_FILTER = "PostFilter"
PRE_SCORE = "PreScore"
SCORE = "Score"
SCORE_EXTENSION_NORMALIZE = "ScoreExtensionNormalize"
RESERVE = "Reserve"
UNRESERVE = "Unreserve"
PERMIT = "Permit"
PRE_BIND = "PreBind"
BIND = "Bind"
POST_BIND = "PostBind"

# kube's pluginMetricsSamplePercent: a cycle records its plugins' durations or not.
PLUGIN_METRICS_SAMPLE_PERCENT = 10

SUCCESS_LABEL = CODE_NAMES[Code.SUCCESS]


def status_label(status: Status | None) -> str:
    """The status label: kube's Code.String() (a nil status is Success)."""
    return SUCCESS_LABEL if status is None else CODE_NAMES[status.code]


class MetricsRecorder(Protocol):
    def extension_point(self, point: str, status: str, profile: str, seconds: float) -> None:
        """scheduler_framework_extension_point_duration_seconds{extension_point,status,profile}"""

    def plugin(self, point: str, plugin: str, status: str, seconds: float) -> None:
        """scheduler_plugin_execution_duration_seconds{plugin,extension_point,status}"""


def observe_plugin(
    rec: MetricsRecorder, point: str, plugin: str, status: Status | None, start: float
) -> None:
    """One plugin's call at `point`, begun at `start` (perf_counter), to the recorder."""
    rec.plugin(point, plugin, status_label(status), time.perf_counter() - start)


def sampled(rng: random.Random) -> bool:
    """Whether a cycle records its plugins' durations (kube: rand.Intn(100) < 10)."""
    return rng.randrange(100) < PLUGIN_METRICS_SAMPLE_PERCENT


class Instrumented(Protocol):
    """What `timed` needs of the framework it times."""

    recorder: MetricsRecorder | None
    profile_name: str


FW = TypeVar("FW", bound=Instrumented)
P = ParamSpec("P")
R = TypeVar("R")
StatusOf = Callable[[Any], Status | None]


def _status(out: Any) -> Status | None:
    """The status a run_*_plugins method returned: itself, or a tuple's Status."""
    if isinstance(out, tuple):
        return next((x for x in out if isinstance(x, Status)), None)
    return out if isinstance(out, Status) else None


def timed(
    point: str, status_of: StatusOf = _status
) -> Callable[[Callable[Concatenate[FW, P], R]], Callable[Concatenate[FW, P], R]]:
    """Record the duration of a framework method that runs one extension point, with
    the status it returned (kube's deferred FrameworkExtensionPointDuration.Observe)."""

    def wrap(fn: Callable[Concatenate[FW, P], R]) -> Callable[Concatenate[FW, P], R]:
        @functools.wraps(fn)
        def run(fw: FW, *args: P.args, **kwargs: P.kwargs) -> R:
            recorder = fw.recorder
            if recorder is None:
                return fn(fw, *args, **kwargs)
            start = time.perf_counter()
            out = fn(fw, *args, **kwargs)
            seconds = time.perf_counter() - start
            recorder.extension_point(point, status_label(status_of(out)), fw.profile_name, seconds)
            return out

        return run

    return wrap


def timed_async(
    point: str, status_of: StatusOf = _status
) -> Callable[
    [Callable[Concatenate[FW, P], Awaitable[R]]], Callable[Concatenate[FW, P], Awaitable[R]]
]:
    """`timed` for the binding cycle's coroutines (PreBind, Bind, PostBind)."""

    def wrap(
        fn: Callable[Concatenate[FW, P], Awaitable[R]],
    ) -> Callable[Concatenate[FW, P], Awaitable[R]]:
        @functools.wraps(fn)
        async def run(fw: FW, *args: P.args, **kwargs: P.kwargs) -> R:
            recorder = fw.recorder
            if recorder is None:
                return await fn(fw, *args, **kwargs)
            start = time.perf_counter()
            out = await fn(fw, *args, **kwargs)
            seconds = time.perf_counter() - start
            recorder.extension_point(point, status_label(status_of(out)), fw.profile_name, seconds)
            return out

        return run

    return wrap


def always_success(out: Any) -> Status | None:
    """Unreserve and PostBind report Success whatever happened (as upstream)."""
    return None
