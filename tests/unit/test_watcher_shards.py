"""Watcher shards (shared/sharding.py, WatcherShard): which shard handles which subject,
read from the subject alone; their names; the settings that choose one; and the state
marker's `applied` per shard (runtime/watermark.py)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.runtime.settings import Settings
from shared.runtime.watermark import Marker, Watermark, lost_at_takeover
from shared.sharding import (
    ShardMap,
    WatcherShard,
    consumer_lane,
    delivery_lane,
)

LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
NAME = st.lists(LABEL, min_size=1, max_size=3).map(".".join)


@given(st.integers(2, 5), LABEL, NAME)
def test_exactly_one_shard_handles_a_pod_the_one_owning_its_partition(
    shards: int, namespace: str, name: str
) -> None:
    subject = f"ksched.cluster.pods.{namespace}.{name}"
    handling = [s for s in range(shards) if WatcherShard(shards, s).handles(subject)]
    assert handling == [ShardMap(shards).pod_owner(namespace, name)]


@pytest.mark.parametrize(
    "subject",
    [
        "ksched.cluster.nodes.node-1",
        "ksched.cluster.nodes.node-1.example.com",
        "ksched.cluster.pdbs.ns.pdb",
        "ksched.cluster.workloads.ns.w",
        "ksched.cluster.podgroups.ns.g",
        "ksched.cluster.services.ns.s",
        "ksched.cluster.replicasets.ns.r",
        "ksched.cluster.pods.only-a-namespace",  # malformed: refused once, by shard 0
    ],
)
def test_shard_0_alone_handles_every_other_kind(subject: str) -> None:
    assert [s for s in range(3) if WatcherShard(3, s).handles(subject)] == [0]


def test_every_shard_reads_priority_classes_and_shard_0_reports_them() -> None:
    subject = "ksched.cluster.priorityclasses.high"
    assert all(WatcherShard(3, s).handles(subject) for s in range(3))
    assert [s for s in range(3) if WatcherShard(3, s).reports(subject)] == [0]


def test_one_shard_is_the_unsharded_watcher_named_as_before() -> None:
    one = WatcherShard()
    assert one.handles("ksched.cluster.pods.a.b") and one.handles("ksched.cluster.nodes.n")
    assert (one.lane, one.consumer_name(7)) == ("watcher", "watcher-7")
    assert (WatcherShard(3, 2).lane, WatcherShard(3, 2).consumer_name(7)) == (
        "watcher.2",
        "watcher-2-7",
    )


@pytest.mark.parametrize(
    ("name", "lane"),
    [
        ("watcher", "watcher"),
        ("watcher-12", "watcher"),
        ("watcher-2-12", "watcher.2"),
        ("watcher-x", None),
        ("watcher-1-2-3", None),
        ("bench-tracker", None),
    ],
)
def test_a_consumer_name_says_whose_it_is(name: str, lane: str | None) -> None:
    assert consumer_lane(name) == lane


@pytest.mark.parametrize(
    ("body", "lane"),
    [
        ({"epoch": 3}, "watcher"),
        ({"epoch": 3, "shard": 1}, "watcher.1"),
        ({"epoch": 3, "shard": True}, None),
        ({"epoch": 3, "shard": "1"}, None),
        ({"epoch": 3, "shard": -1}, None),
        ({"epoch": 3, "shard": 10**6}, None),
    ],
)
def test_a_delivery_names_its_watcher_shard(body: dict[str, Any], lane: str | None) -> None:
    assert delivery_lane(body) == lane


def test_settings_choose_the_shard_and_its_lease() -> None:
    assert Settings.from_env("watcher", {}).lease_name == "watcher"
    env = {"KSCHED_SHARDS": "3", "KSCHED_SHARD": "2"}
    assert Settings.from_env("watcher", env).lease_name == "watcher.2"
    assert Settings.from_env("queue", env).lease_name == "queue.2"
    assert Settings.from_env("cache", env).lease_name == "cache"  # not sharded yet


@pytest.mark.parametrize(
    ("env", "error"),
    [
        ({"KSCHED_SHARDS": "two"}, "KSCHED_SHARDS must be a whole number"),
        ({"KSCHED_SHARDS": "0"}, "KSCHED_SHARDS must be from 1 to 64"),
        ({"KSCHED_SHARDS": "65"}, "KSCHED_SHARDS must be from 1 to 64"),
        ({"KSCHED_SHARDS": "2", "KSCHED_SHARD": "2"}, "KSCHED_SHARD must be from 0 to 1"),
        ({"KSCHED_SHARD": "1"}, "KSCHED_SHARD must be from 0 to 0"),
    ],
)
def test_settings_refuse_a_shard_out_of_range(env: dict[str, str], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        Settings.from_env("watcher", env)


def test_each_shard_applies_its_own_interleaved_share_of_the_stream() -> None:
    mark = Watermark("queue")
    mark.start(4, 100)
    mark.through(130, "watcher.1")
    mark.through(120, "watcher.0")
    mark.through(110, "watcher.1")  # redelivered: never goes back
    assert (mark.applied, mark.lanes) == (100, {"watcher.1": 130, "watcher.0": 120})


def test_the_marker_keeps_each_shards_applied() -> None:
    raw = {b"incarnation": b"7", b"applied": b"100", b"writes": b"3", b"applied:watcher.1": b"130"}
    marker = Marker.of(raw)
    assert marker == Marker(7, 100, 3, {"watcher.1": 130})
    assert (marker.applied_by("watcher.1"), marker.applied_by("watcher.0")) == (130, 100)


@pytest.mark.parametrize(
    ("acked", "lost"),
    [
        ({"watcher.0": 120, "watcher.1": 130}, None),
        ({"watcher.0": 100, "watcher.1": 125}, None),  # acked less than applied
        # shard 0 acked past its applied: one number (the max over shards) hid this
        ({"watcher.0": 125, "watcher.1": 130}, "events applied through sequence 120"),
        ({"watcher.2": 101}, "events applied through sequence 100"),  # only the floor
    ],
)
def test_a_takeover_compares_each_shards_ack_floor_with_its_own_applied(
    acked: dict[str, int], lost: str | None
) -> None:
    marker = Marker(7, 100, 3, {"watcher.0": 120, "watcher.1": 130})
    why = lost_at_takeover(marker, acked)
    assert (why is None) == (lost is None), why
    assert lost is None or (why is not None and why.startswith(lost))
