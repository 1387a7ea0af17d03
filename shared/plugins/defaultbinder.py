"""DefaultBinder: write the binding through the binder service's publish (handle.bind_pod).

Implements: BindPlugin.
"""

from __future__ import annotations

from typing import Any

from shared.framework.cycle_state import CycleState
from shared.framework.handle import Handle
from shared.framework.interface import BindPlugin
from shared.framework.plugin_args import reject_unknown
from shared.framework.status import Code, Status
from shared.framework.types import PodInfo

NAME = "DefaultBinder"


class DefaultBinder(BindPlugin):
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        if self.handle.bind_pod is None:
            return Status(Code.ERROR, ["no binder configured"])
        return await self.handle.bind_pod(pod, node_name)


def new(args: dict[str, Any], handle: Handle) -> DefaultBinder:
    reject_unknown(NAME, args, ())
    return DefaultBinder(handle)
