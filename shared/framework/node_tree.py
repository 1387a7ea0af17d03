"""kube-scheduler's nodeTree order: nodes interleaved across zones.

The scheduler walks nodes from a rotating start index and stops once it has found
enough feasible ones (percentageOfNodesToScore); interleaving zones makes that
sample spread over every zone instead of exhausting one zone first. kube-scheduler
keeps zones in the order it first saw them and nodes in insertion order; ksched's
workers rebuild the order from a snapshot, so zones and the nodes in each are sorted
by name, which keeps every worker's order the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import zip_longest
from operator import attrgetter

from shared.framework.types import NodeInfo


def node_tree_order(infos: Iterable[NodeInfo]) -> list[NodeInfo]:
    """Round-robin over zones: the first node of each zone, then the second, ..."""
    zones: dict[str, list[NodeInfo]] = {}
    for info in sorted(infos, key=attrgetter("name")):
        zones.setdefault(info.zone, []).append(info)
    columns = [zones[key] for key in sorted(zones)]
    return [info for row in zip_longest(*columns) for info in row if info is not None]
