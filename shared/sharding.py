"""Partitions and shard ownership for issue 21's sharding (docs/scale.md §4), pure.

The watcher's input is split by nats-server's subject mapping, whose
`{{partition(n, i, ...)}}` puts a subject in bucket FNV-1a-32(tokens i, ... joined
with nothing) mod n. Workers and cache shards must agree with the server about which
partition a pod or node is in without asking it, so this module computes the same
function; `tests/e2e/test_partition_mapping.py` checks it against a real
nats-server with the mapping below.

Partitions are fixed (`PARTITIONS`); shards own partitions (`ShardMap`), so a shard
joining or leaving moves whole partitions and never re-hashes a pod.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shared.subjects import NODES_PREFIX, PODS_PREFIX

PARTITIONS = 64  # fixed: many more than shards, so ownership moves in small steps

_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193


def fnv1a_32(data: bytes) -> int:
    h = _FNV32_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return h


def partition(tokens: Sequence[str], partitions: int = PARTITIONS) -> int:
    """nats-server's `{{partition(partitions, ...)}}` of these subject tokens."""
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, not {partitions}")
    return fnv1a_32("".join(tokens).encode()) % partitions


def pod_partition(namespace: str, name: str, partitions: int = PARTITIONS) -> int:
    """A pod's partition: its namespace and the first token of its name (a dotted name
    spans several subject tokens; the mapping hashes wildcards 1 and 2 only)."""
    return partition((namespace, name.split(".", 1)[0]), partitions)


def node_partition(name: str, partitions: int = PARTITIONS) -> int:
    """A node's partition: the first token of its name (FQDN node names have dots)."""
    return partition((name.split(".", 1)[0],), partitions)


def mapping_config(partitions: int = PARTITIONS) -> str:
    """The nats-server configuration's `mappings` block that inserts each pod's and
    node's partition after the kind: `ksched.cluster.pods.<p>.<ns>.<name>`,
    `ksched.cluster.nodes.<p>.<name>`. Two lines per kind: `*` matches one token, and
    dotted names need the `>` form."""
    pod = f"{{{{partition({partitions},1,2)}}}}.{{{{wildcard(1)}}}}.{{{{wildcard(2)}}}}"
    node = f"{{{{partition({partitions},1)}}}}.{{{{wildcard(1)}}}}"
    lines = [
        f'  "{PODS_PREFIX}.*.*": "{PODS_PREFIX}.{pod}"',
        f'  "{PODS_PREFIX}.*.*.>": "{PODS_PREFIX}.{pod}.>"',
        f'  "{NODES_PREFIX}.*": "{NODES_PREFIX}.{node}"',
        f'  "{NODES_PREFIX}.*.>": "{NODES_PREFIX}.{node}.>"',
    ]
    return "mappings = {\n" + "\n".join(lines) + "\n}\n"


@dataclass(frozen=True)
class ShardMap:
    """Which shard owns each partition: dealt round-robin over `shards`."""

    shards: int
    partitions: int = PARTITIONS

    def __post_init__(self) -> None:
        if not 1 <= self.shards <= self.partitions:
            raise ValueError(f"shards must be 1 to {self.partitions}, not {self.shards}")

    def owner(self, part: int) -> int:
        return part % self.shards

    def partitions_of(self, shard: int) -> range:
        return range(shard, self.partitions, self.shards)

    def node_owner(self, name: str) -> int:
        return self.owner(node_partition(name, self.partitions))

    def pod_owner(self, namespace: str, name: str) -> int:
        return self.owner(pod_partition(namespace, name, self.partitions))
