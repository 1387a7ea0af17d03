"""What the door (decode_cluster_event) refuses, as the API server would, and in what
words: each rule at and past its limits, every message naming the field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.api.events import BadEvent, ClusterEvent, decode_cluster_event
from shared.api.models import Pod
from shared.cli.workload import make_node, make_pod

POD_SUBJECT = "ksched.cluster.pods.default.p"
NODE_SUBJECT = "ksched.cluster.nodes.n"


def decode(obj: dict[str, Any], subject: str = POD_SUBJECT) -> ClusterEvent:
    data = json.dumps({"type": "ADDED", "object": obj}).encode()
    return decode_cluster_event(subject, data, None, 1)


def decode_pod(obj: dict[str, Any]) -> Pod:
    pod = decode(obj).obj
    assert isinstance(pod, Pod)
    return pod


def refusal(obj: dict[str, Any], subject: str = POD_SUBJECT) -> str:
    with pytest.raises(BadEvent) as info:
        decode(obj, subject)
    reason = str(info.value)
    reason.encode()  # the reason itself must be sendable
    return reason


def pod_with(path: str, value: Any) -> dict[str, Any]:
    """make_pod("p") with `value` at the dotted path (list indices as numbers)."""
    pod = make_pod("p")
    *parents, last = path.split(".")
    node: Any = pod
    for part in parents:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    node[int(last) if last.isdigit() else last] = value
    return pod


# --- spec.priority: an int32 --------------------------------------------------

INT32_RANGE = "(out of range -2147483648 .. 2147483647)"


@pytest.mark.parametrize("priority", [2**31 - 1, -(2**31), 0, None])
def test_priority_within_int32_is_accepted(priority: int | None) -> None:
    assert decode_pod(pod_with("spec.priority", priority)).spec.priority == (priority or 0)


@pytest.mark.parametrize(
    ("priority", "reason"),
    [
        (
            2**31,
            f"spec.priority: cannot unmarshal number 2147483648 into an int32 {INT32_RANGE}",
        ),
        (
            -(2**31) - 1,
            f"cannot unmarshal number -2147483649 into an int32 {INT32_RANGE}",
        ),
        (
            2**63 - 1,
            f"cannot unmarshal number 9223372036854775807 into an int32 {INT32_RANGE}",
        ),
        (
            2**64 - 1,
            f"cannot unmarshal number 18446744073709551615 into an int32 {INT32_RANGE}",
        ),
        (
            2**64,
            f"cannot unmarshal number 18446744073709551616 into an int32 {INT32_RANGE}",
        ),
        (
            -(2**63) - 1,
            f"cannot unmarshal number -9223372036854775809 into an int32 {INT32_RANGE}",
        ),
        (
            10**50,
            "cannot unmarshal number 10000000000000000000...(51 digits) into an int32",
        ),
        (True, "spec.priority: cannot unmarshal bool into an int32"),
        (False, "spec.priority: cannot unmarshal bool into an int32"),
        ("5", "spec.priority: cannot unmarshal string into an int32"),
        (5.0, "spec.priority: cannot unmarshal number 5.0 into an int32"),
        ([5], "spec.priority: cannot unmarshal array into an int32"),
    ],
)
def test_priority_outside_int32_is_refused(priority: Any, reason: str) -> None:
    got = refusal(pod_with("spec.priority", priority))
    assert got.startswith("spec.priority: ")
    assert reason in got


# --- quantities ---------------------------------------------------------------


@pytest.mark.parametrize(
    "cpu",
    [
        "9223372036854775807m",
        "9223372036854775.807",
        "9223372036854775807000u",
        "0",
        "1e15",
    ],
)
def test_quantity_with_an_int64_milli_value_is_accepted(cpu: str) -> None:
    decode(make_pod("p", cpu=cpu))
    decode(make_node("n", cpu=cpu), NODE_SUBJECT)


@pytest.mark.parametrize(
    ("field", "path", "amount"),
    [
        ("cpu", "spec.containers[0].resources.requests.cpu", "9223372036854775808m"),
        ("cpu", "spec.containers[0].resources.requests.cpu", "9223372036854775807001u"),
        ("cpu", "spec.containers[0].resources.requests.cpu", "9223372036854775807"),
        ("cpu", "spec.containers[0].resources.requests.cpu", "1e30"),
        ("memory", "spec.containers[0].resources.requests.memory", "8Ei"),
        (
            "memory",
            "spec.containers[0].resources.requests.memory",
            "99999999999999999999",
        ),
    ],
)
def test_quantity_past_int64_milli_value_is_refused(field: str, path: str, amount: str) -> None:
    pod = make_pod("p", **{field: amount})
    assert (
        refusal(pod) == f"{path}: quantity too large: {amount!r} (its milli-value exceeds 2^63-1)"
    )


@pytest.mark.parametrize(
    ("path", "where"),
    [
        (
            "spec.containers.0.resources.limits",
            "spec.containers[0].resources.limits.cpu",
        ),
        ("spec.overhead", "spec.overhead.cpu"),
    ],
)
def test_quantity_bound_holds_in_every_resource_list(path: str, where: str) -> None:
    assert refusal(pod_with(path, {"cpu": "1e19"})).startswith(f"{where}: quantity too large")


def test_node_quantities_are_bounded() -> None:
    node = make_node("n")
    node["status"]["allocatable"] = {"cpu": "1", "memory": 2**63}
    assert refusal(node, NODE_SUBJECT).startswith("status.allocatable.memory: quantity too large")
