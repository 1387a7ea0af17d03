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


def _by_alias(model: type[BaseModel]) -> dict[str, str]:
    """The model's fields by alias (what the builders read), to count those an input
    sets."""
    return {field.alias or name: name for name, field in model.model_fields.items()}


def _python_names(fields: dict[str, str]) -> frozenset[str]:
    """The fields whose Python name differs from their alias: pydantic reads them under
    either name (populate_by_name), so an input holding the Python name takes the slow
    path."""
    return frozenset(name for alias, name in fields.items() if alias != name)


_POD_FIELDS = _by_alias(Pod)
_META_FIELDS = _by_alias(ObjectMeta)
_STATUS_FIELDS = _by_alias(PodStatus)
_CONDITION_FIELDS = _by_alias(PodCondition)
_POD_SNAKE = _python_names(_POD_FIELDS)
_META_SNAKE = _python_names(_META_FIELDS)
_STATUS_SNAKE = _python_names(_STATUS_FIELDS)
_CONDITION_SNAKE = _python_names(_CONDITION_FIELDS)

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


# The plain types, compared type by type (`type(x) is str`, not isinstance: pydantic's
# lax mode converts some other types, or refuses them in its own words), inline: a
# helper's call per object costs more than the checks.
_STR3 = (str, str, str)
_STR4 = (str, str, str, str)
_OPTIONAL = frozenset({str, type(None)})


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
        known = _bound_spec(packed, known, node_name)
    try:
        return _plain_pod(raw, known)
    except _NotPlain:
        pod = Pod.model_validate({k: v for k, v in raw.items() if k != "spec"})
        pod.spec = known
        return pod


# A template's spec with a node's name, by (template, node): the bound pods of a
# template on one node share it, as the template's pods share theirs.
_BOUND_SPEC_MEMO: dict[tuple[bytes, str], PodSpec] = {}


def _bound_spec(packed: bytes, template: PodSpec, node_name: str) -> PodSpec:
    key = (packed, node_name)
    spec = _BOUND_SPEC_MEMO.get(key)
    if spec is None:
        spec = _with_node_name(template, node_name)
        if len(_BOUND_SPEC_MEMO) >= SPEC_MEMO_MAX:
            del _BOUND_SPEC_MEMO[next(iter(_BOUND_SPEC_MEMO))]
        _BOUND_SPEC_MEMO[key] = spec
    return spec


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
    get = raw.get
    api_version, kind = get("apiVersion", "v1"), get("kind", "Pod")
    if type(api_version) is not str or kind != "Pod" or type(kind) is not str:
        raise _NotPlain  # a kind other than Pod: Pod's own validator refuses it
    values = {
        "api_version": api_version,
        "kind": kind,
        "metadata": _meta(get("metadata", {})),
        "spec": spec,
        "status": _status(get("status", {})),
    }
    return _model(Pod, values, _fields_set(raw, _POD_FIELDS))


def _meta(meta: Any) -> ObjectMeta:
    if type(meta) is not dict or not _META_SNAKE.isdisjoint(meta):
        raise _NotPlain
    get = meta.get
    name, namespace, uid = get("name", ""), get("namespace", ""), get("uid", "")
    created, deleted = get("creationTimestamp"), get("deletionTimestamp")
    if (type(name), type(namespace), type(uid)) != _STR3 or not _OPTIONAL.issuperset(
        (type(created), type(deleted))
    ):
        raise _NotPlain
    values = {
        "name": name,
        "namespace": namespace or DEFAULT_NAMESPACE,  # as Pod's validator defaults it
        "uid": uid,
        "labels": _str_map(get("labels")),
        "annotations": _str_map(get("annotations")),
        "creation_timestamp": created,
        "deletion_timestamp": deleted,
    }
    fields_set = _fields_set(meta, _META_FIELDS)
    fields_set.add("namespace")  # set by Pod's validator (ObjectMeta.defaulted)
    return _model(ObjectMeta, values, fields_set)


def _status(status: Any) -> PodStatus:
    if type(status) is not dict or not _STATUS_SNAKE.isdisjoint(status):
        raise _NotPlain
    get = status.get
    phase, listed = get("phase", ""), get("conditions", [])
    nominated, started = get("nominatedNodeName", ""), get("startTime")
    if (type(phase), type(nominated), type(listed)) != (str, str, list) or (
        type(started) not in _OPTIONAL
    ):
        raise _NotPlain
    values = {
        "phase": phase,
        "conditions": [_condition(c) for c in listed],
        "nominated_node_name": nominated,
        "start_time": started,
    }
    return _model(PodStatus, values, _fields_set(status, _STATUS_FIELDS))


def _condition(cond: Any) -> PodCondition:
    if type(cond) is not dict or not _CONDITION_SNAKE.isdisjoint(cond):
        raise _NotPlain
    get = cond.get
    ctype, status, reason, message = (
        get("type"),
        get("status"),
        get("reason", ""),
        get("message", ""),
    )
    changed = get("lastTransitionTime")
    # type and status are required: None is not a str
    if (type(ctype), type(status), type(reason), type(message)) != _STR4 or (
        type(changed) not in _OPTIONAL
    ):
        raise _NotPlain
    values = {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "last_transition_time": changed,
    }
    return _model(PodCondition, values, _fields_set(cond, _CONDITION_FIELDS))


def _fields_set(data: dict[str, Any], fields: dict[str, str]) -> set[str]:
    """The fields an input sets, as validation counts them: those present by alias.
    Inputs of one kind come with the same few key lists: each one's set is made once
    (and copied: a model adds to its own on assignment)."""
    if len(data) > FIELDS_SET_MEMO_KEYS:
        return {fields[k] for k in data if k in fields}
    key = (id(fields), tuple(data))
    known = _FIELDS_SET_MEMO.get(key)
    if known is None:
        known = frozenset(fields[k] for k in data if k in fields)
        if len(_FIELDS_SET_MEMO) >= FIELDS_SET_MEMO_MAX:
            _FIELDS_SET_MEMO.clear()
        _FIELDS_SET_MEMO[key] = known
    return set(known)


# _fields_set's sets by (the builder's fields, the input's keys in order).
_FIELDS_SET_MEMO: dict[tuple[int, tuple[Any, ...]], frozenset[str]] = {}
FIELDS_SET_MEMO_MAX = 1024
FIELDS_SET_MEMO_KEYS = 16  # an input with more keys than its model has fields: not kept


def _str_map(value: Any) -> dict[str, str]:
    """labels and annotations: a map of strings, None for none (ObjectMeta's validator)."""
    if value is None:
        return {}
    if type(value) is not dict:
        raise _NotPlain
    for key, item in value.items():
        if type(key) is not str or type(item) is not str:
            raise _NotPlain
    return dict(value)
