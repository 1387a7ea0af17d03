"""Watch events from the public cluster subjects, decoded and validated once.

A watch event is `{"type": ADDED|MODIFIED|DELETED, "object": <object>}` on
`ksched.cluster.nodes.<name>`, `ksched.cluster.priorityclasses.<name>` or, for the
namespaced kinds, `ksched.cluster.<kind>.<namespace>.<name>` (pods, pdbs, podgroups, workloads,
workloadpodgroups, services, replicasets, statefulsets, replicationcontrollers).
The subject plays the part of the API server's URL: it fills a missing
namespace/name in the object and must agree with the ones present.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from shared.api.field_validation import invalid_message
from shared.api.models import (
    EVENT_TYPES,
    Node,
    Pod,
    PodGroup,
    PriorityClass,
    describe_validation_error,
    validate_label,
    validate_subdomain,
)
from shared.api.owners import OWNER_MODELS, Owner, name_error
from shared.api.pdb import PodDisruptionBudget
from shared.api.pod_validation import pod_spec_errors
from shared.api.podgroup import QUALIFIED_KIND as POD_GROUP_V1ALPHA2
from shared.api.podgroup import SchedulingPodGroup, pod_group_errors
from shared.api.podparse import TemplateKey, memoize, parse_pod, template_key
from shared.api.podresources import pod_resources_errors
from shared.api.schema import MAX_STRICT_ERRORS, unknown_beside, unknown_in
from shared.api.validation import (
    SHOWN_MAX,
    go_escape,
    go_quote,
    invalid_object,
    label_errors,
    show_number,
)
from shared.api.workload import V1ALPHA2, V1BETA1, Workload, workload_errors
from shared.subjects import CLUSTER_KINDS, object_of_subject
from shared.wire import DecodeError, decode_user_payload, pack

Kind = Literal[
    "node",
    "pod",
    "pdb",
    "podgroup",
    "workload",
    "workloadpodgroup",
    "priorityclass",
    "service",
    "replicaset",
    "statefulset",
    "replicationcontroller",
]
ClusterObject = (
    Node
    | Pod
    | PodDisruptionBudget
    | PodGroup
    | Workload
    | SchedulingPodGroup
    | PriorityClass
    | Owner
)
_MODELS: dict[str, type[ClusterObject]] = {
    "node": Node,
    "pod": Pod,
    "pdb": PodDisruptionBudget,
    "podgroup": PodGroup,
    "workload": Workload,
    "workloadpodgroup": SchedulingPodGroup,
    "priorityclass": PriorityClass,
    **{kind.lower(): model for kind, model in OWNER_MODELS.items()},
}
# The API schema's type for each kind (shared/api/schema_fields.py).
_SCHEMA_TYPES = {
    "node": "Node",
    "pod": "Pod",
    "pdb": "PodDisruptionBudget",
    "podgroup": "PodGroup",
    "workload": "Workload",
    "workloadpodgroup": "PodGroupV1alpha2",
    "priorityclass": "PriorityClass",
    "service": "Service",
    "replicaset": "ReplicaSet",
    "statefulset": "StatefulSet",
    "replicationcontroller": "ReplicationController",
}


# The integers msgpack packs: int64 and uint64.
PACKABLE_INT_MIN, PACKABLE_INT_MAX = -(2**63), 2**64 - 1


class BadEvent(ValueError):
    """An event ksched refuses; str(err) is the reason given to the publisher.

    The reason is always sendable: valid UTF-8 (a lone surrogate from the payload is
    escaped) on one line.
    """

    def __init__(self, reason: str) -> None:
        if not reason.isprintable():
            reason = "".join(ch if ch.isprintable() else go_escape(ch) for ch in reason)
        super().__init__(reason)


@dataclass(frozen=True)
class SubjectRef:
    kind: Kind
    namespace: str
    name: str


@dataclass
class ClusterEvent:
    kind: Kind
    type: str
    obj: ClusterObject
    raw: dict[str, Any]  # the object as published, with namespace/name filled in
    subject: str
    seq: int  # stream sequence: the object's resourceVersion
    # Fields the API schema does not have: the API server warns about them when the
    # client does not ask for strict validation, and so does the watcher.
    unknown: list[str] = field(default_factory=list)
    # `raw` packed (msgpack), as the door's check packed it: the internal hops carry
    # these bytes while `raw` is still that object (admission may replace it).
    packed: tuple[dict[str, Any], bytes] | None = None


def parse_subject(subject: str) -> SubjectRef:
    kind, namespace, name = _object_of(subject)
    return SubjectRef(kind, namespace, name)


def _object_of(subject: str) -> tuple[Kind, str, str]:
    found = object_of_subject(subject)
    if found is not None:
        return found  # type: ignore[return-value]
    namespaced = ", ".join(
        prefix.rsplit(".", 1)[1] for prefix, scoped in CLUSTER_KINDS.values() if scoped
    )
    raise BadEvent(
        f"subject {subject!r} is not ksched.cluster.nodes.<name>, "
        "ksched.cluster.priorityclasses.<name> or "
        f"ksched.cluster.<{namespaced}>.<namespace>.<name>"
    )


def decode_cluster_event(
    subject: str, data: bytes, headers: Mapping[str, str] | None, seq: int
) -> ClusterEvent:
    kind, namespace, name = _object_of(subject)
    try:
        payload = decode_user_payload(data, headers)
    except DecodeError as err:
        raise BadEvent(str(err)) from None
    except ValueError as err:  # json.loads: an integer of more than 4300 digits
        raise BadEvent(f"invalid JSON: {str(err).split(':', 1)[0]}") from None
    if not isinstance(payload, dict):
        raise BadEvent("event must be an object {type, object}")
    etype = payload.get("type")
    if etype not in EVENT_TYPES:
        raise BadEvent(f"type must be one of {', '.join(EVENT_TYPES)}, got {etype!r}")
    raw = payload.get("object")
    model = _MODELS[kind]
    if not isinstance(raw, dict):
        raise BadEvent(f"object must be a Kubernetes {model.__name__} object")
    raw = _fill_names(raw, kind, namespace, name)
    key = template_key(raw.get("spec")) if model is Pod else None
    # Validated as the API server does on create and update (a delete carries no object).
    unknown = [] if etype == "DELETED" else _api_checks(kind, raw, key)
    try:
        obj = parse_pod(raw, key) if model is Pod else model.model_validate(raw)
        _validate_names(obj)
    except ValidationError as err:
        raise BadEvent(describe_validation_error(err)) from None
    except ValueError as err:
        raise BadEvent(str(err)) from None
    _validate_labels(obj)
    if isinstance(obj, Pod):
        _validate_pod_resources(raw)
    packed = _packed(raw)
    return ClusterEvent(kind, etype, obj, raw, subject, seq, unknown, (raw, packed))


def _api_checks(kind: Kind, raw: dict[str, Any], key: TemplateKey | None) -> list[str]:
    """The API server's checks of an object beyond its models: the fields its schema
    does not know (returned, to warn about) and, for a pod, the validation of its spec
    (BadEvent). Pods of one template share a spec: its checks are made once."""
    name = str(raw["metadata"].get("name"))
    if kind == "workload":
        invalid = workload_errors(raw)
        if invalid:
            raise BadEvent(invalid_message("Workload", name, invalid))
        if raw.get("apiVersion") == V1ALPHA2:
            return unknown_in(raw, "WorkloadV1alpha2")
        if raw.get("apiVersion") == V1BETA1:
            return unknown_in(raw, "WorkloadV1beta1")
    if kind == "workloadpodgroup":
        invalid = pod_group_errors(raw)
        if invalid:
            raise BadEvent(invalid_object(POD_GROUP_V1ALPHA2, name, invalid))
        if raw.get("apiVersion") == V1BETA1:
            return unknown_in(raw, "PodGroupV1beta1")
    if kind != "pod":
        return unknown_in(raw, _SCHEMA_TYPES[kind])
    invalid, in_spec = _spec_checks(raw.get("spec"), key)
    if invalid:
        raise BadEvent(invalid_message("Pod", str(raw["metadata"].get("name")), invalid))
    rest = unknown_beside(raw, "Pod", "spec")
    if not in_spec:
        return rest
    # kubectl's order: the top-level fields sorted, spec's paths in spec's place
    before = [p for p in rest if p.split(".", 1)[0].split("[", 1)[0] < "spec"]
    return (before + in_spec + rest[len(before) :])[:MAX_STRICT_ERRORS]


# A pod spec's checks by its template_key: (validation errors, unknown fields' paths).
_SPEC_CHECKS: dict[bytes, tuple[list[str], list[str]]] = {}


def _spec_checks(spec: Any, key: TemplateKey | None) -> tuple[list[str], list[str]]:
    known = _SPEC_CHECKS.get(key[0]) if key is not None else None
    if known is not None:
        return known
    in_spec = unknown_in(spec, "PodSpec", "spec") if isinstance(spec, Mapping) else []
    checks = (pod_spec_errors(spec), in_spec)
    if key is not None:
        memoize(_SPEC_CHECKS, key[0], checks)
    return checks


# Namespaces found valid: few, and met on every namespaced event.
_VALID_NAMESPACES: set[str] = set()
VALID_NAMESPACES_MAX = 4096


def _validate_names(obj: ClusterObject) -> None:
    if isinstance(obj, Pod):  # first: nearly every event is a pod's
        validate_subdomain(obj.metadata.name, "pod name")
        _validate_namespace(obj.metadata.namespace)
    elif isinstance(obj, Node):
        validate_subdomain(obj.metadata.name, "node name")
    elif isinstance(obj, PodDisruptionBudget):
        validate_subdomain(obj.metadata.name, "PodDisruptionBudget name")
    elif isinstance(obj, PriorityClass):
        validate_subdomain(obj.metadata.name, "PriorityClass name")
    elif isinstance(obj, PodGroup | Workload | SchedulingPodGroup):
        validate_subdomain(obj.metadata.name, f"{obj.kind.lower()} name")
        _validate_namespace(obj.metadata.namespace)
    else:  # Services and controllers: the API server's message
        error = name_error(obj)
        if error:
            raise ValueError(error)
        _validate_namespace(obj.metadata.namespace)


def _validate_namespace(namespace: str) -> None:
    if namespace in _VALID_NAMESPACES:
        return
    validate_label(namespace, "namespace")
    if len(_VALID_NAMESPACES) >= VALID_NAMESPACES_MAX:
        _VALID_NAMESPACES.clear()
    _VALID_NAMESPACES.add(namespace)


def _validate_labels(obj: ClusterObject) -> None:
    """metadata.labels of every kind and a pod's spec.nodeSelector, as the API server
    validates them."""
    errors = label_errors(obj.metadata.labels, "metadata.labels")
    if isinstance(obj, Pod):
        errors += label_errors(obj.spec.node_selector, "spec.nodeSelector")
    if errors:
        raise BadEvent("; ".join(errors))


def _validate_pod_resources(raw: dict[str, Any]) -> None:
    """spec.resources (pod-level resources), as the API server validates it."""
    errors = pod_resources_errors(raw.get("spec") or {})
    if errors:
        raise BadEvent("; ".join(errors))


def _packed(raw: dict[str, Any]) -> bytes:
    """Every internal hop packs the object with msgpack: refuse one it cannot carry
    (an integer beyond 64 bits, a string that is not UTF-8). Packing is the check;
    finding what failed, the slow walk, is for refused objects only."""
    try:
        return pack(raw)
    except Exception as err:  # msgpack raises several unrelated types
        raise BadEvent(_unpackable(raw) or f"object cannot be packed: {err}") from None


def _unpackable(value: Any, path: str = "") -> str | None:
    """The first part of `value` msgpack cannot pack, as "<path>: <why>"; None if none."""
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return f"{path or '(object)'}: invalid UTF-8 string"
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        if PACKABLE_INT_MIN <= value <= PACKABLE_INT_MAX:
            return None
        return f"{path or '(object)'}: integer {show_number(value)} out of range (-2^63 .. 2^64-1)"
    if isinstance(value, dict):
        for key, item in value.items():
            child = _key_path(path, key)
            problem = _unpackable(key, child) or _unpackable(item, child)
            if problem:
                return problem
        return None
    if isinstance(value, list):
        for i, item in enumerate(value):
            problem = _unpackable(item, f"{path}[{i}]")
            if problem:
                return problem
        return None
    try:
        pack(value)
    except Exception:
        return f"{path or '(object)'}: a {type(value).__name__} cannot be packed"
    return None


def _key_path(path: str, key: Any) -> str:
    if isinstance(key, str) and key.isprintable():
        return f"{path}.{key}" if path else key
    shown = go_quote(key, SHOWN_MAX) if isinstance(key, str) else repr(key)
    return f"{path}[{shown}]"


def _fill_names(raw: dict[str, Any], kind: Kind, namespace: str, name: str) -> dict[str, Any]:
    """`raw` with the subject's names where it has none. Filled in place: `raw` was
    decoded from the event's bytes just before, and nothing else holds it."""
    meta = raw.get("metadata")
    if meta is None:
        meta = raw["metadata"] = {}
    if not isinstance(meta, dict):
        raise BadEvent("metadata must be an object")
    _agree(meta, "name", name)
    if kind not in ("node", "priorityclass"):  # cluster-scoped
        _agree(meta, "namespace", namespace)
    return raw


def _agree(meta: dict[str, Any], field: str, from_subject: str) -> None:
    value = meta.get(field)
    if value in (None, ""):
        meta[field] = from_subject
    elif value != from_subject:
        raise BadEvent(f"metadata.{field} {value!r} does not match the subject ({from_subject!r})")
