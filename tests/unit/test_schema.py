"""Fields unknown to the Kubernetes API schema, found and worded as the API server's
strict decoding reports them: none in real manifests from the Kubernetes docs, the
exact path of each typo, every field of the schema known where it belongs."""

from __future__ import annotations

import copy
from collections import deque
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.api.schema import (
    MAX_STRICT_ERRORS,
    SCHEMA,
    Field,
    bad_request,
    parse_schema,
    strict_decoding_error,
    unknown_fields,
)
from shared.api.schema_fields import KINDS, TYPES, VERSIONED

MANIFESTS = Path(__file__).parents[1] / "data" / "manifests"
# From kubernetes/website content/en/examples: probes, lifecycle hooks, volumes of
# several sources, security contexts, env from the downward API, init containers,
# affinity, a Deployment, and a Service with a StatefulSet and its volumeClaimTemplates.
DOCS = [
    "exec-liveness.yaml",
    "http-liveness.yaml",
    "tcp-liveness-readiness.yaml",
    "grpc-liveness.yaml",
    "lifecycle-events.yaml",
    "security-context.yaml",
    "security-context-4.yaml",
    "default-pod.yaml",
    "dapi-volume.yaml",
    "dapi-envars-container.yaml",
    "pod-projected-svc-token.yaml",
    "init-containers.yaml",
    "pod-with-affinity-anti-affinity.yaml",
    "deployment.yaml",
    "web.yaml",
]


def load(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]


def at(obj: dict[str, Any], dotted: str) -> Any:
    """The value at a dotted path ("spec.containers.0.livenessProbe")."""
    node: Any = obj
    for part in dotted.split("."):
        node = node[int(part)] if part.isdigit() else node[part]
    return node


@pytest.mark.parametrize("name", DOCS)
def test_docs_manifests_have_no_unknown_field(name: str) -> None:
    for obj in load(name):
        assert unknown_fields(obj) == [], (name, obj["kind"])


# A typo in a copy of a docs manifest: (file, document, where, field, typo, path reported)
TYPOS = [
    ("exec-liveness.yaml", 0, "spec", "nodeSelector", "nodeSelecter", "spec.nodeSelecter"),
    (
        "dapi-envars-container.yaml",
        0,
        "spec.containers.0.resources",
        "requests",
        "requets",
        "spec.containers[0].resources.requets",
    ),
    (
        "exec-liveness.yaml",
        0,
        "spec.containers.0.livenessProbe",
        "initialDelaySeconds",
        "initialDelaySecond",
        "spec.containers[0].livenessProbe.initialDelaySecond",
    ),
    ("dapi-volume.yaml", 0, "metadata", "labels", "lables", "metadata.lables"),
    (
        "security-context.yaml",
        0,
        "spec.volumes.0",
        "emptyDir",
        "emptydir",
        "spec.volumes[0].emptydir",
    ),
    (
        "lifecycle-events.yaml",
        0,
        "spec.containers.0.lifecycle",
        "preStop",
        "prestop",
        "spec.containers[0].lifecycle.prestop",
    ),
    (
        "deployment.yaml",
        0,
        "spec.template.spec.containers.0.ports.0",
        "containerPort",
        "containerport",
        "spec.template.spec.containers[0].ports[0].containerport",
    ),
    (
        "web.yaml",
        1,
        "spec.volumeClaimTemplates.0.spec",
        "accessModes",
        "accesModes",
        "spec.volumeClaimTemplates[0].spec.accesModes",
    ),
    ("web.yaml", 0, "spec", "clusterIP", "clusterIp", "spec.clusterIp"),
]


@pytest.mark.parametrize(("name", "doc", "where", "field", "typo", "path"), TYPOS)
def test_a_typo_is_reported_at_its_path(
    name: str, doc: int, where: str, field: str, typo: str, path: str
) -> None:
    obj = copy.deepcopy(load(name)[doc])
    parent = at(obj, where)
    parent[typo] = parent.pop(field, {"disk": "ssd"})  # renamed, or added misspelt
    assert unknown_fields(obj) == [path]


def test_several_unknown_fields_come_sorted_depth_first_as_kubectl_sends_them() -> None:
    pod = load("exec-liveness.yaml")[0]
    pod["zzz"] = 1
    pod["spec"]["nodeSelecter"] = {"disk": "ssd"}
    pod["spec"]["containers"][0]["requets"] = {}
    pod["metadata"]["lables"] = {}
    assert unknown_fields(pod) == [
        "metadata.lables",
        "spec.containers[0].requets",
        "spec.nodeSelecter",
        "zzz",
    ]


def test_maps_are_data_not_fields() -> None:
    """labels, annotations, nodeSelector, requests/limits, matchLabels, a Service's
    selector and a CSI volume's attributes take any key."""
    pod = load("exec-liveness.yaml")[0]
    pod["metadata"]["labels"] = {"anything.example.com/at-all": "x"}
    pod["metadata"]["annotations"] = {"spec": "not a field"}
    pod["spec"]["nodeSelector"] = {"nodeSelecter": "x"}
    pod["spec"]["containers"][0]["resources"] = {"requests": {"example.com/gpu": "1"}}
    pod["spec"]["volumes"] = [{"name": "v", "csi": {"driver": "d", "volumeAttributes": {"a": "b"}}}]
    affinity = {"labelSelector": {"matchLabels": {"foo": "bar"}}, "topologyKey": "zone"}
    pod["spec"]["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [affinity]}
    }
    assert unknown_fields(pod) == []
    service = load("web.yaml")[0]
    service["spec"]["selector"] = {"weird": "x"}
    assert unknown_fields(service) == []


