"""Permit and the binding cycle, pure: waitingPods, the framework's Permit/PreBind/Bind/
PostBind runners, permit signals, and the cache's verdicts on assumptions."""

from __future__ import annotations

from typing import Any

import pytest

from services.cache.cache import Cache
from shared.config import parse_config
from shared.framework.cycle_state import CycleState
from shared.framework.interface import BindPlugin, PermitPlugin, PostBindPlugin, PreBindPlugin
from shared.framework.runtime import Framework
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import PodInfo
from shared.framework.waiting_pods import (
    MAX_PERMIT_TIMEOUT,
    PermitSignal,
    WaitingPod,
    WaitingPods,
)
from shared.plugins import REGISTRY
from tests.builders import make_node, make_pod
from tests.unit.conftest import Clock

POD = make_pod("p").info(3)

# --- waitingPods ---------------------------------------------------------------------


def waiting(key: str = "default/p", **pending: float) -> WaitingPod:
    return WaitingPod(key, "uid", 7, "n1", dict(pending), started=100.0)


def test_a_waiting_pod_is_allowed_once_every_plugin_it_waits_on_allowed_it() -> None:
    wp = waiting(A=110.0, B=120.0)
    wp.allow("A")
    assert not wp.decided
    wp.allow("A")  # twice changes nothing
    wp.allow("B")
    assert wp.status is SUCCESS


def test_a_rejection_decides_at_once_and_names_the_plugin() -> None:
    wp = waiting(A=110.0, B=120.0)
    wp.reject("B", "no quorum")
    wp.allow("A")  # too late: decided
    assert wp.status is not None
    assert (wp.status.code, wp.status.plugin, wp.status.reasons) == (
        Code.UNSCHEDULABLE,
        "B",
        ["no quorum"],
    )


def test_the_first_timeout_rejects_with_kube_schedulers_message() -> None:
    pods = WaitingPods()
    pods.add(waiting("default/a", A=110.0, B=105.0))
    pods.add(waiting("default/b", A=130.0))
    assert pods.next_deadline() == 105.0
    assert pods.expire(104.9) == []
    [expired] = pods.expire(105.0)
    assert expired.key == "default/a"
    assert expired.status is not None and expired.status.plugin == "B"
    assert expired.status.reasons == ["rejected due to timeout after waiting 5s at plugin B"]
    assert [wp.key for wp in pods.decided()] == ["default/a"]
    assert pods.next_deadline() == 130.0  # decided pods no longer count


def test_a_redelivered_pod_waits_only_what_is_left_of_its_deadline() -> None:
    """Deadlines are absolute: a second binder holding the pod times it out at the same
    moment the first would have."""
    first, second = waiting(A=110.0), waiting(A=110.0)
    assert not first.expire(109.0)
    assert second.expire(110.0)


# --- the framework ------------------------------------------------------------------


class Plugin:
    def __init__(self, name: str, args: dict[str, Any]) -> None:
        self.name = name
        self.args = args
        self.calls: list[str] = []


class Permitter(Plugin, PermitPlugin):
    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        code = Code[self.args.get("code", "SUCCESS")]
        return Status(code, ["said so"]), float(self.args.get("timeout", 0))


class Binder(Plugin, PreBindPlugin, BindPlugin, PostBindPlugin):
    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        self.calls.append("pre_bind")
        return Status(Code[self.args.get("pre_bind", "SUCCESS")], ["pre-bind says no"])

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        self.calls.append("bind")
        return Status(Code[self.args.get("bind", "SUCCESS")], ["bind says no"])

    async def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.calls.append("post_bind")
        raise RuntimeError("PostBind outcomes are ignored")


def framework(plugins: dict[str, tuple[type, dict[str, Any]]], bind: list[str]) -> Framework:
    registry = dict(REGISTRY)
    for name, (kind, _) in plugins.items():
        registry[name] = (lambda n, k: lambda args, h: k(n, args))(name, kind)
    config = parse_config(
        {
            "profiles": [
                {
                    "plugins": {
                        "multiPoint": {"enabled": [{"name": n} for n in plugins]},
                        "bind": {
                            "enabled": [{"name": n} for n in bind],
                            "disabled": [{"name": "*"}],
                        },
                    },
                    "pluginConfig": [{"name": n, "args": a} for n, (_, a) in plugins.items()],
                }
            ]
        }
    )
    return Framework.from_profile(config.profiles[0], registry)


@pytest.mark.parametrize(
    ("codes", "want_code", "want_plugin"),
    [
        (["SUCCESS", "SUCCESS"], Code.SUCCESS, ""),
        (["WAIT", "SUCCESS"], Code.WAIT, ""),
        (["WAIT", "UNSCHEDULABLE"], Code.UNSCHEDULABLE, "P1"),
        (["ERROR", "WAIT"], Code.ERROR, "P0"),
        (["SKIP", "SUCCESS"], Code.ERROR, "P0"),  # Skip is no Permit answer: an error
    ],
)
def test_permit_outcomes(codes: list[str], want_code: Code, want_plugin: str) -> None:
    fw = framework(
        {f"P{i}": (Permitter, {"code": c, "timeout": 5}) for i, c in enumerate(codes)},
        ["DefaultBinder"],
    )
    status, waits = fw.run_permit_plugins(CycleState(), POD, "n1")
    assert (status.code, status.plugin) == (want_code, want_plugin)
    assert waits == ({"P0": 5.0} if want_code == Code.WAIT else {})


