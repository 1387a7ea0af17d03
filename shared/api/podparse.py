"""Pods validated as pydantic would, at a fraction of its cost per pod.

Every pod the watcher takes in is validated (shared/api/events.py), and every pod a
service reads is parsed (shared/framework/types.py). Two things keep that cheap:

- Pods of one template (a Deployment's, a Job's) share a spec: it is validated once
  and the result reused (`template_key`, the memo), a bound pod's spec differing only
  in its nodeName.
- A pod's metadata and status are new on each pod, and pydantic's validation of them
  was most of what a pod cost after that (each model's validators run in Python).
  `_plain_pod` builds the same models straight from an input of the plain shape: every
  field the models read with the exact type JSON gives it (str, dict, list, None where
  allowed), and nothing pydantic would read under its Python name (populate_by_name).
  Anything else is validated by pydantic, which then says what is wrong in its own
  words.

The objects and the errors are the same either way (tests/unit/test_parse_pod.py).
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgpack
from pydantic import BaseModel

from shared.api.models import ObjectMeta, Pod, PodCondition, PodSpec, PodStatus
from shared.api.names import DEFAULT_NAMESPACE

ModelT = TypeVar("ModelT", bound=BaseModel)
_set = object.__setattr__

# Fields whose Python name differs from their alias: pydantic reads them under either
# name (populate_by_name), so an input holding the Python name takes the slow path.
_META_SNAKE = frozenset({"creation_timestamp", "deletion_timestamp"})
_STATUS_SNAKE = frozenset({"nominated_node_name", "start_time"})
_CONDITION_SNAKE = frozenset({"last_transition_time"})
_POD_SNAKE = frozenset({"api_version"})

# The fields each builder fills, to check against the models (a field added to a model
# must be added here too: tests/unit/test_parse_pod.py compares them).
BUILT_FIELDS: dict[type[BaseModel], tuple[str, ...]] = {
    ObjectMeta: (
        "name",
        "namespace",
        "uid",
        "labels",
        "annotations",
        "creation_timestamp",
        "deletion_timestamp",
    ),
    PodCondition: ("type", "status", "reason", "message", "last_transition_time"),
    PodStatus: ("phase", "conditions", "nominated_node_name", "start_time"),
    Pod: ("api_version", "kind", "metadata", "spec", "status"),
}


class _NotPlain(Exception):
    """The input is not of the plain shape: pydantic validates it."""


# Validated PodSpecs by their packed form. Pods of one template (a Deployment's, a
# Job's) share a spec; validating it (containers, quantities) is most of a pod's cost.
# A spec is never changed after validation, so pods may share one.
_SPEC_MEMO: dict[bytes, PodSpec] = {}
SPEC_MEMO_MAX = 4096
SPEC_MEMO_MAX_BYTES = 64 * 1024

M = TypeVar("M")


def memoize(memo: dict[bytes, M], key: bytes, value: M) -> None:
    """Keep `value` for the spec packed as `key`, unless the spec is too large to keep
    around; the oldest entry makes room."""
    if len(key) > SPEC_MEMO_MAX_BYTES:
        return
    if len(memo) >= SPEC_MEMO_MAX:
        del memo[next(iter(memo))]
    memo[key] = value


TemplateKey = tuple[bytes, str | None]
_UNSET: Any = object()


def template_key(spec: Any) -> TemplateKey | None:
    """What pods of one template share: the spec packed without a bound pod's nodeName
    (one entry per template, not per node), and that nodeName; None when the spec
    cannot be packed (e.g. an integer beyond 64 bits) or is not an object."""
    if not isinstance(spec, dict):
        return None
    node_name = spec.get("nodeName")
    if isinstance(node_name, str) and node_name and "node_name" not in spec:
        template = {k: v for k, v in spec.items() if k != "nodeName"}
    else:
        template, node_name = spec, None
    try:
        return msgpack.packb(template), node_name
    except (TypeError, ValueError, OverflowError):
        return None


def parse_pod(raw: dict[str, Any], key: TemplateKey | None = _UNSET) -> Pod:
    """Pod.model_validate(raw), with a spec validated before reused: the result and
    the errors are the same (the spec is validated on its own either way). `key` is
    the spec's template_key, when the caller has it already."""
    if key is _UNSET:
        key = template_key(raw.get("spec"))
    if key is None:
        return Pod.model_validate(raw)
    packed, node_name = key
    known = _SPEC_MEMO.get(packed)
    if known is None:
        pod = Pod.model_validate(raw)
        spec = pod.spec if node_name is None else pod.spec.model_copy(update={"node_name": ""})
        memoize(_SPEC_MEMO, packed, spec)
        return pod
    if node_name is not None:
        known = _with_node_name(known, node_name)
    try:
        return _plain_pod(raw, known)
    except _NotPlain:
        pod = Pod.model_validate({k: v for k, v in raw.items() if k != "spec"})
        pod.spec = known
        return pod


