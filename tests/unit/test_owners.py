"""Services, ReplicaSets, StatefulSets and ReplicationControllers on their public
subjects: decoded at the door with the API server's refusals, routed nowhere by the
watcher, kept by the services' informer in the ClusterObjects plugins read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.api.events import BadEvent, decode_cluster_event
from shared.api.owners import ReplicaSet, Service, StatefulSet
from shared.framework.interface import ClusterObjects
from shared.routing import route
from shared.runtime.informer import OWNER_PREFIXES, Informer, owners_handler
from shared.subjects import (
    replica_set_subject,
    replication_controller_subject,
    service_subject,
    stateful_set_subject,
)
from tests.unit.test_pdb import FakeMsg


def encode(obj: Any, etype: str = "ADDED") -> bytes:
    return json.dumps({"type": etype, "object": obj}).encode()


def service(selector: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "spec": {"selector": selector or {"app": "zk"}}}


def stateful_set(spec: dict[str, Any] | None = None) -> dict[str, Any]:
    base = {
        "selector": {"matchLabels": {"app": "zk"}},
        "template": {"metadata": {"labels": {"app": "zk"}}},
    }
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {**base, **(spec or {})}}


def test_each_kind_decodes_with_its_names_from_the_subject() -> None:
    ev = decode_cluster_event(service_subject("ns", "zk-hs"), encode(service()), None, 3)
    assert ev.kind == "service" and isinstance(ev.obj, Service)
    assert (ev.obj.metadata.key, ev.obj.spec.selector) == ("ns/zk-hs", {"app": "zk"})
    ev = decode_cluster_event(stateful_set_subject("ns", "zk"), encode(stateful_set()), None, 4)
    assert ev.kind == "statefulset" and isinstance(ev.obj, StatefulSet)
    rs = {**stateful_set(), "kind": "ReplicaSet"}
    ev = decode_cluster_event(replica_set_subject("ns", "web-1"), encode(rs), None, 5)
    assert isinstance(ev.obj, ReplicaSet)
    rc = {
        "kind": "ReplicationController",
        "spec": {"template": {"metadata": {"labels": {"a": "b"}}}},
    }
    ev = decode_cluster_event(replication_controller_subject("ns", "rc"), encode(rc), None, 6)
    assert ev.obj.spec.selector == {"a": "b"}  # type: ignore[union-attr]  # v1 defaulting
    assert route(ev, frozenset({"default-scheduler"})) == ([], [])


@pytest.mark.parametrize(
    ("subject", "obj", "reason"),
    [
        (
            service_subject("default", "1zk"),
            service(),
            'Service "1zk" is invalid: metadata.name: Invalid value: "1zk": a DNS-1035 label '
            "must consist of lower case alphanumeric characters or '-', start with an "
            "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  "
            "or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        ),
        (
            service_subject("default", "zk"),
            service({"app": "-zk"}),
            'Service "zk" is invalid: spec.selector: Invalid value: "-zk": a valid label must',
        ),
        (
            stateful_set_subject("default", "zk"),
            {"kind": "StatefulSet", "spec": {}},
            'StatefulSet.apps "zk" is invalid: spec.selector: Required value',
        ),
        (
            stateful_set_subject("default", "zk"),
            stateful_set({"selector": {}}),
            'StatefulSet.apps "zk" is invalid: spec.selector: Invalid value: '
            "v1.LabelSelector{MatchLabels:map[string]string(nil), "
            "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid "
            "for statefulset",
        ),
        (
            stateful_set_subject("default", "zk"),
            stateful_set({"template": {"metadata": {"labels": {"app": "kafka"}}}}),
            'StatefulSet.apps "zk" is invalid: spec.template.metadata.labels: Invalid value: '
            'map[string]string{"app":"kafka"}: `selector` does not match template `labels`',
        ),
        (
            replica_set_subject("default", "web"),
            {
                **stateful_set({"replicas": -1}),
                "kind": "ReplicaSet",
            },
            'ReplicaSet.apps "web" is invalid: spec.replicas: Invalid value: -1: must be '
            "greater than or equal to 0",
        ),
        (
            replica_set_subject("default", "web"),
            {
                **stateful_set(
                    {"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}
                ),
                "kind": "ReplicaSet",
            },
            'ReplicaSet.apps "web" is invalid: spec.selector.matchExpressions[0].values: '
            "Required value: must be specified when `operator` is 'In' or 'NotIn'",
        ),
        (
            replication_controller_subject("default", "rc"),
            {"kind": "ReplicationController", "spec": {}},
            'ReplicationController "rc" is invalid: [spec.selector: Required value, '
            "spec.template: Required value]",
        ),
        (
            service_subject("default", "zk"),
            {"apiVersion": "apps/v1", "kind": "StatefulSet"},
            "kind must be Service, got 'StatefulSet'",
        ),
    ],
)
def test_bad_objects_are_refused_with_the_api_servers_message(
    subject: str, obj: dict[str, Any], reason: str
) -> None:
    with pytest.raises(BadEvent) as err:
        decode_cluster_event(subject, encode(obj), None, 1)
    assert str(err.value).startswith(reason)


def test_the_informer_keeps_services_and_controllers_current() -> None:
    objects = ClusterObjects()
    informer = Informer(None, OWNER_PREFIXES, owners_handler(objects), "owners")  # type: ignore[arg-type]

    def feed(subject: str, data: bytes) -> None:
        informer.on_msg(FakeMsg(subject, data))  # type: ignore[arg-type]

    feed(service_subject("default", "zk-hs"), encode(service()))
    feed(service_subject("other", "zk-hs"), encode(service()))
    feed(stateful_set_subject("default", "zk"), encode(stateful_set()))
    assert sorted(objects.services) == ["default", "other"]
    assert objects.controller("StatefulSet", "default", "zk") is not None
    assert objects.selecting
    feed(service_subject("other", "zk-hs"), encode(service(), "DELETED"))
    assert sorted(objects.services) == ["default"]
    # a refused version drops the object: its last good version is outdated
    feed(stateful_set_subject("default", "zk"), encode(stateful_set({"selector": {}})))
    assert objects.controller("StatefulSet", "default", "zk") is None
    feed(service_subject("default", "zk-hs"), b"{not json")
    assert not objects.selecting
    feed("ksched.cluster.widgets.default.x", encode(service()))  # not ours: ignored
    assert not objects.selecting
