"""Partitions and shard ownership (shared/sharding.py): the hash is FNV-1a 32 as
nats-server's mapping uses it, and every partition has exactly one owner."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.sharding import (
    PARTITIONS,
    ShardMap,
    fnv1a_32,
    mapping_config,
    node_partition,
    partition,
    pod_partition,
)


@pytest.mark.parametrize(
    ("data", "expected"),
    [(b"", 0x811C9DC5), (b"a", 0xE40C292C), (b"foobar", 0xBF9CF968)],  # published vectors
)
def test_fnv1a_32_matches_the_published_vectors(data: bytes, expected: int) -> None:
    assert fnv1a_32(data) == expected


def test_tokens_are_hashed_joined_with_nothing() -> None:
    assert partition(("ns", "web"), 7) == partition(("nsweb",), 7) == fnv1a_32(b"nsweb") % 7


def test_dotted_names_hash_by_their_first_token() -> None:
    assert pod_partition("default", "web.v1.a") == pod_partition("default", "web.v1.b")
    assert node_partition("ip-10-0-0-1.ec2.internal") == node_partition("ip-10-0-0-1")


@given(shards=st.integers(1, PARTITIONS))
def test_every_partition_has_exactly_one_owner(shards: int) -> None:
    smap = ShardMap(shards)
    owned = sorted(p for s in range(shards) for p in smap.partitions_of(s))
    assert owned == list(range(PARTITIONS))
    assert all(smap.owner(p) == s for s in range(shards) for p in smap.partitions_of(s))
    sizes = {len(smap.partitions_of(s)) for s in range(shards)}
    assert max(sizes) - min(sizes) <= 1  # dealt evenly


@pytest.mark.parametrize("shards", [0, PARTITIONS + 1])
def test_a_shard_count_out_of_range_is_refused(shards: int) -> None:
    with pytest.raises(ValueError, match="shards must be"):
        ShardMap(shards)


def test_plain_and_dotted_names_of_pods_and_nodes_are_both_mapped() -> None:
    config = mapping_config(64)
    pod = "ksched.cluster.pods.{{partition(64,1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}"
    node = "ksched.cluster.nodes.{{partition(64,1)}}.{{wildcard(1)}}"
    assert f'"ksched.cluster.pods.*.*": "{pod}"' in config
    assert f'"ksched.cluster.pods.*.*.>": "{pod}.>"' in config
    assert f'"ksched.cluster.nodes.*": "{node}"' in config
    assert f'"ksched.cluster.nodes.*.>": "{node}.>"' in config
