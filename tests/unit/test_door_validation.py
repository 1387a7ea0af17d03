"""The door validates as the API server does: what its validation refuses is refused
(with its message), fields its schema does not know are let through and named for a
warning, as for a client that did not ask for strict validation."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from shared.api.events import BadEvent, ClusterEvent, decode_cluster_event
from shared.tools.synthetic import make_node, make_pod

POD_SUBJECT = "ksched.cluster.pods.default.p"


def decode(obj: dict[str, Any], etype: str = "ADDED", subject: str = POD_SUBJECT) -> ClusterEvent:
    data = json.dumps({"type": etype, "object": obj}).encode()
    return decode_cluster_event(subject, data, None, 1)


def refusal(obj: dict[str, Any], etype: str = "ADDED") -> str:
    with pytest.raises(BadEvent) as info:
        decode(obj, etype)
    return str(info.value)


def without_containers() -> dict[str, Any]:
    pod = make_pod("p")
    del pod["spec"]["containers"]
    return pod


def test_a_pod_without_containers_is_refused_as_the_api_server_refuses_it() -> None:
    assert refusal(without_containers()) == 'Pod "p" is invalid: spec.containers: Required value'
    assert refusal(without_containers(), "MODIFIED").endswith("spec.containers: Required value")


def test_several_errors_are_listed_as_the_api_server_aggregates_them() -> None:
    pod = make_pod("p")
    del pod["spec"]["containers"][0]["image"]
    pod["spec"]["restartPolicy"] = "Sometimes"
    assert refusal(pod) == (
        'Pod "p" is invalid: [spec.containers[0].image: Required value, '
        'spec.restartPolicy: Unsupported value: "Sometimes": supported values: '
        '"Always", "OnFailure", "Never"]'
    )


def test_an_enum_the_models_also_know_is_refused_in_the_api_servers_words() -> None:
    pod = make_pod("p")
    pod["spec"]["tolerations"] = [{"key": "k", "operator": "Equals", "value": "v"}]
    assert refusal(pod) == (
        'Pod "p" is invalid: spec.tolerations[0].operator: Unsupported value: "Equals": '
        'supported values: "Equal", "Exists"'
    )


def test_a_delete_is_not_validated() -> None:
    """A DELETE request carries no object to validate: the last version is taken."""
    pod = without_containers()
    pod["spec"]["nodeSelecter"] = {}
    ev = decode(pod, "DELETED")
    assert ev.type == "DELETED" and ev.unknown == []


def test_a_refused_template_is_refused_every_time() -> None:
    """Checks are remembered per template: the second pod of a template is refused too,
    with its own name."""
    first, second = without_containers(), without_containers()
    second["metadata"]["name"] = "q"
    assert refusal(first).startswith('Pod "p" is invalid')
    with pytest.raises(BadEvent) as info:
        decode(second, subject="ksched.cluster.pods.default.q")
    assert str(info.value) == 'Pod "q" is invalid: spec.containers: Required value'


def test_unknown_fields_are_let_through_and_named() -> None:
    pod = make_pod("p")
    pod["spec"]["nodeSelecter"] = {"disk": "ssd"}
    pod["spec"]["containers"][0]["resources"]["requets"] = {"cpu": "1"}
    ev = decode(pod)
    assert ev.unknown == ["spec.containers[0].resources.requets", "spec.nodeSelecter"]
    assert ev.obj.spec.node_selector == {}  # as the API server, it drops what it does not know


def test_unknown_fields_come_in_kubectls_order_around_the_spec() -> None:
    pod = make_pod("p")
    pod["zzz"] = 1
    pod["metadata"]["lables"] = {}
    pod["status"] = {"phasee": "Pending"}
    pod["spec"]["priorityClass"] = "high"
    assert decode(pod).unknown == ["metadata.lables", "spec.priorityClass", "status.phasee", "zzz"]


def test_pods_of_one_template_each_get_their_unknown_fields() -> None:
    """The spec's checks are remembered, its unknown fields with them; a bound pod of
    the template shares them."""
    template = make_pod("p")
    template["spec"]["containers"][0]["imagePullPolice"] = "Always"
    for name, node in (("a", ""), ("b", ""), ("c", "node-1")):
        pod = copy.deepcopy(template)
        pod["metadata"]["name"] = name
        if node:
            pod["spec"]["nodeName"] = node
        pod["metadata"]["annotation"] = {"x": name}  # per pod
        ev = decode(pod, subject=f"ksched.cluster.pods.default.{name}")
        assert ev.unknown == ["metadata.annotation", "spec.containers[0].imagePullPolice"]


def test_known_fields_everywhere_give_nothing() -> None:
    assert decode(make_pod("p")).unknown == []


def test_unknown_fields_of_a_node() -> None:
    node = make_node("n")
    node["spec"] = {"taint": [{"key": "k", "effect": "NoSchedule"}]}
    ev = decode(node, subject="ksched.cluster.nodes.n")
    assert ev.unknown == ["spec.taint"]
