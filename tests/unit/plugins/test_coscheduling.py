"""Coscheduling (gang scheduling) and the pod groups the cache tracks for it."""

from __future__ import annotations

import pytest

from services.queue.hints import queue_sort_key
from services.queue.queue import SchedulingQueue
from shared.api.events import BadEvent, decode_cluster_event
from shared.config import ConfigError, parse_config
from shared.framework.cycle_state import CycleState
from shared.framework.handle import Handle
from shared.framework.profile_map import ProfileMap
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import Code
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins import REGISTRY, coscheduling
from shared.plugins.coscheduling import Coscheduling
from shared.podgroups import PodGroups
from shared.routing import Informer, route
from shared.wire import dump_json
from tests.builders import make_pod
from tests.unit.conftest import Clock

GANG_CONFIG = {
    "profiles": [
        {
            "plugins": {
                "multiPoint": {
                    "enabled": [{"name": "Coscheduling"}],
                    "disabled": [{"name": "PrioritySort"}],
                }
            }
        }
    ]
}


def plugin(groups: PodGroups | None = None, **args: int) -> Coscheduling:
    handle = Handle()
    if groups is not None:
        handle.providers.pod_groups = groups.records
    return coscheduling.new(dict(args), handle)


def member(name: str, group: str = "g", min_available: int | None = 3) -> PodInfo:
    return make_pod(name).gang(group, min_available).req(cpu="1").info(1)


def groups_with(*members: PodInfo) -> PodGroups:
    groups = PodGroups()
    for pod in members:
        groups.set_member(
            pod.key, f"default/{pod.pod.metadata.labels['scheduling.x-k8s.io/pod-group']}", True
        )
    return groups


def on_nodes(cs: Coscheduling, *placed: tuple[PodInfo, str]) -> None:
    infos: dict[str, NodeInfo] = {}
    for pod, node in placed:
        info = infos.setdefault(node, NodeInfo(node))
        info.add_pod(pod)
    cs.handle.snapshot = ClusterSnapshot(list(infos.values()))


# --- PreFilter ----------------------------------------------------------------------------


def test_prefilter_rejects_a_group_with_fewer_pods_than_min_member() -> None:
    a, b = member("a"), member("b")
    cs = plugin(groups_with(a, b))
    _, status = cs.pre_filter(CycleState(), a, [])
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == [
        "pre-filter pod a cannot find enough sibling pods, current pods number: 2, "
        "minMember of group: 3"
    ]
    cs = plugin(groups_with(a, b, member("c")))
    assert cs.pre_filter(CycleState(), a, [])[1].ok


def test_a_pod_in_no_group_or_a_group_without_min_member_is_a_regular_pod() -> None:
    cs = plugin(PodGroups())
    assert cs.pre_filter(CycleState(), make_pod("solo").info(), [])[1].code == Code.SKIP
    no_min = member("x", min_available=None)
    assert cs.pre_filter(CycleState(), no_min, [])[1].code == Code.SKIP
    assert cs.permit(CycleState(), no_min, "n1")[0].ok


def test_a_podgroup_object_wins_over_the_annotation() -> None:
    a = member("a", min_available=10)
    groups = groups_with(a, member("b"))
    groups.upsert_group("default/g", {"spec": {"minMember": 2, "scheduleTimeoutSeconds": 7}})
    cs = plugin(groups)
    assert cs.group(a) == ("default/g", 2, 7.0)
    assert cs.pre_filter(CycleState(), a, [])[1].ok


# --- Permit / Unreserve -------------------------------------------------------------------


def test_permit_waits_until_min_member_are_assumed_then_allows_the_group() -> None:
    a, b, c = member("a"), member("b"), member("c")
    cs = plugin(groups_with(a, b, c), permitWaitingTimeSeconds=9)
    on_nodes(cs, (a, "n1"), (b, "n2"), (make_pod("x").info(), "n1"))
    status, timeout = cs.permit(CycleState(), b, "n2")
    assert (status.code, timeout) == (Code.WAIT, 9.0)
    assert cs.handle.take_permit_signals() == []

    on_nodes(cs, (a, "n1"), (b, "n2"), (c, "n2"))
    status, _ = cs.permit(CycleState(), c, "n2")
    assert status.ok
    [signal] = cs.handle.take_permit_signals()
    assert (signal.verdict, signal.plugin, signal.namespace) == ("allow", "Coscheduling", "default")
    assert signal.matches("default", dict(a.pod.metadata.labels))


def test_a_member_another_lane_placed_but_the_cache_has_not_committed_does_not_count() -> None:
    """Its assume may still be refused: counting it would allow the gang short of
    minMember (three bound of a gang of four, when the fourth was refused)."""
    a, b, c = member("a"), member("b"), member("c")
    cs = plugin(groups_with(a, b, c))
    on_nodes(cs, (a, "n1"), (b, "n1"), (c, "n1"))
    cs.handle.providers.uncommitted = frozenset({b.key})
    assert cs.permit(CycleState(), c, "n1")[0].code == Code.WAIT
    cs.handle.providers.uncommitted = frozenset({c.key})  # the pod itself: committed by Permit time
    assert cs.permit(CycleState(), c, "n1")[0].ok


def test_members_of_another_namespace_or_group_do_not_count() -> None:
    a = member("a", min_available=2)
    elsewhere = make_pod("b", namespace="other").gang("g", 2).info()
    other_group = member("c", group="h", min_available=2)
    cs = plugin(groups_with(a))
    on_nodes(cs, (a, "n1"), (elsewhere, "n1"), (other_group, "n1"))
    assert cs.permit(CycleState(), a, "n1")[0].code == Code.WAIT


