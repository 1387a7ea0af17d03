"""GangScheduling (Workload API gangs): PreEnqueue, Permit, events, and the queue's
gating of a gang until minCount of its pods exist."""

from __future__ import annotations

from typing import Any

import pytest

from services.queue import gangs
from services.queue.hints import hints_of, to_hint_object
from services.queue.preenqueue import run_pre_enqueue
from services.queue.queue import SchedulingQueue
from shared.api.podgroup import SchedulingPodGroup
from shared.api.workload import Workload
from shared.config import ConfigError, parse_config
from shared.framework.cycle_state import CycleState
from shared.framework.events import ADD, WORKLOAD, WORKLOAD_POD_GROUP
from shared.framework.handle import Handle
from shared.framework.interface import ClusterEvent, ClusterObjects
from shared.framework.profile_map import ProfileMap
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import Code
from shared.framework.types import NodeInfo, PodInfo
from shared.framework.waiting_pods import PermitSignal
from shared.plugins import REGISTRY, gangscheduling
from shared.plugins.gangscheduling import GangScheduling
from shared.tools.synthetic import make_scheduling_pod_group, make_workload
from tests.builders import make_pod
from tests.unit.conftest import Clock

GANG_CONFIG: dict[str, Any] = {
    "profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "GangScheduling"}]}}}]
}


def workload(name: str = "job", **groups: int | None) -> Workload:
    return Workload.model_validate(make_workload(name, groups or {"workers": 3}))


def plugin(*workloads: Workload, members: dict[str, set[str]] | None = None) -> GangScheduling:
    objects = ClusterObjects()
    objects.workloads = {w.key: w for w in workloads}
    objects.gang_members = members or {}
    handle = Handle(ClusterSnapshot([], objects))
    return gangscheduling.new({"schedulingTimeoutSeconds": 7}, handle)


def member(name: str, group: str = "workers", wl: str = "job", replica: str = "") -> PodInfo:
    return make_pod(name).workload(wl, group, replica).req(cpu="1").info(1)


def place(gs: GangScheduling, *placed: tuple[PodInfo, str]) -> None:
    infos: dict[str, NodeInfo] = {}
    for pod, node in placed:
        infos.setdefault(node, NodeInfo(node)).add_pod(pod)
    gs.handle.snapshot = ClusterSnapshot(list(infos.values()), gs.handle.snapshot.objects)


GANG = "default/job/workers"

# --- PreEnqueue ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "workloads", "members", "message"),
    [
        ("plain", [], {}, None),
        (
            "a",
            [],
            {},
            'waiting for pods\'s workload "job" to appear in scheduling queue',
        ),
        (
            "other-group",
            [workload()],
            {},
            'pod group "ps" doesn\'t exist for a workload "job"',
        ),
        ("basic", [workload(workers=None)], {}, None),
        (
            "a",
            [workload()],
            {GANG: {"default/a", "default/b"}},
            "waiting for minCount pods from a gang to appear in scheduling queue",
        ),
        ("a", [workload()], {GANG: {"default/a", "default/b", "default/c"}}, None),
        # The pod itself counts even before the queue has filed it.
        ("c", [workload()], {GANG: {"default/a", "default/b"}}, None),
    ],
)
def test_pre_enqueue_waits_for_the_workload_its_group_and_min_count_pods(
    pod: str, workloads: list[Workload], members: dict[str, set[str]], message: str | None
) -> None:
    info = {
        "plain": make_pod("plain").info(1),
        "other-group": member("x", group="ps"),
        "basic": member("basic"),
    }.get(pod) or member(pod)
    status = plugin(*workloads, members=members).pre_enqueue(info)
    if message is None:
        assert status.ok
    else:
        assert (status.code, status.reasons) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [message])


def test_replicas_of_a_pod_group_are_separate_gangs() -> None:
    members = {f"{GANG}/r1": {"default/a", "default/b"}, f"{GANG}/r2": {"default/c"}}
    gs = plugin(workload(), members=members)
    assert gs.pre_enqueue(member("c2", replica="r1")).ok
    assert not gs.pre_enqueue(member("d", replica="r2")).ok