def test_a_permit_wait_is_capped_below_the_queues_binding_lease() -> None:
    fw = framework({"P": (Permitter, {"code": "WAIT", "timeout": 3600})}, ["DefaultBinder"])
    assert fw.run_permit_plugins(CycleState(), POD, "n1")[1] == {"P": MAX_PERMIT_TIMEOUT}


async def test_bind_runs_prebind_then_the_first_bind_plugin_that_does_not_skip() -> None:
    fw = framework(
        {"Skipper": (Binder, {"bind": "SKIP"}), "Taker": (Binder, {})}, ["Skipper", "Taker"]
    )
    skipper, taker = (fw.plugins.instances[n] for n in ("Skipper", "Taker"))
    state = CycleState()
    assert (await fw.run_pre_bind_plugins(state, POD, "n1")).ok
    assert (await fw.run_bind_plugins(state, POD, "n1")).ok
    await fw.run_post_bind_plugins(state, POD, "n1")  # raises inside: ignored
    assert skipper.calls == ["pre_bind", "bind", "post_bind"]  # type: ignore[attr-defined]
    assert taker.calls == ["pre_bind", "bind", "post_bind"]  # type: ignore[attr-defined]


async def test_a_failing_prebind_or_bind_names_its_plugin() -> None:
    fw = framework({"B": (Binder, {"pre_bind": "ERROR", "bind": "ERROR"})}, ["B"])
    status = await fw.run_pre_bind_plugins(CycleState(), POD, "n1")
    assert (status.code, status.plugin, status.reasons) == (Code.ERROR, "B", ["pre-bind says no"])
    status = await fw.run_bind_plugins(CycleState(), POD, "n1")
    assert (status.code, status.plugin) == (Code.ERROR, "B")


async def test_default_binder_writes_through_the_handle() -> None:
    fw = framework({}, ["DefaultBinder"])
    assert (await fw.run_bind_plugins(CycleState(), POD, "n1")).code == Code.ERROR
    written: list[tuple[str, str]] = []

    async def bind_pod(pod: PodInfo, node: str) -> Status:
        written.append((pod.key, node))
        return SUCCESS

    fw.handle.providers.bind_pod = bind_pod
    assert (await fw.run_bind_plugins(CycleState(), POD, "n1")).ok
    assert written == [("default/p", "n1")]


# --- permit signals and the cache's verdicts --------------------------------------------


def test_permit_signals_select_by_namespace_and_labels_and_travel_as_data() -> None:
    fw = framework({}, ["DefaultBinder"])
    fw.handle.allow_waiting_pods("Gang", "ns", {"group": "g"})
    fw.handle.reject_waiting_pods("Gang", "ns", {"group": "g"}, "no")
    allow, reject = fw.handle.take_permit_signals()
    assert fw.handle.take_permit_signals() == []
    assert allow.matches("ns", {"group": "g", "other": "x"})
    assert not allow.matches("other-ns", {"group": "g"})
    assert not allow.matches("ns", {"group": "h"})
    assert PermitSignal.from_wire(reject.to_wire()) == reject
    with pytest.raises(ValueError, match="unknown permit verdict"):
        PermitSignal.from_wire({**allow.to_wire(), "verdict": "maybe"})


@pytest.fixture
def cache(clock: Clock) -> Cache:
    c = Cache(clock)
    c.add_or_update_node(make_node("n1").capacity(cpu="4", memory="4Gi", pods=10).obj())
    return c


FW = Framework.from_profile(parse_config({}).profiles[0], REGISTRY)


def assume(cache: Cache, name: str, group: str, cycle: int) -> None:
    pod = make_pod(name).label("group", group).req(cpu="100m").info(1)
    assert cache.assume_pod(FW, pod, "n1", f"uid-{name}", 1, cycle).ok


def allow(group: str) -> PermitSignal:
    return PermitSignal("allow", "Gang", "default", (("group", group),))


def test_signals_set_verdicts_on_the_assumed_pods_they_select(cache: Cache) -> None:
    assume(cache, "a", "g", 1)
    assume(cache, "b", "g", 2)
    assume(cache, "c", "other", 3)
    cache.add_pod("default/d", "uid-d", "n1", make_pod("d").label("group", "g").info(1), 1)
    changed = cache.permit_signal(allow("g"))
    assert sorted(s.key for s in changed) == ["default/a", "default/b"]  # bound d: no verdict
    assert cache.permit_signal(allow("g")) == []  # already allowed: nothing changes
    state = cache.permit_state("default/a", 1)
    assert state is not None and state.allowed == ["Gang"]
    assert cache.permit_state("default/a", 2) is None  # another attempt's question

    reject = PermitSignal("reject", "Gang", "default", (("group", "g"),), "timed out")
    assert len(cache.permit_signal(reject)) == 2
    assert cache.permit_signal(allow("g")) == []  # a rejection stays
    state = cache.permit_state("default/b", 2)
    assert state is not None and state.rejected == ["Gang", "timed out"]


def test_a_new_attempt_starts_without_the_old_attempts_verdicts(cache: Cache) -> None:
    assume(cache, "a", "g", 1)
    cache.permit_signal(PermitSignal("reject", "Gang", "default", (("group", "g"),), "no"))
    assume(cache, "a", "g", 9)  # re-assumed by a later cycle
    state = cache.permit_state("default/a", 9)
    assert state is not None and state.rejected is None and state.allowed == []


def test_forget_attempt_forgets_only_that_cycles_assumption(cache: Cache) -> None:
    assume(cache, "a", "g", 4)
    assert not cache.forget_attempt("default/a", 3)
    assert cache.forget_attempt("default/a", 4)
    assert "default/a" not in cache.pods and not cache.assumed
