"""PreEnqueue: the profile's plugins at that extension point (configuration, as for the
other points), the framework's RunPreEnqueuePlugins, and the queue that runs them on
pods added or updated (kube's PriorityQueue.runPreEnqueuePlugins)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from services.queue.podinfo import Gating
from services.queue.preenqueue import run_pre_enqueue
from services.queue.queue import QueuedPodInfo, SchedulingQueue
from shared.config import ConfigError, Profile, parse_config
from shared.framework.handle import Handle
from shared.framework.interface import PreEnqueuePlugin
from shared.framework.runtime import Framework
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import PodInfo
from shared.plugins import REGISTRY
from shared.tools.synthetic import make_pod
from tests.unit.test_queue import FakeClock, add, key
from tests.unit.test_queue import pod as queued_pod

GATES = "SchedulingGates"


class Hold(PreEnqueuePlugin):
    """A PreEnqueue plugin that holds pods labelled `hold` (until the label goes)."""

    name = "Hold"

    def __init__(self) -> None:
        self.calls = 0

    def pre_enqueue(self, pod: PodInfo) -> Status:
        self.calls += 1
        reason = pod.pod.metadata.labels.get("hold")
        if reason is None:
            return SUCCESS
        return Status(Code.UNSCHEDULABLE, [f"held: {reason}"])


class Broken(PreEnqueuePlugin):
    name = "Broken"

    def pre_enqueue(self, pod: PodInfo) -> Status:
        raise RuntimeError("boom")


class Waits(PreEnqueuePlugin):
    name = "Waits"

    def pre_enqueue(self, pod: PodInfo) -> Status:
        return Status(Code.WAIT, ["not a PreEnqueue answer"])


def factory(kind: type[PreEnqueuePlugin]) -> Any:
    return lambda args, handle: kind()


TEST_REGISTRY = {**REGISTRY, **{kind.name: factory(kind) for kind in (Hold, Broken, Waits)}}


def framework_of(profile: Profile) -> Framework:
    return Framework.from_profile(profile, TEST_REGISTRY)


def framework(plugins: dict[str, Any] | None = None) -> Framework:
    return framework_of(parse_config({"profiles": [{"plugins": plugins or {}}]}).profiles[0])


def only(*plugins: str) -> dict[str, Any]:
    """A profile's plugins with exactly these PreEnqueue plugins, in this order."""
    return {"preEnqueue": {"disabled": [{"name": "*"}], "enabled": [{"name": n} for n in plugins]}}


def pod(name: str = "p", *, gates: list[str] | None = None, hold: str = "") -> PodInfo:
    raw = make_pod(name)
    if gates:
        raw["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    if hold:
        raw["metadata"]["labels"]["hold"] = hold
    return PodInfo.of(raw)


def names(fw: Framework) -> list[str]:
    return [p.name for p in fw.pre_enqueue]


# --- configuration --------------------------------------------------------------------


def test_scheduling_gates_is_the_default_profiles_pre_enqueue_plugin() -> None:
    assert isinstance(REGISTRY[GATES]({}, Handle()), PreEnqueuePlugin)
    assert names(Framework.from_profile(Profile(), REGISTRY)) == [GATES]


@pytest.mark.parametrize(
    "plugins",
    [
        {"preEnqueue": {"disabled": [{"name": GATES}]}},
        only(),
        {"multiPoint": {"disabled": [{"name": GATES}]}},
    ],
    ids=["preEnqueue", "preEnqueue *", "multiPoint"],
)
def test_scheduling_gates_can_be_disabled(plugins: dict[str, Any]) -> None:
    assert names(framework(plugins)) == []


@pytest.mark.parametrize(
    ("plugins", "expected"),
    [
        ({"multiPoint": {"enabled": [{"name": "Hold"}]}}, [GATES, "Hold"]),
        ({"preEnqueue": {"enabled": [{"name": "Hold"}]}}, [GATES, "Hold"]),
        (only("Hold", GATES), ["Hold", GATES]),
    ],
    ids=["multiPoint", "preEnqueue", "preEnqueue reordered"],
)
def test_pre_enqueue_plugins_are_enabled_in_order(
    plugins: dict[str, Any], expected: list[str]
) -> None:
    assert names(framework(plugins)) == expected


def test_a_plugin_without_pre_enqueue_cannot_be_enabled_there() -> None:
    with pytest.raises(ConfigError, match="does not implement extension point preEnqueue"):
        framework({"preEnqueue": {"enabled": [{"name": "NodeName"}]}})


# --- RunPreEnqueuePlugins ---------------------------------------------------------------


def test_no_plugin_admits_every_pod() -> None:
    fw = framework(only())
    assert fw.run_pre_enqueue_plugins(pod(gates=["g"], hold="x")) is SUCCESS


def test_runs_in_order_and_stops_at_the_first_rejection_which_it_names() -> None:
    fw = framework(only(GATES, "Hold"))
    hold = fw.plugins.instances["Hold"]
    assert isinstance(hold, Hold)

    status = fw.run_pre_enqueue_plugins(pod(gates=["a", "b"], hold="x"))
    assert (status.code, status.plugin) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, GATES)
    assert status.message() == "waiting for scheduling gates: [a b]"
    assert hold.calls == 0  # stopped at SchedulingGates

    status = fw.run_pre_enqueue_plugins(pod(hold="for review"))
    assert (status.code, status.plugin, status.message()) == (
        Code.UNSCHEDULABLE,
        "Hold",
        "held: for review",
    )
    assert fw.run_pre_enqueue_plugins(pod()).ok and hold.calls == 2


