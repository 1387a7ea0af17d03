"""What the door (decode_cluster_event) refuses, as the API server would, and in what
words: each rule at and past its limits, every message naming the field."""

from __future__ import annotations

import copy
import json
from typing import Any

import msgpack
import pytest

from shared.api.events import BadEvent, ClusterEvent, decode_cluster_event
from shared.api.models import Pod
from shared.tools.synthetic import make_node, make_pod, make_pod_group
from shared.wire import pack

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


# --- labels -------------------------------------------------------------------

LABEL_VALUE_REGEX_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
NAME_PART_REGEX_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
PREFIX_REGEX_MSG = (
    "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
    "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
    "'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


@pytest.mark.parametrize(
    "labels",
    [
        {"app": ""},  # an empty value is a label
        {"app": "v" * 63},
        {"n" * 63: "x"},
        {"example.com/name": "My_Value-1.2"},
        {("a" * 63 + ".") * 3 + "b" * 61 + "/k": "v"},  # a prefix of 253 characters
        {"A.b_c-D": "12345"},
    ],
)
def test_valid_labels_are_accepted(labels: dict[str, str]) -> None:
    assert decode(pod_with("metadata.labels", labels)).obj.metadata.labels == labels


@pytest.mark.parametrize(
    ("labels", "reasons"),
    [
        ({"app": "väl"}, [f'Invalid value: "väl": {LABEL_VALUE_REGEX_MSG}']),
        (
            {"app": "v" * 64},
            [f'Invalid value: "{"v" * 64}": must be no more than 63 characters'],
        ),
        ({"app": "-v"}, [f'Invalid value: "-v": {LABEL_VALUE_REGEX_MSG}']),
        ({"app": "v_"}, [f'Invalid value: "v_": {LABEL_VALUE_REGEX_MSG}']),
        ({"app": "a b"}, [f'Invalid value: "a b": {LABEL_VALUE_REGEX_MSG}']),
        # Go counts bytes: 32 two-byte characters are 64.
        (
            {"app": "é" * 32},
            [
                f'Invalid value: "{"é" * 32}": must be no more than 63 characters',
                f'Invalid value: "{"é" * 32}": {LABEL_VALUE_REGEX_MSG}',
            ],
        ),
        ({"app": "\ud800"}, [f'Invalid value: "\\ud800": {LABEL_VALUE_REGEX_MSG}']),
        ({"app": "a\nb"}, [f'Invalid value: "a\\nb": {LABEL_VALUE_REGEX_MSG}']),
        (
            {"n" * 64: "x"},
            [f'Invalid value: "{"n" * 64}": name part must be no more than 63'],
        ),
        (
            {"": "x"},
            ['Invalid value: "": name part must be non-empty', NAME_PART_REGEX_MSG],
        ),
        ({"ü": "x"}, [f'Invalid value: "ü": {NAME_PART_REGEX_MSG}']),
        ({"\ud800": "x"}, [f'Invalid value: "\\ud800": {NAME_PART_REGEX_MSG}']),
        ({"/x": "y"}, ['Invalid value: "/x": prefix part must be non-empty']),
        ({"x/": "y"}, ['Invalid value: "x/": name part must be non-empty']),
        (
            {"Example.com/x": "y"},
            [f'Invalid value: "Example.com/x": {PREFIX_REGEX_MSG}'],
        ),
        (
            {("a" * 63 + ".") * 3 + "b" * 62 + "/k": "v"},  # a prefix of 254 characters
            ["prefix part must be no more than 253 characters"],
        ),
        (
            {"a/b/c": "y"},
            [
                'Invalid value: "a/b/c": a qualified name must consist of alphanumeric '
                "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional "
                "DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ],
        ),
    ],
)
def test_invalid_labels_are_refused_in_the_api_servers_words(
    labels: dict[str, str], reasons: list[str]
) -> None:
    got = refusal(pod_with("metadata.labels", labels))
    assert got.startswith("metadata.labels: Invalid value: ")
    for reason in reasons:
        assert reason in got


def test_the_brief_example_word_for_word() -> None:
    assert refusal(pod_with("metadata.labels", {"app": "väl"})) == (
        'metadata.labels: Invalid value: "väl": a valid label must be an empty string or '
        "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
        "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    )


def test_every_bad_label_is_reported() -> None:
    got = refusal(pod_with("metadata.labels", {"ok": "1", "bad-1": "-", "bad-2": "-" * 64}))
    assert got.count("metadata.labels: Invalid value: ") == 3  # "-" once, "-"*64 once per rule
    assert got.startswith('metadata.labels: Invalid value: "-": ')


def test_a_huge_bad_value_is_quoted_cut() -> None:
    got = refusal(pod_with("metadata.labels", {"app": "x" * 100_000}))
    assert f'Invalid value: "{"x" * 256}...": must be no more than 63 characters' in got
    assert len(got) < 2000


def test_node_selector_is_validated_as_labels() -> None:
    got = refusal(pod_with("spec.nodeSelector", {"disk": "ssd!"}))
    assert got == f'spec.nodeSelector: Invalid value: "ssd!": {LABEL_VALUE_REGEX_MSG}'
    assert decode_pod(pod_with("spec.nodeSelector", {"disk": ""})).spec.node_selector == {
        "disk": ""
    }


def test_a_template_spec_reused_still_has_its_node_selector_checked() -> None:
    good = pod_with("spec.nodeSelector", {"disk": "ssd"})
    decode(good)
    bad = copy.deepcopy(good)
    bad["spec"]["nodeSelector"] = {"disk": "ssd!"}
    assert refusal(bad).startswith("spec.nodeSelector: Invalid value: ")


@pytest.mark.parametrize(
    ("obj", "subject"),
    [
        (make_node("n"), NODE_SUBJECT),
        (make_pod_group("g", 2), "ksched.cluster.podgroups.default.g"),
        (
            {
                "kind": "PodDisruptionBudget",
                "spec": {"selector": {"matchLabels": {"a": "b"}}},
            },
            "ksched.cluster.pdbs.default.b",
        ),
    ],
)
def test_labels_of_every_kind_are_validated(obj: dict[str, Any], subject: str) -> None:
    decode(obj, subject)
    obj = copy.deepcopy(obj)
    obj.setdefault("metadata", {})["labels"] = {"zone": "väl"}
    assert refusal(obj, subject) == (
        f'metadata.labels: Invalid value: "väl": {LABEL_VALUE_REGEX_MSG}'
    )


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


# --- what msgpack can carry ---------------------------------------------------

RANGE = "out of range (-2^63 .. 2^64-1)"


@pytest.mark.parametrize("value", [2**63 - 1, 2**64 - 1, -(2**63), 0, 1.5e300, float("inf")])
def test_numbers_msgpack_carries_are_accepted(value: Any) -> None:
    ev = decode(pod_with("metadata.generation", value))
    assert ev.raw["metadata"]["generation"] == value
    pack(ev.raw)


@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        (
            "metadata.generation",
            2**64,
            f"metadata.generation: integer 18446744073709551616 {RANGE}",
        ),
        (
            "metadata.generation",
            -(2**63) - 1,
            f"metadata.generation: integer -9223372036854775809 {RANGE}",
        ),
        (
            "spec.containers.0.livenessProbe",
            {"periodSeconds": 10**40},
            f"spec.containers[0].livenessProbe.periodSeconds: integer "
            f"10000000000000000000...(41 digits) {RANGE}",
        ),
        ("spec.extra", [1, [2, 2**70]], f"spec.extra[1][1]: integer {2**70} {RANGE}"),
        (
            "metadata.annotations",
            {"x": "\ud800"},
            "metadata.annotations.x: invalid UTF-8 string",
        ),
        (
            "metadata.annotations",
            {"a\udfffb\n": "x"},
            'metadata.annotations["a\\udfffb\\n"]: invalid UTF-8 string',
        ),
        (
            "spec.containers.0.image",
            "nginx\udc80",
            "spec.containers[0].image: invalid UTF-8 string",
        ),
        ("status.message", "\ud83d", "status.message: invalid UTF-8 string"),
    ],
)
def test_what_msgpack_cannot_carry_is_refused_with_its_path(
    path: str, value: Any, reason: str
) -> None:
    assert refusal(pod_with(path, value)) == reason


def test_a_valid_surrogate_pair_is_one_character() -> None:
    ev = decode(pod_with("metadata.annotations", {"smile": "\U0001f600"}))
    assert ev.raw["metadata"]["annotations"]["smile"] == "\U0001f600"


def test_integer_of_too_many_digits_for_json_is_refused() -> None:
    data = b'{"type":"ADDED","object":{"kind":"Pod","spec":{"priority":' + b"9" * 5000 + b"}}}"
    with pytest.raises(BadEvent, match=r"^invalid JSON: Exceeds the limit"):
        decode_cluster_event(POD_SUBJECT, data, None, 1)


def test_msgpack_payloads_are_checked_too() -> None:
    pod = make_pod("p")
    pod["metadata"]["labels"] = {"app": "väl"}
    data = msgpack.packb({"type": "ADDED", "object": pod})
    with pytest.raises(BadEvent, match=r'^metadata\.labels: Invalid value: "väl"'):
        decode_cluster_event(POD_SUBJECT, data, {"Content-Type": "application/msgpack"}, 1)


def test_a_reason_is_always_sendable() -> None:
    """A pydantic location carries the user's key: BadEvent keeps the reason on one line
    (pydantic itself replaces a lone surrogate there)."""
    got = refusal(pod_with("metadata.labels", {"a\ud800\nb": 5}))
    assert got.startswith("metadata.labels.a")
    assert got.endswith("\\nb: Input should be a valid string")
    assert str(BadEvent("x\ud800\r\ny")) == "x\\ud800\\r\\ny"


# --- what routing reads of a node ---------------------------------------------


def test_node_conditions_are_objects_with_string_fields() -> None:
    """Routing compares the conditions of a node's versions: a malformed one is refused
    at the door, not met there (found by test_door_property)."""
    node = make_node("n")
    node["status"]["conditions"] = [{"type": "Ready", "status": "True"}, None]
    assert refusal(node, NODE_SUBJECT).startswith("status.conditions[1]: Input should be")
    node["status"]["conditions"] = [{"type": ["Ready"], "status": "True"}]
    assert refusal(node, NODE_SUBJECT).startswith("status.conditions[0].type: Input should be")
