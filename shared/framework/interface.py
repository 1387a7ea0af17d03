"""Plugin interfaces and the per-pod view plugins read.

Only Filter and Score exist yet; the full set of extension points plugs in
here (PreFilter, PostFilter, Reserve, Permit, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from shared.api.models import Pod
from shared.framework.nodeinfo import NodeInfo, PodResources
from shared.framework.status import Status

MAX_NODE_SCORE = 100


@dataclass(frozen=True)
class PodInfo:
    """A pending pod as the cycle sees it: model, raw object, and derived resources."""

    pod: Pod
    raw: dict[str, Any]
    resources: PodResources

    @classmethod
    def of(cls, raw: dict[str, Any]) -> PodInfo:
        return cls(Pod.model_validate(raw), raw, PodResources.of(raw))

    @property
    def key(self) -> str:
        return self.pod.key


class Plugin(Protocol):
    name: str


class FilterPlugin(Plugin, Protocol):
    def filter(self, pod: PodInfo, node: NodeInfo) -> Status: ...


class ScorePlugin(Plugin, Protocol):
    def score(self, pod: PodInfo, node: NodeInfo) -> int: ...