# --- Permit ----------------------------------------------------------------------------------


def test_permit_waits_with_the_timeout_until_min_count_are_placed_then_allows_the_gang() -> None:
    a, b, c = member("a"), member("b"), member("c")
    gs = plugin(workload())
    place(gs, (a, "n1"))
    status, wait = gs.permit(CycleState(), a, "n1")
    assert (status.code, status.reasons, wait) == (
        Code.WAIT,
        ["waiting for minCount pods from a gang to be waiting on permit"],
        7.0,
    )
    place(gs, (a, "n1"), (b, "n2"), (member("other", wl="job2"), "n2"))
    assert gs.permit(CycleState(), b, "n2")[0].code == Code.WAIT
    assert gs.handle.take_permit_signals() == []

    place(gs, (a, "n1"), (b, "n2"), (c, "n2"))
    status, wait = gs.permit(CycleState(), c, "n2")
    assert status.ok and wait == 0.0
    (signal,) = gs.handle.take_permit_signals()
    assert (signal.verdict, signal.plugin, signal.gang) == ("allow", "GangScheduling", GANG)
    assert signal.matches("default", {}, GANG) and not signal.matches("default", {}, "x")


def test_permit_does_not_count_pods_whose_commit_is_still_out() -> None:
    a, b, c = member("a"), member("b"), member("c")
    gs = plugin(workload())
    place(gs, (a, "n1"), (b, "n1"), (c, "n1"))
    gs.handle.providers.uncommitted = frozenset({b.key})
    assert gs.permit(CycleState(), c, "n1")[0].code == Code.WAIT


def test_permit_of_a_pod_outside_any_gang_or_of_a_gone_workload() -> None:
    gs = plugin(workload(workers=None))
    assert gs.permit(CycleState(), make_pod("plain").info(1), "n1")[0].ok
    assert gs.permit(CycleState(), member("a"), "n1")[0].ok  # basic policy
    status, _ = plugin().permit(CycleState(), member("a"), "n1")
    assert status.code == Code.ERROR


def test_a_gang_signal_crosses_the_wire_and_old_signals_still_read() -> None:
    signal = PermitSignal("allow", "GangScheduling", "default", (), gang=GANG)
    assert PermitSignal.from_wire(signal.to_wire()) == signal
    old = {k: v for k, v in signal.to_wire().items() if k != "gang"}
    assert PermitSignal.from_wire(old).gang == ""


# --- events ------------------------------------------------------------------------------------


def test_events_pod_add_of_the_same_gang_and_the_pods_workload_add() -> None:
    gs = plugin()
    (pod_add, workload_add, _) = gs.events_to_register()
    assert pod_add.event == ClusterEvent("Pod", "Add")
    assert workload_add.event == ClusterEvent("Workload", "Add")
    a = member("a")
    assert gs.is_schedulable_after_pod_added(a, None, member("b"))
    assert not gs.is_schedulable_after_pod_added(a, None, member("b", replica="r1"))
    assert not gs.is_schedulable_after_pod_added(a, None, make_pod("b").info(1))
    assert not gs.is_schedulable_after_pod_added(make_pod("p").info(1), None, a)
    new = to_hint_object(WORKLOAD, make_workload("job", {"workers": 3}))
    assert gs.is_schedulable_after_workload_added(a, None, new)
    other = to_hint_object(WORKLOAD, make_workload("job2", {"workers": 3}))
    assert not gs.is_schedulable_after_workload_added(a, None, other)


def test_args_are_checked() -> None:
    assert gangscheduling.new({}, Handle()).timeout == 100.0
    for bad in (0, -1, True, "3", 101):
        with pytest.raises(ConfigError, match="schedulingTimeoutSeconds"):
            gangscheduling.new({"schedulingTimeoutSeconds": bad}, Handle())
    with pytest.raises(ConfigError, match="permitWaitingTimeSeconds"):
        gangscheduling.new({"permitWaitingTimeSeconds": 3}, Handle())


