"""Plugin interfaces and the per-pod view plugins read.

Only Filter and Score exist yet; the full set of extension points plugs in
here (PreFilter, PostFilter, Reserve, Permit, ...).
"""

from __future__ import annotations

from typing import Protocol

from shared.framework.status import Status
from shared.framework.types import NodeInfo, PodInfo

MAX_NODE_SCORE = 100


class Plugin(Protocol):
    name: str


class FilterPlugin(Plugin, Protocol):
    def filter(self, pod: PodInfo, node: NodeInfo) -> Status: ...


class ScorePlugin(Plugin, Protocol):
    def score(self, pod: PodInfo, node: NodeInfo) -> int: ...
