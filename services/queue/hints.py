"""Queueing hints: which cluster events may make a rejected pod schedulable.

kube-scheduler's QueueingHintMapPerProfile, isEventOfInterest and isPodWorthRequeuing,
built from the `events_to_register` of each profile's plugins. Pure: the queue
asks, nothing here does I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from services.queue.podinfo import SortKey, priority_sort_key
from shared.api.models import DEFAULT_SCHEDULER_NAME
from shared.api.podgroup import SchedulingPodGroup
from shared.api.workload import Workload
from shared.config import ConfigError
from shared.framework.events import (
    NODE,
    WORKLOAD,
    WORKLOAD_POD_GROUP,
    QueueingHintFn,
    event_label,
    is_wildcard,
    match_cluster_events,
)
from shared.framework.interface import (
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    FilterPlugin,
    PermitPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    QueueSortKeyPlugin,
    ReservePlugin,
)
from shared.framework.runtime import Framework
from shared.framework.types import NodeInfo, PodInfo

log = logging.getLogger("ksched.queue.hints")
_UNKNOWN: frozenset[str] = frozenset({"<not computed yet>"})  # interested_plugins' memo

# A plugin that registers no events may be helped by anything (kube's
# defaultEnqueueExtension, UnrollWildCardResource for the resources ksched knows).
_ANY_EVENT = (ClusterEvent("Pod", "All"), ClusterEvent(NODE, "All"))
# Only these can reject a pod, so only their registrations count (shouldHaveEnqueueExtensions).
_REJECTING = (PreEnqueuePlugin, PreFilterPlugin, FilterPlugin, ReservePlugin, PermitPlugin)


def to_hint_object(resource: str, raw: Mapping[str, Any] | None) -> Any:
    """The object a hint sees: a NodeInfo without pods for nodes, else a PodInfo."""
    if raw is None:
        return None
    if resource == NODE:
        name = str((raw.get("metadata") or {}).get("name") or "")
        info = NodeInfo(name)
        info.set_node(dict(raw))
        return info
    if resource == WORKLOAD:
        return Workload.model_validate(dict(raw))
    if resource == WORKLOAD_POD_GROUP:
        return SchedulingPodGroup.model_validate(dict(raw))
    return PodInfo.of(dict(raw))


class ObservedEvent:
    """A cluster event with its objects as published (old is None for an Add, new
    for a Delete); the typed objects hints read are built once, when first needed."""

    __slots__ = ("__dict__", "event", "new_raw", "old_raw")

    def __init__(
        self,
        event: ClusterEvent,
        old: Mapping[str, Any] | None = None,
        new: Mapping[str, Any] | None = None,
    ) -> None:
        self.event = event
        self.old_raw = old
        self.new_raw = new

    @property
    def label(self) -> str:
        return event_label(self.event)

    @cached_property
    def old(self) -> Any:
        return to_hint_object(self.event.resource, self.old_raw)

    @cached_property
    def new(self) -> Any:
        return to_hint_object(self.event.resource, self.new_raw)


@dataclass(frozen=True)
class Registration:
    """One registered event of one plugin, with its hint (None: always Queue)."""

    plugin: str
    event: ClusterEvent
    hint: QueueingHintFn | None = None


def registrations(plugins: Iterable[Any]) -> list[Registration]:
    """The registrations of the plugins that can reject a pod; one of those without
    EnqueueExtensions registers every event."""
    out: list[Registration] = []
    for plugin in plugins:
        if not isinstance(plugin, _REJECTING):
            continue  # Score-only and the like: they never reject a pod
        if isinstance(plugin, EnqueueExtensions):
            events: Iterable[ClusterEventWithHint] = plugin.events_to_register()
        else:
            events = [ClusterEventWithHint(e) for e in _ANY_EVENT]
        for e in events:
            hint = e.hint if callable(e.hint) else None
            out.append(Registration(plugin.name, e.event, hint))
    return out


PodInfoOf = Callable[[], PodInfo]


class QueueingHints:
    """The registrations of every profile, indexed by the events they match."""

    def __init__(self, per_profile: Mapping[str, list[Registration]]) -> None:
        self._per_profile = {name: list(regs) for name, regs in per_profile.items()}
        self._matching: dict[tuple[str, ClusterEvent], list[Registration]] = {}
        self._interested: dict[ClusterEvent, frozenset[str] | None] = {}
        self.errors = 0  # hints that raised (counted as Queue)

    @classmethod
    def from_plugins(cls, per_profile: Mapping[str, Iterable[Any]]) -> QueueingHints:
        return cls({name: registrations(plugins) for name, plugins in per_profile.items()})

    def _registrations_for(self, profile: str, event: ClusterEvent) -> list[Registration]:
        key = (profile, event)
        found = self._matching.get(key)
        if found is None:
            regs = self._per_profile.get(profile, [])
            found = [r for r in regs if match_cluster_events(r.event, event)]
            self._matching[key] = found
        return found

    def interested_plugins(self, event: ClusterEvent) -> frozenset[str] | None:
        """Plugins (of any profile) registered for the event; None for a wildcard event,
        which concerns every plugin. An empty set: no plugin cares (isEventOfInterest)."""
        found = self._interested.get(event, _UNKNOWN)
        if found is _UNKNOWN:
            if is_wildcard(event):
                found = None
            else:
                found = frozenset(
                    r.plugin for p in self._per_profile for r in self._registrations_for(p, event)
                )
            self._interested[event] = found
        return found

    def is_event_of_interest(self, event: ClusterEvent) -> bool:
        interested = self.interested_plugins(event)
        return interested is None or bool(interested)

    def worth_requeuing(
        self,
        pod_raw: Mapping[str, Any],
        rejectors: Iterable[str],
        ev: ObservedEvent,
        pod: PodInfoOf,
    ) -> bool:
        """isPodWorthRequeuing: a pod rejected by no plugin, or a wildcard event, always;
        else only if a rejecting plugin registered the event and its hint says Queue."""
        rejected_by = set(rejectors)
        if not rejected_by or is_wildcard(ev.event):
            return True
        profile = str((pod_raw.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER_NAME)
        if profile not in self._per_profile:
            return True  # upstream: "shouldn't reach here"; never strand the pod
        for reg in self._registrations_for(profile, ev.event):
            if reg.plugin not in rejected_by:
                continue
            if reg.hint is None or self._call(reg, pod, ev):
                return True
        return False

    def _call(self, reg: Registration, pod: PodInfoOf, ev: ObservedEvent) -> bool:
        assert reg.hint is not None
        try:
            return bool(reg.hint(pod(), ev.old, ev.new))
        except Exception as err:  # a failing hint must not strand the pod: Queue
            self.errors += 1
            log.warning("queueing hint of %s failed on %s: %s", reg.plugin, ev.label, err)
            return True


def hints_of(frameworks: Mapping[str, Framework]) -> QueueingHints:
    """Each profile's plugins, as its framework instantiated them, with their events."""
    return QueueingHints.from_plugins(
        {name: fw.plugins.instances.values() for name, fw in frameworks.items()}
    )


def queue_sort_key(frameworks: Mapping[str, Framework]) -> SortKey:
    """activeQ's order from the profiles' QueueSort plugin. As kube-scheduler, every
    profile must use the same one: there is one queue."""
    sorts = [fw.queue_sort for fw in frameworks.values()]
    if len({p.name for p in sorts}) > 1:
        raise ConfigError(
            "profiles: every profile must use the same queueSort plugin, got "
            + ", ".join(sorted({p.name for p in sorts}))
        )
    plugin = sorts[0] if sorts else None
    if not isinstance(plugin, QueueSortKeyPlugin):
        return priority_sort_key
    return plugin.sort_key
