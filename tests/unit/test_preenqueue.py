"""PreEnqueue: the profile's plugins at that extension point (configuration, as for the
other points) and the framework's RunPreEnqueuePlugins."""

from __future__ import annotations

from typing import Any

import pytest

from shared.cli.workload import make_pod
from shared.config import ConfigError, Profile, parse_config
from shared.framework.interface import PreEnqueuePlugin
from shared.framework.runtime import Framework
from shared.framework.snapshot import Handle
from shared.framework.status import SUCCESS, Code, Status
from shared.framework.types import PodInfo
from shared.plugins import REGISTRY

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


def framework(plugins: dict[str, Any] | None = None, registry: Any = TEST_REGISTRY) -> Framework:
    profile = parse_config({"profiles": [{"plugins": plugins}] if plugins else [{}]}).profiles[0]
    return Framework.from_profile(profile, registry)


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
    assert names(Framework.from_profile(Profile())) == [GATES]


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
