"""PreEnqueue for the queue: a pod goes through the PreEnqueue plugins of its own
profile (kube's PriorityQueue.runPreEnqueuePlugins, per schedulerName), run by that
profile's framework."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.queue.podinfo import Gating, RunPreEnqueue
from shared.api.podstatus import scheduler_name
from shared.framework.runtime import Framework
from shared.framework.types import PodInfo, PodResources


def run_pre_enqueue(frameworks: Mapping[str, Framework]) -> RunPreEnqueue:
    """The queue's PreEnqueue over the profiles' frameworks, by schedulerName. A pod of
    no profile passes: the worker reports that it has none."""

    def run(raw: dict[str, Any]) -> Gating | None:
        framework = frameworks.get(scheduler_name(raw))
        if framework is None:
            return None
        # Validated by the watcher; parsed only if a plugin reads more than the raw pod.
        status = framework.run_pre_enqueue_plugins(EnqueuedPod(raw))
        return None if status.ok else Gating(status.plugin, status.message())

    return run


class EnqueuedPod(PodInfo):
    """The pod PreEnqueue sees (PodInfo.lazy), its resources worked out only when a
    plugin reads them: no in-tree PreEnqueue plugin does, and every pod added to the
    queue goes through PreEnqueue (PodResources.of packs a key per pod)."""

    __slots__ = ("_resources",)

    def __init__(self, raw: dict[str, Any]) -> None:
        self._resources: PodResources | None = None
        super().__init__(None, raw, None)  # type: ignore[arg-type]  # set below, lazily

    @property
    def resources(self) -> PodResources:
        if self._resources is None:
            self._resources = PodResources.of(self.raw)
        return self._resources

    @resources.setter
    def resources(self, value: PodResources | None) -> None:
        self._resources = value
