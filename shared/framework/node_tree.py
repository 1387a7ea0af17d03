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

from shared.framework.types import NodeInfo

LABEL_REGION = "topology.kubernetes.io/region"
LABEL_ZONE = "topology.kubernetes.io/zone"


def zone_key(labels: dict[str, str]) -> str:
    """utilnode.GetZoneKey: region and zone, '' when the node has neither."""
    region, zone = labels.get(LABEL_REGION, ""), labels.get(LABEL_ZONE, "")
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


def node_tree_order(infos: Iterable[NodeInfo]) -> list[NodeInfo]:
    """Round-robin over zones: the first node of each zone, then the second, ..."""
    zones: dict[str, list[NodeInfo]] = {}
    for info in sorted(infos, key=lambda n: n.name):
        zones.setdefault(zone_key(info.labels), []).append(info)
    columns = [zones[key] for key in sorted(zones)]
    return [info for row in zip_longest(*columns) for info in row if info is not None]
