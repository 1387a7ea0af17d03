"""PrioritySort: activeQ order — higher priority first, then the pod that waited longer.

Implements: QueueSortPlugin.
"""

from __future__ import annotations

from typing import Any

from shared.framework.handle import Handle
from shared.framework.interface import (
    QueuedSortablePod,
    QueueSortKeyPlugin,
    QueueSortPlugin,
    SortablePod,
)
from shared.framework.plugin_args import reject_unknown

NAME = "PrioritySort"


class PrioritySort(QueueSortPlugin, QueueSortKeyPlugin):
    name = NAME

    def sort_key(self, pod: QueuedSortablePod) -> tuple[Any, ...]:
        return (-pod.priority, pod.timestamp)

    def less(self, a: SortablePod, b: SortablePod) -> bool:
        if a.priority != b.priority:
            return a.priority > b.priority
        return a.timestamp < b.timestamp


def new(args: dict[str, Any], handle: Handle) -> PrioritySort:
    reject_unknown(NAME, args, ())
    return PrioritySort()