def test_unreserve_rejects_the_groups_waiting_pods() -> None:
    cs = plugin(PodGroups())
    cs.unreserve(CycleState(), member("a"), "n1")
    cs.unreserve(CycleState(), make_pod("solo").info(), "n1")  # no group: nothing
    [signal] = cs.handle.take_permit_signals()
    assert (signal.verdict, signal.message) == ("reject", "rejection in Unreserve")


def test_args_are_validated() -> None:
    with pytest.raises(ConfigError, match="permitWaitingTimeSeconds"):
        plugin(permitWaitingTimeSeconds=0)
    with pytest.raises(ConfigError, match="unknown field"):
        plugin(minMember=2)


# --- QueueSort and events -----------------------------------------------------------------


def test_queue_sort_keeps_a_groups_pods_together(clock: Clock) -> None:
    q = SchedulingQueue(
        clock, sort_key=queue_sort_key(ProfileMap(parse_config(GANG_CONFIG), REGISTRY))
    )
    order = [("g1-a", "g1"), ("solo-1", ""), ("g2-a", "g2"), ("g1-b", "g1"), ("solo-2", "")]
    for i, (name, group) in enumerate(order):
        clock.now += 1
        pod = make_pod(name).gang(group, 2) if group else make_pod(name)
        q.add(f"default/{name}", f"uid-{i}", pod.obj(), i + 1)
    clock.now += 1
    q.add("default/urgent", "uid-u", make_pod("urgent").priority(10).obj(), 99)
    popped = [p.key.split("/")[1] for p in q.pop(10)]
    assert popped == ["urgent", "g1-a", "g1-b", "solo-1", "g2-a", "solo-2"]


def test_every_profile_must_use_the_same_queue_sort() -> None:
    two = {"profiles": [GANG_CONFIG["profiles"][0], {"schedulerName": "other"}]}
    with pytest.raises(ConfigError, match="same queueSort"):
        queue_sort_key(ProfileMap(parse_config(two), REGISTRY))


def test_a_new_sibling_moves_a_gang_pod_coscheduling_rejected(clock: Clock) -> None:
    from services.queue.hints import hints_of

    profiles = ProfileMap(parse_config(GANG_CONFIG), REGISTRY)
    q = SchedulingQueue(clock, hints=hints_of(profiles), sort_key=queue_sort_key(profiles))
    q.add("default/a", "uid-a", make_pod("a").gang("g", 2).obj(), 1)
    q.add("default/x", "uid-x", make_pod("x").gang("other", 2).obj(), 2)
    for p in q.pop(2):
        assert q.failed(p.key, p.cycle, unschedulable=True, message="", plugins=["Coscheduling"])
    clock.now += 60  # past any backoff
    q.add("default/b", "uid-b", make_pod("b").gang("g", 2).obj(), 3)
    assert q.get("default/a").where in ("active", "backoff")  # type: ignore[union-attr]
    assert q.get("default/x").where == "unschedulable"  # type: ignore[union-attr]


# --- PodGroups, the watcher and the cache ----------------------------------------------------


def test_pod_groups_count_members_and_keep_their_records_current() -> None:
    groups = PodGroups()
    groups.set_member("default/a", "default/g", True)
    groups.set_member("default/a", "default/g", True)
    groups.set_member("default/b", "default/g", True)
    assert groups.records["default/g"] == {"object": False, "members": 2}
    groups.upsert_group(
        "default/g", {"metadata": {"creationTimestamp": "t"}, "spec": {"minMember": 3}}
    )
    assert groups.records["default/g"] == {
        "min_member": 3,
        "timeout": None,
        "created": "t",
        "object": True,
        "members": 2,
    }
    groups.set_member("default/a", "default/g", False)
    groups.set_member("default/b", "default/g", False)
    groups.delete_group("default/g")
    assert groups.records == {} and groups.take_dirty() == {"default/g"}


def test_the_watcher_routes_podgroups_to_the_cache_and_as_cluster_events() -> None:
    seen = Informer()
    raw = {"kind": "PodGroup", "spec": {"minMember": 2}}
    ev = decode_cluster_event(
        "ksched.cluster.podgroups.default.g", dump_json({"type": "ADDED", "object": raw}), None, 5
    )
    to_queue, to_cache = route(ev, frozenset({"default-scheduler"}), seen)
    assert to_cache == [{"op": "podgroup_upsert", "name": "default/g", "podgroup": ev.raw}]
    assert [(e["resource"], e["action"]) for e in to_queue] == [("PodGroup", "Add")]
    to_queue, _ = route(ev, frozenset({"default-scheduler"}), seen)
    assert [(e["resource"], e["action"]) for e in to_queue] == [("PodGroup", "Update")]

    pod = make_pod("a").gang("g", 2).obj()
    ev = decode_cluster_event(
        "ksched.cluster.pods.default.a", dump_json({"type": "DELETED", "object": pod}), None, 6
    )
    _, to_cache = route(ev, frozenset({"default-scheduler"}), seen)
    assert {"op": "group_member", "name": "default/a", "group": "default/g", "present": False} in (
        to_cache
    )


def test_a_bad_podgroup_is_refused_with_the_field() -> None:
    raw = {"kind": "PodGroup", "spec": {"minMember": -1}}
    with pytest.raises(BadEvent, match="minMember"):
        decode_cluster_event(
            "ksched.cluster.podgroups.default.g",
            dump_json({"type": "ADDED", "object": raw}),
            None,
            1,
        )