def test_not_in_the_default_profile_and_enabled_at_its_extension_points() -> None:
    default = ProfileMap(parse_config({}), REGISTRY)["default-scheduler"]
    assert "GangScheduling" not in default.plugins.instances
    fw = ProfileMap(parse_config(GANG_CONFIG), REGISTRY)["default-scheduler"]
    assert "GangScheduling" in [p.name for p in fw.pre_enqueue]
    assert "GangScheduling" in [p.name for p in fw.permits]


# --- the queue: PreEnqueue gating ---------------------------------------------------------------


class GangQueue:
    """The queue as its service runs it: members observed before each event applies."""

    def __init__(self) -> None:
        profiles = ProfileMap(parse_config(GANG_CONFIG), REGISTRY)
        self.objects = ClusterObjects()
        for fw in profiles.values():
            fw.set_snapshot(ClusterSnapshot([], self.objects))
        self.q = SchedulingQueue(
            Clock(), hints=hints_of(profiles), pre_enqueue=run_pre_enqueue(profiles)
        )
        self.seq = 0

    def add(self, pod: PodInfo) -> None:
        self.seq += 1
        ev: Any = {"op": "upsert", "key": pod.key, "pod": pod.raw, "seq": self.seq}
        gangs.observe(self.objects.gang_members, ev)
        self.q.add(pod.key, "", pod.raw, self.seq)

    def where(self, *names: str) -> list[str]:
        return [w for n in names if (p := self.q.get(f"default/{n}")) for w in [p.where]]


def test_the_queue_holds_a_gang_until_min_count_pods_exist_then_lets_all_in() -> None:
    gq = GangQueue()
    gq.objects.workloads = {"default/job": workload()}
    gq.add(member("a"))
    gq.add(member("b"))
    assert gq.where("a", "b") == ["gated", "gated"]
    assert gq.q.pop(10) == []
    gq.add(member("c"))
    assert gq.where("a", "b", "c") == ["active", "active", "active"]
    assert sorted(p.key for p in gq.q.pop(10)) == ["default/a", "default/b", "default/c"]


def test_a_bound_member_counts_and_a_workload_that_arrives_late_lets_the_gang_in() -> None:
    gq = GangQueue()
    bound = member("a").raw
    gangs.observe(
        gq.objects.gang_members,
        {"op": "move", "resource": "AssignedPod", "action": ADD, "old": None, "new": bound},
    )
    gq.add(member("b"))
    gq.add(member("c"))
    assert gq.where("b", "c") == ["gated", "gated"]  # no Workload yet
    w = make_workload("job", {"workers": 3})
    gq.objects.workloads = {"default/job": workload()}
    gq.q.move_all_to_active_or_backoff(ClusterEvent(WORKLOAD, ADD), None, w)
    assert gq.where("b", "c") == ["active", "active"]
    gq.q.delete("default/b")
    gangs.observe(gq.objects.gang_members, {"op": "delete", "key": "default/b"})
    assert gq.objects.gang_members[GANG] == {"default/a", "default/c"}


# --- 1.36: v1alpha2 PodGroup objects and spec.schedulingGroup -------------------------------

PG_GANG = "default/PodGroup:pg"


def pod_group(name: str = "pg", min_count: int | None = 3) -> SchedulingPodGroup:
    return SchedulingPodGroup.model_validate(make_scheduling_pod_group(name, min_count))


def in_group(name: str, group: str = "pg") -> PodInfo:
    return make_pod(name).scheduling_group(group).req(cpu="1").info(1)


def group_plugin(*groups: SchedulingPodGroup, members: dict[str, set[str]] | None = None) -> Any:
    gs = plugin(members=members)
    gs.handle.snapshot.objects.pod_groups = {g.key: g for g in groups}
    return gs


