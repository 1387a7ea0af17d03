"""Decoding and validating watch events from the public subjects."""

from __future__ import annotations

import json

import msgpack
import pytest

from shared.api.events import BadEvent, decode_cluster_event, parse_subject
from shared.api.models import Node, Pod
from shared.tools.synthetic import make_node, make_pod


def encode(obj: dict, etype: str = "ADDED") -> bytes:
    return json.dumps({"type": etype, "object": obj}).encode()


def test_pod_name_with_dots_spans_subject_tokens() -> None:
    ref = parse_subject("ksched.cluster.pods.team-a.web.v2.0")
    assert (ref.kind, ref.namespace, ref.name) == ("pod", "team-a", "web.v2.0")


def test_msgpack_payload_by_content_type() -> None:
    data = msgpack.packb({"type": "ADDED", "object": make_node("n.1")})
    ev = decode_cluster_event(
        "ksched.cluster.nodes.n.1", data, {"Content-Type": "application/msgpack"}, 3
    )
    assert isinstance(ev.obj, Node)
    assert ev.obj.metadata.name == "n.1"
    assert ev.seq == 3


def test_missing_namespace_and_name_come_from_the_subject() -> None:
    pod = make_pod("p")
    del pod["metadata"]["namespace"], pod["metadata"]["name"]
    ev = decode_cluster_event("ksched.cluster.pods.prod.web-1", encode(pod), None, 1)
    assert isinstance(ev.obj, Pod)
    assert ev.obj.key == "prod/web-1"
    assert ev.raw["metadata"]["namespace"] == "prod"


@pytest.mark.parametrize(
    ("subject", "payload", "reason"),
    [
        ("ksched.cluster.pods.default.p", b"{", "invalid JSON"),
        ("ksched.cluster.pods.default.p", b"[1,2]", "event must be an object"),
        (
            "ksched.cluster.pods.default.p",
            b'{"type":"BOOKMARKED","object":{}}',
            "type must be one of",
        ),
        ("ksched.cluster.pods.default.p", b'{"type":"ADDED","object":7}', "object must be"),
        ("ksched.cluster.pods.default.p", encode(make_pod("other")), "does not match the subject"),
        ("ksched.cluster.pods.default.P", encode(make_pod("P")), "DNS-1123"),
        ("ksched.cluster.pods.default.p", encode({"kind": "Pod"}), "spec.containers: Required"),
        ("ksched.cluster.nodes.n1", encode(make_pod("n1")), "kind must be Node"),
        ("ksched.cluster.pods.default", encode(make_pod("p")), "is not ksched.cluster"),
        ("ksched.cluster.pods.default.p", b"[" * 100 + b"]" * 100, "nested deeper"),
    ],
)
def test_bad_events_are_refused_with_a_reason(subject: str, payload: bytes, reason: str) -> None:
    with pytest.raises(BadEvent, match=reason):
        decode_cluster_event(subject, payload, None, 1)


def test_negative_quantity_names_the_field() -> None:
    pod = make_pod("p", cpu="-100m")
    with pytest.raises(BadEvent) as info:
        decode_cluster_event("ksched.cluster.pods.default.p", encode(pod), None, 1)
    assert "spec.containers[0].resources.requests.cpu" in str(info.value)
    assert "non-negative" in str(info.value)


def test_nesting_limit_holds_at_its_boundary() -> None:
    """The bracket-count shortcut must not let the deepest rejected payload through."""
    from shared.wire import MAX_NESTING, DecodeError, decode_user_payload

    deepest_ok = b"[" * (MAX_NESTING - 1) + b"1" + b"]" * (MAX_NESTING - 1)
    assert decode_user_payload(deepest_ok, None) is not None
    too_deep = b"[" * MAX_NESTING + b"1" + b"]" * MAX_NESTING
    with pytest.raises(DecodeError, match="nested deeper"):
        decode_user_payload(too_deep, None)
    brackets_in_strings = b'{"a": "' + b"[" * 200 + b'"}'
    assert decode_user_payload(brackets_in_strings, None) == {"a": "[" * 200}
