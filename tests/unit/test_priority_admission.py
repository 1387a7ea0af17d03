"""Priority admission (shared/api/priority.py), as the API server's Priority plugin."""

from __future__ import annotations

from typing import Any

import pytest

from shared.api.models import PriorityClass
from shared.api.priority import PriorityClasses, Refused
from shared.tools.synthetic import make_pod


def pc(name: str, value: int, **extra: Any) -> PriorityClass:
    return PriorityClass.model_validate({"metadata": {"name": name}, "value": value, **extra})


def pod(**spec: Any) -> dict[str, Any]:
    raw = make_pod("p")
    raw["spec"].update(spec)
    return raw


@pytest.fixture
def classes() -> PriorityClasses:
    c = PriorityClasses()
    c.upsert(pc("high", 1000, preemptionPolicy="PreemptLowerPriority"))
    c.upsert(pc("batch", -10, preemptionPolicy="Never"))
    return c


def test_a_class_name_resolves_to_its_value_and_policy(classes: PriorityClasses) -> None:
    spec = classes.admit(pod(priorityClassName="batch"))["spec"]
    assert (spec["priority"], spec["preemptionPolicy"]) == (-10, "Never")
    assert classes.admit(pod(priorityClassName="high"))["spec"]["priority"] == 1000


def test_the_system_classes_always_exist() -> None:
    spec = PriorityClasses().admit(pod(priorityClassName="system-node-critical"))["spec"]
    assert spec["priority"] == 2_000_001_000


def test_an_unknown_class_is_refused_with_the_api_servers_message(
    classes: PriorityClasses,
) -> None:
    with pytest.raises(Refused, match='pods "p" is forbidden: no PriorityClass with name x was'):
        classes.admit(pod(priorityClassName="x"))


def test_a_pod_without_a_class_gets_the_global_default_or_zero(classes: PriorityClasses) -> None:
    bare = pod()
    assert classes.admit(bare) is bare  # priority 0: absent, as the scheduler reads it
    classes.upsert(pc("standard", 5, globalDefault=True))
    classes.upsert(pc("lower", 2, globalDefault=True))  # several: the lowest, as upstream
    spec = classes.admit(pod())["spec"]
    assert (spec["priority"], spec["priorityClassName"]) == (2, "lower")
    classes.delete("lower")
    classes.delete("standard")
    assert "priority" not in classes.admit(pod())["spec"]


def test_a_stated_priority_must_match_the_class(classes: PriorityClasses) -> None:
    assert classes.admit(pod(priorityClassName="high", priority=1000))["spec"]["priority"] == 1000
    with pytest.raises(Refused, match=r"the integer value of priority \(7\) must not be provided"):
        classes.admit(pod(priorityClassName="high", priority=7))
    with pytest.raises(Refused, match=r"PreemptionPolicy \(PreemptLowerPriority\)"):
        classes.admit(pod(priorityClassName="batch", preemptionPolicy="PreemptLowerPriority"))


def test_without_a_class_a_stated_priority_is_kept(classes: PriorityClasses) -> None:
    """ksched's leniency (the API server would refuse it): spec.priority set directly,
    as the scheduler_perf templates and tests do, keeps working."""
    assert classes.admit(pod(priority=42))["spec"]["priority"] == 42
    classes.upsert(pc("standard", 5, globalDefault=True))
    assert classes.admit(pod(priority=42))["spec"]["priority"] == 42


def test_an_admitted_pod_is_a_copy_and_a_resolved_one_is_left_as_is(
    classes: PriorityClasses,
) -> None:
    raw = pod(priorityClassName="high")
    admitted = classes.admit(raw)
    assert admitted is not raw and "priority" not in raw["spec"]
    assert classes.admit(admitted) is admitted  # ksched's own writes carry the result


def test_strict_admission_refuses_a_stated_priority_without_a_class(
    classes: PriorityClasses,
) -> None:
    """What a kubectl client meets (ksched apply, create): upstream's Priority plugin
    computes the priority from the class (none, no globalDefault: 0) and refuses
    another stated value, naming the pod."""
    with pytest.raises(Refused) as err:
        classes.admit(pod(priority=10), strict=True)
    assert str(err.value) == (
        'pods "p" is forbidden: the integer value of priority (10) must not be provided '
        "in pod spec; priority admission controller computed 0 from the given "
        "PriorityClass name"
    )
    assert classes.admit(pod(priority=0), strict=True)["spec"]["priority"] == 0
    classes.upsert(pc("default", 5, globalDefault=True))
    assert classes.admit(pod(priority=5), strict=True)["spec"]["priority"] == 5