@pytest.mark.parametrize(
    ("groups", "members", "message"),
    [
        ([], {}, 'waiting for pod\'s pod group "pg" to appear in scheduling queue'),
        (
            [pod_group("other")],
            {},
            'waiting for pod\'s pod group "pg" to appear in scheduling queue',
        ),
        ([pod_group(min_count=None)], {}, None),  # basic
        (
            [pod_group()],
            {PG_GANG: {"default/a", "default/b"}},
            "waiting for minCount pods from a gang to appear in scheduling queue",
        ),
        ([pod_group()], {PG_GANG: {"default/a", "default/b", "default/c"}}, None),
        ([pod_group(min_count=1)], {}, None),
    ],
)
def test_pre_enqueue_of_a_scheduling_group_pod_reads_its_pod_group_object(
    groups: list[SchedulingPodGroup], members: dict[str, set[str]], message: str | None
) -> None:
    status = group_plugin(*groups, members=members).pre_enqueue(in_group("a"))
    if message is None:
        assert status.ok
    else:
        assert (status.code, status.reasons) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [message])


def test_the_pod_group_objects_min_count_not_a_workloads() -> None:
    # A Workload named like the PodGroup with another minCount is not read for it.
    gs = group_plugin(pod_group(min_count=2), members={PG_GANG: {"default/a"}})
    gs.handle.snapshot.objects.workloads = {"default/pg": workload("pg", pg=5)}
    assert gs.pre_enqueue(in_group("b")).ok


def test_permit_of_a_scheduling_group_gang_waits_then_allows_it() -> None:
    a, b = in_group("a"), in_group("b")
    gs = group_plugin(pod_group(min_count=2))
    # a pod of a workloadRef gang and a pod of another PodGroup do not count
    place(gs, (a, "n1"), (member("w"), "n1"), (in_group("x", "pg2"), "n2"))
    status, wait = gs.permit(CycleState(), a, "n1")
    assert (status.code, wait) == (Code.WAIT, 7.0)
    place(gs, (a, "n1"), (b, "n2"))
    status, _ = gs.permit(CycleState(), b, "n2")
    assert status.ok
    (signal,) = gs.handle.take_permit_signals()
    assert (signal.verdict, signal.gang) == ("allow", PG_GANG)


def test_permit_of_a_pod_whose_pod_group_went_away_is_an_error() -> None:
    gs = group_plugin()
    status, _ = gs.permit(CycleState(), in_group("a"), "n1")
    assert status.code == Code.ERROR


def test_a_pod_group_added_moves_the_pods_that_wait_for_it() -> None:
    gs = group_plugin()
    (_, _, group_add) = gs.events_to_register()
    assert group_add.event == ClusterEvent(WORKLOAD_POD_GROUP, ADD)
    new = to_hint_object(WORKLOAD_POD_GROUP, make_scheduling_pod_group("pg", 2))
    assert gs.is_schedulable_after_pod_group_added(in_group("a"), None, new)
    assert not gs.is_schedulable_after_pod_group_added(in_group("a", "pg2"), None, new)
    assert not gs.is_schedulable_after_pod_group_added(member("a"), None, new)
    assert gs.is_schedulable_after_pod_added(in_group("a"), None, in_group("b"))
    assert not gs.is_schedulable_after_pod_added(in_group("a"), None, in_group("b", "pg2"))


def test_the_queue_holds_a_pod_group_gang_whose_object_comes_after_its_pods() -> None:
    gq = GangQueue()
    gq.add(in_group("a"))
    gq.add(in_group("b"))
    assert gq.where("a", "b") == ["gated", "gated"]
    group = make_scheduling_pod_group("pg", 2)
    gq.objects.pod_groups = {"default/pg": pod_group(min_count=2)}
    gq.q.move_all_to_active_or_backoff(ClusterEvent(WORKLOAD_POD_GROUP, ADD), None, group)
    assert gq.where("a", "b") == ["active", "active"]
