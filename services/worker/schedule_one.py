"""The scheduling cycle for one pod against a snapshot (kube-scheduler's schedulePod).

Pure: the worker service feeds it pods and a snapshot, and does the I/O.
"""

from __future__ import annotations

import random

from shared.framework.framework import Diagnosis, FitError, Framework, select_host
from shared.framework.types import NodeInfo, PodInfo


def schedule_pod(
    framework: Framework, pod: PodInfo, nodes: list[NodeInfo], rng: random.Random
) -> NodeInfo:
    """Filter, then Score the feasible nodes and pick the best; raises FitError."""
    if not nodes:
        raise FitError(pod.key, 0, Diagnosis())
    feasible, diagnosis = framework.find_nodes_that_fit(pod, nodes)
    if not feasible:
        raise FitError(pod.key, len(nodes), diagnosis)
    if len(feasible) == 1:  # as kube-scheduler: nothing to rank
        return feasible[0]
    return select_host(feasible, framework.prioritize(pod, feasible), rng)
