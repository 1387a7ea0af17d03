"""PreEnqueue for the queue: a pod goes through the PreEnqueue plugins of its own
profile (kube's PriorityQueue.runPreEnqueuePlugins, per schedulerName), run by that
profile's framework."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.queue.podinfo import Gating, RunPreEnqueue
from shared.api.podstatus import scheduler_name
from shared.framework.runtime import Framework
from shared.framework.types import PodInfo


def run_pre_enqueue(frameworks: Mapping[str, Framework]) -> RunPreEnqueue:
    """The queue's PreEnqueue over the profiles' frameworks, by schedulerName. A pod of
    no profile passes: the worker reports that it has none."""

    def run(raw: dict[str, Any]) -> Gating | None:
        framework = frameworks.get(scheduler_name(raw))
        if framework is None:
            return None
        # Validated by the watcher; parsed only if a plugin reads more than the raw pod.
        status = framework.run_pre_enqueue_plugins(PodInfo.lazy(raw))
        return None if status.ok else Gating(status.plugin, status.message())

    return run