def _with_node_name(spec: PodSpec, node_name: str) -> PodSpec:
    """spec.model_copy(update={"node_name": node_name}), without its generic steps."""
    fields = spec.__pydantic_fields_set__ | {"node_name"}
    return _model(PodSpec, {**spec.__dict__, "node_name": node_name}, fields)


def _model(cls: type[ModelT], values: dict[str, Any], fields_set: set[str]) -> ModelT:
    """An instance as validation leaves it: its fields in `values` (in the model's
    order), no extra fields (extra="ignore"), no private attributes."""
    model = cls.__new__(cls)
    _set(model, "__dict__", values)
    _set(model, "__pydantic_fields_set__", fields_set)
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model


def _plain_pod(raw: dict[str, Any], spec: PodSpec) -> Pod:
    """Pod.model_validate(raw) with `spec` as its spec; _NotPlain unless plain."""
    if not _POD_SNAKE.isdisjoint(raw):
        raise _NotPlain
    fields_set = {"spec"}
    api_version = _str(raw, "apiVersion", "v1", fields_set, "api_version")
    kind = _str(raw, "kind", "Pod", fields_set, "kind")
    if kind != "Pod":  # Pod's own validator refuses it, in its words
        raise _NotPlain
    meta = raw.get("metadata")
    if meta is None and "metadata" not in raw:
        meta = {}
    else:
        fields_set.add("metadata")
    status = raw.get("status")
    if status is None and "status" not in raw:
        status = {}
    else:
        fields_set.add("status")
    values = {
        "api_version": api_version,
        "kind": kind,
        "metadata": _meta(meta),
        "spec": spec,
        "status": _status(status),
    }
    return _model(Pod, values, fields_set)


def _meta(meta: Any) -> ObjectMeta:
    if type(meta) is not dict or not _META_SNAKE.isdisjoint(meta):
        raise _NotPlain
    fields_set = {"namespace"}  # set by Pod's validator (ObjectMeta.defaulted)
    values = {
        "name": _str(meta, "name", "", fields_set, "name"),
        "namespace": _str(meta, "namespace", "", fields_set, "namespace") or DEFAULT_NAMESPACE,
        "uid": _str(meta, "uid", "", fields_set, "uid"),
        "labels": _str_map(meta, "labels", fields_set),
        "annotations": _str_map(meta, "annotations", fields_set),
        "creation_timestamp": _opt_str(meta, "creationTimestamp", fields_set, "creation_timestamp"),
        "deletion_timestamp": _opt_str(meta, "deletionTimestamp", fields_set, "deletion_timestamp"),
    }
    return _model(ObjectMeta, values, fields_set)


def _status(status: Any) -> PodStatus:
    if type(status) is not dict or not _STATUS_SNAKE.isdisjoint(status):
        raise _NotPlain
    fields_set: set[str] = set()
    conditions: list[PodCondition] = []
    if "conditions" in status:
        listed = status["conditions"]
        if type(listed) is not list:
            raise _NotPlain
        conditions = [_condition(c) for c in listed]
        fields_set.add("conditions")
    values = {
        "phase": _str(status, "phase", "", fields_set, "phase"),
        "conditions": conditions,
        "nominated_node_name": _str(
            status, "nominatedNodeName", "", fields_set, "nominated_node_name"
        ),
        "start_time": _opt_str(status, "startTime", fields_set, "start_time"),
    }
    return _model(PodStatus, values, fields_set)


def _condition(cond: Any) -> PodCondition:
    if type(cond) is not dict or not _CONDITION_SNAKE.isdisjoint(cond):
        raise _NotPlain
    if type(cond.get("type")) is not str or type(cond.get("status")) is not str:
        raise _NotPlain  # both required
    fields_set = {"type", "status"}
    values = {
        "type": cond["type"],
        "status": cond["status"],
        "reason": _str(cond, "reason", "", fields_set, "reason"),
        "message": _str(cond, "message", "", fields_set, "message"),
        "last_transition_time": _opt_str(
            cond, "lastTransitionTime", fields_set, "last_transition_time"
        ),
    }
    return _model(PodCondition, values, fields_set)


def _str(data: dict[str, Any], alias: str, default: str, fields_set: set[str], name: str) -> str:
    if alias not in data:
        return default
    value = data[alias]
    if type(value) is not str:
        raise _NotPlain
    fields_set.add(name)
    return value


def _opt_str(data: dict[str, Any], alias: str, fields_set: set[str], name: str) -> str | None:
    if alias not in data:
        return None
    value = data[alias]
    if value is not None and type(value) is not str:
        raise _NotPlain
    fields_set.add(name)
    return value


def _str_map(data: dict[str, Any], alias: str, fields_set: set[str]) -> dict[str, str]:
    """labels and annotations: a map of strings, None for none (ObjectMeta's validator)."""
    if alias not in data:
        return {}
    value = data[alias]
    fields_set.add(alias)
    if value is None:
        return {}
    if type(value) is not dict:
        raise _NotPlain
    for key, item in value.items():
        if type(key) is not str or type(item) is not str:
            raise _NotPlain
    return dict(value)
