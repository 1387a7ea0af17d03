"""NodeResourcesFit's scores computed by hand, for the shadow tests: pods that ask cpu
and memory in the nodes' proportion (1 cpu : 4Gi) leave BalancedAllocation alike on
every node, so that the fit strategy alone decides (LeastAllocated or MostAllocated)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from shared.framework.types import LABEL_ZONE

GI = 2**30


def fit_score(free_after: dict[str, int], alloc: dict[str, int], most: bool) -> int:
    """NodeResourcesFit's score, computed here by hand (kube's resource_allocation with
    cpu and memory weighted 1): per resource (alloc-requested)*100/alloc (LeastAllocated)
    or requested*100/alloc (MostAllocated), integer maths, averaged."""
    total = 0
    for r in ("cpu", "memory"):
        used = alloc[r] - free_after[r]
        total += (used if most else alloc[r] - used) * 100 // alloc[r]
    return total // 2


@dataclass
class Cluster:
    """The cluster as the log leaves it, with the best nodes by hand for a pod."""

    alloc: dict[str, dict[str, int]]
    free: dict[str, dict[str, int]]
    zones: dict[str, str]

    @classmethod
    def of(cls, nodes: list[tuple[str, int, str]]) -> Cluster:
        alloc = {n: {"cpu": c * 1000, "memory": c * 4 * GI} for n, c, _ in nodes}
        return cls(alloc, copy.deepcopy(alloc), {n: z for n, _, z in nodes})

    def scores(self, cpu: int, most: bool, fit_weight: int = 1, zone: str = "") -> dict[str, int]:
        """The weighted sum of the plugins that tell nodes apart, per feasible node:
        NodeResourcesFit, and for a pod preferring `zone` NodeAffinity (weight 2; its
        score normalized to 100 on the matching nodes when one is feasible, else 0)."""
        ask = {"cpu": cpu * 1000, "memory": cpu * 4 * GI}
        fit = {
            n: fit_score({r: f[r] - ask[r] for r in f}, self.alloc[n], most)
            for n, f in self.free.items()
            if all(f[r] >= ask[r] for r in f)
        }
        return {n: fit_weight * s + 2 * 100 * (self.zones[n] == zone) for n, s in fit.items()}

    def best(self, cpu: int, most: bool, fit_weight: int = 1, zone: str = "") -> list[str]:
        scores = self.scores(cpu, most, fit_weight, zone)
        top = max(scores.values(), default=None)
        return sorted(n for n, s in scores.items() if s == top)

    def place(self, node: str, cpu: int) -> None:
        self.free[node]["cpu"] -= cpu * 1000
        self.free[node]["memory"] -= cpu * 4 * GI


def prefer_zone(pod: dict[str, Any], zone: str) -> dict[str, Any]:
    """The pod with a preferred node affinity (weight 1) for `zone`."""
    term = {"key": LABEL_ZONE, "operator": "In", "values": [zone]}
    preferred = [{"weight": 1, "preference": {"matchExpressions": [term]}}]
    pod["spec"]["affinity"] = {
        "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}
    }
    return pod


def fit_weight_config(weight: int) -> dict[str, Any]:
    """The default profile with NodeResourcesFit's Score weight changed."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": weight}]}},
            }
        ],
    }
