"""The Workload API's immutable fields, refused on update as the API server refuses them.

Upstream (1.36) these are `+k8s:immutable` (ValidateImmutableField): once an object
exists, an update may not change

- a Workload's spec.controllerRef and its pod groups (v1alpha1 spec.podGroups, v1alpha2
  spec.podGroupTemplates),
- a v1alpha2 PodGroup's spec (podGroupTemplateRef, schedulingPolicy,
  schedulingConstraints),
- a pod's spec.workloadRef and spec.schedulingGroup (which gang it is in).

The error is field.Invalid(path, new value, "field is immutable"); ksched shows the new
value as JSON (upstream prints the Go value). An object deleted and created again, or
one with another uid, is a new object, free to differ.

`ImmutableFields` remembers, per object, its uid and the values of those fields: the
watcher refuses an update that changes them (the refused event then goes to
ksched.errors and is undone, services/watcher/undo.py), and the informers that read
Workloads and PodGroups keep the old object meanwhile (shared/runtime/informer.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.api.validation import invalid, invalid_object

IMMUTABLE = "field is immutable"

# Per subject kind: the immutable fields, as paths into the object; and how the API
# server names the kind in its error.
_FIELDS: dict[str, tuple[str, ...]] = {
    "workload": ("spec.controllerRef", "spec.podGroups", "spec.podGroupTemplates"),
    "workloadpodgroup": (
        "spec.podGroupTemplateRef",
        "spec.schedulingPolicy",
        "spec.schedulingConstraints",
    ),
    "pod": ("spec.workloadRef", "spec.schedulingGroup"),
}
_QUALIFIED = {
    "workload": "Workload.scheduling.k8s.io",
    "workloadpodgroup": "PodGroup.scheduling.k8s.io",
    "pod": "Pod",
}

Fields = tuple[Any, ...]  # the values at the kind's paths, in order
_NONE_OF = {n: (None,) * n for n in (2, 3)}


def immutable_fields(kind: str, raw: Mapping[str, Any]) -> Fields | None:
    """The values of the kind's immutable fields (None where absent); None for a kind
    that has none."""
    paths = _FIELDS.get(kind)
    if paths is None:
        return None
    values = tuple(_at(raw, path) for path in paths)
    # Most pods are in no gang: one shared tuple for them, not one each.
    return _NONE_OF.get(len(values), values) if not any(values) else values


def immutable_errors(kind: str, old: Fields, new: Fields) -> list[str]:
    """One error per immutable field whose value changed from `old` to `new`."""
    errs = []
    for path, before, after in zip(_FIELDS[kind], old, new, strict=True):
        if _normal(before) != _normal(after):
            errs.append(invalid(path, _shown(after), IMMUTABLE))
    return errs


def refusal(kind: str, name: str, errors: list[str]) -> str:
    """The API server's answer to the update: `Workload.scheduling.k8s.io "w" is invalid:
    spec.podGroups: Invalid value: [...]: field is immutable`."""
    return invalid_object(_QUALIFIED[kind], name, errors)


@dataclass
class ImmutableFields:
    """The uid and immutable fields of each object seen, by (kind, "ns/name")."""

    seen: dict[tuple[str, str], tuple[str, Fields]] = field(default_factory=dict)

    def refusal(self, kind: str, key: str, raw: Mapping[str, Any], deleted: bool) -> str | None:
        """Why the event is refused as an update that changes an immutable field, or None."""
        old = self.seen.get((kind, key))
        if old is None or deleted:
            return None
        old_uid, old_fields = old
        meta = raw.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if old_uid and uid != old_uid:
            return None  # another object of the same name
        new_fields = immutable_fields(kind, raw)
        if new_fields is None or new_fields == old_fields:  # the common case: unchanged
            return None
        errors = immutable_errors(kind, old_fields, new_fields)
        return refusal(kind, str(meta.get("name") or ""), errors) if errors else None

    def remember(self, kind: str, key: str, raw: Mapping[str, Any], deleted: bool) -> None:
        """The event was accepted: it is now the object (or the object is gone)."""
        fields = immutable_fields(kind, raw)
        if fields is None:
            return
        if deleted:
            self.seen.pop((kind, key), None)
            return
        uid = str((raw.get("metadata") or {}).get("uid") or "")
        self.seen[kind, key] = (uid, fields)


def _at(raw: Mapping[str, Any], path: str) -> Any:
    value: Any = raw
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _normal(value: Any) -> Any:
    """Absent, null and empty are one value (an omitted optional field)."""
    return None if value in (None, {}, []) else value


def _shown(value: Any) -> str:
    return "null" if value is None else json.dumps(value, separators=(",", ":"), sort_keys=True)
