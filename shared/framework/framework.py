"""The scheduling framework for one profile: runs Filter and Score plugins over nodes.

The parts of kube-scheduler's schedulePod that do not depend on I/O live here,
so the worker (choosing a node) and the cache (validating an assume) share them.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from shared.framework.interface import FilterPlugin, ScorePlugin
from shared.framework.status import SUCCESS, Status
from shared.framework.types import NodeInfo, PodInfo

NO_NODES_AVAILABLE = "no nodes available to schedule pods"


@dataclass
class Diagnosis:
    """Why nodes were rejected: node name -> the failing plugin's status."""

    node_to_status: dict[str, Status] = field(default_factory=dict)
    unschedulable_plugins: set[str] = field(default_factory=set)


class FitError(Exception):
    def __init__(self, pod_key: str, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        super().__init__(pod_key)
        self.pod_key = pod_key
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis

    def message(self) -> str:
        """kube-scheduler's FitError.Error(): `0/N nodes are available: <histogram>.`"""
        if self.num_all_nodes == 0:
            return NO_NODES_AVAILABLE
        histogram: Counter[str] = Counter()
        for status in self.diagnosis.node_to_status.values():
            histogram.update(status.reasons)
        parts = sorted(f"{count} {reason}" for reason, count in histogram.items())
        return f"0/{self.num_all_nodes} nodes are available: {', '.join(parts)}."


@dataclass
class Framework:
    profile: str
    filters: list[FilterPlugin]
    scores: list[tuple[ScorePlugin, int]]  # (plugin, weight)

    def run_filters(self, pod: PodInfo, node: NodeInfo) -> Status:
        for plugin in self.filters:
            status = plugin.filter(pod, node)
            if not status.ok:
                status.plugin = plugin.name
                return status
        return SUCCESS

    def find_nodes_that_fit(
        self, pod: PodInfo, nodes: Iterable[NodeInfo]
    ) -> tuple[list[NodeInfo], Diagnosis]:
        feasible: list[NodeInfo] = []
        diagnosis = Diagnosis()
        for node in nodes:
            status = self.run_filters(pod, node)
            if status.ok:
                feasible.append(node)
            else:
                diagnosis.node_to_status[node.name] = status
                diagnosis.unschedulable_plugins.add(status.plugin)
        return feasible, diagnosis

    def prioritize(self, pod: PodInfo, nodes: list[NodeInfo]) -> list[int]:
        totals = [0] * len(nodes)
        for plugin, weight in self.scores:
            for i, node in enumerate(nodes):
                totals[i] += plugin.score(pod, node) * weight
        return totals


def select_host(nodes: list[NodeInfo], scores: list[int], rng: random.Random) -> NodeInfo:
    """Highest total score; ties broken uniformly at random (reservoir sampling)."""
    best = 0
    ties = 1
    for i in range(1, len(nodes)):
        if scores[i] > scores[best]:
            best, ties = i, 1
        elif scores[i] == scores[best]:
            ties += 1
            if rng.randrange(ties) == 0:
                best = i
    return nodes[best]


def default_framework(profile: str) -> Framework:
    from shared.plugins.noderesourcesfit import NodeResourcesFit

    fit = NodeResourcesFit()
    return Framework(profile=profile, filters=[fit], scores=[(fit, 1)])