@pytest.mark.parametrize(
    ("plugin", "message"),
    [
        ("Broken", "running PreEnqueue plugin 'Broken': boom"),
        ("Waits", "not a PreEnqueue answer"),
    ],
)
def test_a_failing_plugin_is_an_error_naming_it(plugin: str, message: str) -> None:
    fw = framework({"preEnqueue": {"enabled": [{"name": plugin}, {"name": "Hold"}]}})
    status = fw.run_pre_enqueue_plugins(pod())
    assert (status.code, status.plugin, status.message()) == (Code.ERROR, plugin, message)


# --- the queue with PreEnqueue injected ---------------------------------------------------


class HoldByLabel:
    """The queue's PreEnqueue as a plain function: pods labelled `hold` are gated by a
    plugin named Hold. Records the pods it ran on."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def __call__(self, raw: dict[str, Any]) -> Gating | None:
        self.ran.append(raw["metadata"]["name"])
        reason = raw["metadata"]["labels"].get("hold")
        return None if reason is None else Gating("Hold", f"held: {reason}")


@pytest.fixture
def hold() -> HoldByLabel:
    return HoldByLabel()


@pytest.fixture
def q(clock: FakeClock, hold: HoldByLabel) -> SchedulingQueue:
    return SchedulingQueue(clock, pre_enqueue=hold)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def held(name: str, reason: str | None, rv: int = 1) -> dict[str, Any]:
    labels = {} if reason is None else {"hold": reason}
    return queued_pod(name, labels=labels, rv=rv)


def update(q: SchedulingQueue, raw: dict[str, Any], seq: int) -> QueuedPodInfo:
    q.update(key(raw["metadata"]["name"]), raw["metadata"]["uid"], raw, seq)
    qpi = q.get(key(raw["metadata"]["name"]))
    assert qpi is not None
    return qpi


def test_a_rejected_pod_waits_gated_naming_the_plugin(
    q: SchedulingQueue, hold: HoldByLabel
) -> None:
    add(q, "free")
    add(q, "a", labels={"hold": "review"})
    qpi = q.get(key("a"))
    assert qpi is not None and qpi.where == "gated"
    assert (qpi.unschedulable_plugins, qpi.message) == (["Hold"], "held: review")
    assert hold.ran == ["free", "a"]
    assert [p.key for p in q.pop(10)] == [key("free")]
    assert q.take_incoming() == {
        ("active", "UnschedulablePodAdd"): 1,
        ("unschedulable", "UnschedulablePodAdd"): 1,  # kube keeps gated pods there
    }
    assert q.move_all_to_active_or_backoff("SomethingHappened") == 0
    assert qpi.where == "gated"


def test_an_update_runs_pre_enqueue_again_and_lets_the_pod_in_when_it_passes(
    q: SchedulingQueue, hold: HoldByLabel
) -> None:
    add(q, "a", labels={"hold": "review"})
    qpi = update(q, held("a", "legal", rv=2), 2)
    assert qpi.where == "gated" and qpi.message == "held: legal"
    q.take_incoming()
    status_only = held("a", "legal", rv=3)
    status_only["status"]["reason"] = "ksched's own status write"
    update(q, status_only, 3)  # not isPodUpdated: nothing runs
    assert hold.ran == ["a", "a"]

    update(q, held("a", None, rv=4), 4)
    assert (qpi.where, qpi.unschedulable_plugins, qpi.message) == ("active", [], "")
    assert q.take_incoming() == {("active", "UnschedulablePodUpdatePodLabel"): 1}
    assert [p.key for p in q.pop(1)] == [key("a")]


def test_an_unschedulable_pod_an_update_would_move_is_gated_if_rejected(
    q: SchedulingQueue,
) -> None:
    k = add(q, "a")
    (qpi,) = q.pop(1)
    assert q.failed(k, qpi.cycle, unschedulable=True, message="no fit", plugins=["Fit"])
    update(q, held("a", "review", rv=2), 2)  # without hints every update may help it
    assert (qpi.where, qpi.unschedulable_plugins) == ("gated", ["Hold"])
    assert q.take_incoming() == {
        ("active", "UnschedulablePodAdd"): 1,
        ("unschedulable", "ScheduleAttemptFailure"): 1,
    }
    assert q.move_all_to_active_or_backoff("NodeAdd") == 0  # no longer indexed as unschedulable
    update(q, held("a", None, rv=3), 3)
    assert qpi.where == "backoff"  # still backing off from its attempt


def test_restored_gated_pods_stay_gated_until_an_update_lets_them_in(
    q: SchedulingQueue, clock: FakeClock, hold: HoldByLabel
) -> None:
    add(q, "a", labels={"hold": "review"})
    records = [msgpack.unpackb(msgpack.packb(p.to_record())) for p in q.pending_pods()]
    restored = SchedulingQueue(clock, pre_enqueue=hold)
    restored.restore(records)
    qpi = restored.get(key("a"))
    assert qpi is not None
    assert (qpi.where, qpi.unschedulable_plugins, qpi.message) == (
        "gated",
        ["Hold"],
        "held: review",
    )
    assert restored.counts()["gated"] == 1 and hold.ran == ["a"]
    update(restored, held("a", None, rv=2), 2)
    assert qpi.where == "active"


def test_without_pre_enqueue_nothing_is_gated(clock: FakeClock) -> None:
    q = SchedulingQueue(clock)
    add(q, "a", gates=["example.com/wait"], labels={"hold": "review"})
    assert [p.key for p in q.pop(1)] == [key("a")]


# --- the queue service's PreEnqueue: each pod through its own profile's framework -------


def test_each_pod_goes_through_its_profiles_pre_enqueue_plugins() -> None:
    config = parse_config(
        {
            "profiles": [
                {},
                {"schedulerName": "ungated", "plugins": only()},
                {"schedulerName": "holding", "plugins": only("Hold")},
            ]
        }
    )
    run = run_pre_enqueue({p.scheduler_name: framework_of(p) for p in config.profiles})

    def of(scheduler: str, **kw: Any) -> dict[str, Any]:
        raw = pod(**kw).raw
        if scheduler:
            raw["spec"]["schedulerName"] = scheduler
        return raw

    assert run(of("", gates=["a"])) == Gating(GATES, "waiting for scheduling gates: [a]")
    assert run(of("", hold="x")) is None
    assert run(of("ungated", gates=["a"], hold="x")) is None
    assert run(of("holding", gates=["a"], hold="x")) == Gating("Hold", "held: x")
    assert run(of("nobody", gates=["a"])) is None  # no profile: the worker reports it