def test_field_names_are_case_sensitive_and_camel_case() -> None:
    pod = load("exec-liveness.yaml")[0]
    pod["spec"]["NodeName"] = "n"
    pod["spec"]["scheduler_name"] = "s"
    assert unknown_fields(pod) == ["spec.NodeName", "spec.scheduler_name"]


def test_below_an_unknown_field_nothing_more_is_reported() -> None:
    pod = load("exec-liveness.yaml")[0]
    pod["spec"]["template"] = {"spec": {"nonsense": 1}}
    assert unknown_fields(pod) == ["spec.template"]


def test_values_of_the_wrong_shape_are_not_walked() -> None:
    pod = load("exec-liveness.yaml")[0]
    pod["spec"]["containers"] = ["not an object", {"name": "c", "image": "i", "x": 1}]
    pod["spec"]["affinity"] = "nope"
    pod["status"] = None
    assert unknown_fields(pod) == ["spec.containers[1].x"]


def test_at_most_a_hundred_are_reported() -> None:
    pod = load("exec-liveness.yaml")[0]
    pod["spec"].update({f"f{i:03}": i for i in range(150)})
    found = unknown_fields(pod)
    assert len(found) == MAX_STRICT_ERRORS
    assert found[0] == "spec.f000"


def test_kinds_outside_the_schema_are_not_checked() -> None:
    assert unknown_fields({"kind": "ConfigMap", "data": {"a": "b"}, "whatever": 1}) == []
    assert unknown_fields({"kind": None}) == []


def test_the_strict_decoding_error_in_the_api_servers_words() -> None:
    """apimachinery's strictDecodingError and the handler's transformDecodeError; the
    version is the object's, without its API group."""
    assert bad_request("Pod", "v1", ["spec.nodeSelecter"]) == (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
        'unknown field "spec.nodeSelecter"'
    )
    assert bad_request("Deployment", "apps/v1", ["spec.replica", "spec.x"]) == (
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding '
        'error: unknown field "spec.replica", unknown field "spec.x"'
    )
    assert strict_decoding_error(['metadata.a"b']) == (
        'strict decoding error: unknown field "metadata.a\\"b"'
    )


# --- the schema itself ---------------------------------------------------------------


def witness(field: Field) -> Any:
    """A value of the field's shape."""
    return {"object": {}, "list": [{}], "map": {"k": "v"}}.get(field.kind, "x")


def routes() -> dict[str, tuple[str, list[str | int]]]:
    """For each schema type, a kind and the keys leading from that kind's root to an
    object of the type (breadth first: the shortest)."""
    found: dict[str, tuple[str, list[str | int]]] = {}
    roots = [*KINDS, *VERSIONED]
    queue: deque[tuple[str, str, list[str | int]]] = deque((k, k, []) for k in roots)
    while queue:
        kind, type_name, keys = queue.popleft()
        if type_name in found:
            continue
        found[type_name] = (kind, keys)
        for name, field in SCHEMA[type_name].items():
            if field.kind == "object":
                queue.append((kind, field.type, [*keys, name]))
            elif field.kind == "list":
                queue.append((kind, field.type, [*keys, name, 0]))
    return found


def build(kind: str, keys: list[str | int], name: str, value: Any) -> dict[str, Any]:
    """An object of `kind` with `value` under `name` at the end of `keys`."""
    root: dict[str, Any] = {"kind": kind}
    if kind in VERSIONED:  # another apiVersion's shape of the kind
        root = {"kind": VERSIONED[kind][0], "apiVersion": VERSIONED[kind][1]}
    node: Any = root
    for i, key in enumerate(keys):
        child: Any = [] if i + 1 < len(keys) and isinstance(keys[i + 1], int) else {}
        if isinstance(key, int):
            node.append(child)
        else:
            node[key] = child
        node = child
    node[name] = value
    return root


def show_path(keys: list[str | int], name: str) -> str:
    text = ""
    for key in [*keys, name]:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else key)
    return text


# Types only ever inlined into others (TypeMeta, ProbeHandler, VolumeSource): their
# fields are checked as the including types' own.
INLINED = {token[3:] for fields in TYPES.values() for token in fields.split() if "..." in token}


def test_every_type_of_the_schema_is_reachable_from_a_kind() -> None:
    assert set(routes()) | INLINED == set(SCHEMA)


@pytest.mark.parametrize("type_name", sorted(set(SCHEMA) - INLINED))
def test_every_field_is_known_where_it_belongs_and_a_typo_of_it_is_not(type_name: str) -> None:
    kind, keys = routes()[type_name]
    for name, field in SCHEMA[type_name].items():
        assert unknown_fields(build(kind, keys, name, witness(field))) == [], name
        typo = name + "x" if name + "x" not in SCHEMA[type_name] else name + "xx"
        obj = build(kind, keys, typo, witness(field))
        assert unknown_fields(obj) == [show_path(keys, typo)], name


def test_a_type_used_but_not_described_fails_at_import() -> None:
    with pytest.raises(KeyError, match="Missing"):
        parse_schema({"Root": "child:Missing"})
    assert parse_schema({"A": "x ...B", "B": "y:{} z:[A]"})["A"] == {
        "x": Field("scalar"),
        "y": Field("map"),
        "z": Field("list", "A"),
    }
