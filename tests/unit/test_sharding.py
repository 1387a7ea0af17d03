"""Partitions and shard ownership (shared/sharding.py): the hash is FNV-1a 32 as
nats-server's mapping uses it, and every partition has exactly one owner."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.sharding import (
    PARTITIONS,
    ShardMap,
    WatcherShard,
    fnv1a_32,
    mapping_config,
    misplaced_partition,
    node_partition,
    partition,
    pod_partition,
    stored_pod_subject,
    use_partitions,
)
from shared.subjects import object_of_subject, pod_subject, public_subject


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


def test_plain_and_dotted_pod_names_are_both_mapped_and_the_probe_answered() -> None:
    config = mapping_config(64)
    pod = "ksched.partitioned.pods.{{partition(64,1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}"
    assert f'"ksched.cluster.pods.*.*": "{pod}"' in config
    assert f'"ksched.cluster.pods.*.*.>": "{pod}.>"' in config
    probe = '"ksched.probe.partitions.*": "ksched.probe.partitioned.{{wildcard(1)}}.64"'
    assert probe in config
    assert "nodes" not in config  # node subjects stay as published


@pytest.mark.parametrize(
    ("subject", "named"),
    [
        ("ksched.partitioned.pods.7.default.web", ("pod", "default", "web")),
        ("ksched.partitioned.pods.63.ns.web.v1.a", ("pod", "ns", "web.v1.a")),
        ("ksched.cluster.pods.default.web", ("pod", "default", "web")),
        ("ksched.partitioned.pods.x.default.web", None),  # no partition number
        ("ksched.partitioned.pods.7.default", None),  # no name
    ],
)
def test_a_stored_pod_subject_names_the_pod_its_public_one_does(
    subject: str, named: tuple[str, str, str] | None
) -> None:
    assert object_of_subject(subject) == named
    if named is not None:
        assert public_subject(subject) == pod_subject(named[1], named[2])


def test_a_pod_is_read_back_by_its_partitions_subject_only_with_the_mapping() -> None:
    try:
        use_partitions(None)
        assert stored_pod_subject("default", "web.v1") == "ksched.cluster.pods.default.web.v1"
        use_partitions(PARTITIONS)
        part = pod_partition("default", "web")
        assert stored_pod_subject("default", "web.v1") == (
            f"ksched.partitioned.pods.{part}.default.web.v1"
        )
        with pytest.raises(ValueError, match="maps pods into 32 partitions; ksched needs 64"):
            use_partitions(32)
    finally:
        use_partitions(None)


@pytest.mark.parametrize("shards", [2, 3])
def test_with_the_mapping_each_shard_consumes_its_own_partitions_and_shard_0_the_rest(
    shards: int,
) -> None:
    filters = [WatcherShard(shards, s).filter_subjects(PARTITIONS) for s in range(shards)]
    parts = [
        {int(f.split(".")[3]) for f in fs if f.startswith("ksched.partitioned.pods.")}
        for fs in filters
    ]
    assert sorted(p for own in parts for p in own) == list(range(PARTITIONS))
    assert filters[0][0] == "ksched.cluster.>"  # every other kind, unmapped pods too
    assert all(fs[0] == "ksched.cluster.priorityclasses.>" for fs in filters[1:])
    for s, own in enumerate(parts):  # what it consumes is what it handles
        shard = WatcherShard(shards, s)
        assert all(shard.handles(f"ksched.partitioned.pods.{p}.ns.pod") for p in own)
        assert not any(
            shard.handles(f"ksched.partitioned.pods.{p}.ns.pod")
            for p in set(range(PARTITIONS)) - own
        )


def test_without_the_mapping_every_shard_reads_the_whole_stream() -> None:
    assert WatcherShard(2, 1).filter_subjects(None) == ["ksched.cluster.>"]
    assert WatcherShard(1, 0).filter_subjects(None) == ["ksched.cluster.>"]
    assert WatcherShard(1, 0).filter_subjects(PARTITIONS) == [
        "ksched.cluster.>",
        "ksched.partitioned.pods.>",
    ]


def test_a_pod_published_under_another_partition_than_the_mappings_is_misplaced() -> None:
    part = pod_partition("default", "web")
    stored = f"ksched.partitioned.pods.{part}.default.web"
    assert misplaced_partition(stored) is None
    assert misplaced_partition(f"{stored}.v1") is None  # a dotted name: its first token
    wrong = f"ksched.partitioned.pods.{(part + 1) % PARTITIONS}.default.web"
    reason = misplaced_partition(wrong)
    assert reason is not None and "publish on ksched.cluster.pods.default.web" in reason
    assert misplaced_partition("ksched.partitioned.pods.x.default.web") is not None
    assert misplaced_partition("ksched.partitioned.pods.3.default") is not None
    assert misplaced_partition("ksched.cluster.pods.default.web") is None
