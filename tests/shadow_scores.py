"""NodeResourcesFit's scores computed by hand, for the shadow tests: pods that ask cpu
and memory in the nodes' proportion (1 cpu : 4Gi) leave BalancedAllocation alike on
every node, so that the fit strategy alone decides (LeastAllocated or MostAllocated)."""

from __future__ import annotations

import copy
from dataclasses import dataclass

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

    @classmethod
    def of(cls, nodes: list[tuple[str, int, str]]) -> Cluster:
        alloc = {n: {"cpu": c * 1000, "memory": c * 4 * GI} for n, c, _ in nodes}
        return cls(alloc, copy.deepcopy(alloc))

    def best(self, cpu: int, most: bool) -> list[str]:
        ask = {"cpu": cpu * 1000, "memory": cpu * 4 * GI}
        scores = {
            n: fit_score({r: f[r] - ask[r] for r in f}, self.alloc[n], most)
            for n, f in self.free.items()
            if all(f[r] >= ask[r] for r in f)
        }
        top = max(scores.values(), default=None)
        return sorted(n for n, s in scores.items() if s == top)

    def place(self, node: str, cpu: int) -> None:
        self.free[node]["cpu"] -= cpu * 1000
        self.free[node]["memory"] -= cpu * 4 * GI
