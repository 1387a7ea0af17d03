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

1.37's v1beta1 Workload and PodGroup (validation-gen's update rules, by the object's
apiVersion) are not all immutable:

- a Workload's podGroupTemplates may not gain or lose a template (+k8s:update=NoAddItem:
  `spec.podGroupTemplates[i]: Forbidden: cannot add new items`; NoRemoveItem:
  `spec.podGroupTemplates: Forbidden: cannot remove items`), matched by name;
- in a template, and in a PodGroup's spec, schedulingPolicy's `basic` is immutable and
  its `gang` may not be set nor cleared (NoSet: `field cannot be set once created`,
  NoUnset: `field cannot be cleared once set`), but `gang.minCount` may change: the
  informers take the new object and GangScheduling reads the new count;
- every other field of a template or PodGroup spec (schedulingConstraints,
  resourceClaims, disruptionMode, priorityClassName, priority, preemptionPolicy,
  workloadRef, parentCompositePodGroupName) and spec.controllerRef are immutable;
  validate.Immutable reports no value: `<path>: Invalid value: null: field is immutable`.

An update that changes the apiVersion is judged by the new version's rules, the old
object's values read at the same paths (ksched converts nothing: a field whose shape
differs between versions, as schedulingConstraints, counts as changed).

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

from shared.api.validation import forbidden, invalid, invalid_object
from shared.api.workload import V1BETA1

IMMUTABLE = "field is immutable"
NO_ADD_ITEM = "cannot add new items"
NO_REMOVE_ITEM = "cannot remove items"
NO_SET = "field cannot be set once created"
NO_UNSET = "field cannot be cleared once set"

# Per subject kind: the immutable fields, as paths into the object (v1alpha1/v1alpha2);
# and how the API server names the kind in its error.
_FIELDS: dict[str, tuple[str, ...]] = {
    "workload": ("spec.controllerRef", "spec.podGroups", "spec.podGroupTemplates"),
    "workloadpodgroup": (
        "spec.podGroupTemplateRef",
        "spec.schedulingPolicy",
        "spec.schedulingConstraints",
    ),
    "pod": ("spec.workloadRef", "spec.schedulingGroup"),
}
# v1beta1: the fields its update rules read, in the order the API server checks them.
# The fields of a template (of a Workload) or of a PodGroup's spec, after its policy:
_GROUP_FIELDS = (
    "schedulingConstraints",
    "resourceClaims",
    "disruptionMode",
    "priorityClassName",
    "priority",
    "preemptionPolicy",
)
_V1BETA1_FIELDS: dict[str, tuple[str, ...]] = {
    "workload": ("spec.controllerRef", "spec.podGroupTemplates"),
    "workloadpodgroup": (
        "spec.parentCompositePodGroupName",
        "spec.workloadRef",
        "spec.schedulingPolicy",
        *(f"spec.{name}" for name in _GROUP_FIELDS),
    ),
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
    that has none. A Workload's or PodGroup's start with its rules' version: V1BETA1
    or "" (then the values at the v1beta1 paths, or at the older ones)."""
    paths = _FIELDS.get(kind)
    if paths is None:
        return None
    if kind == "pod" and _in_no_gang(raw):  # nearly every event: no path walked
        return _NONE_OF[len(paths)]
    if kind in _V1BETA1_FIELDS:
        beta = raw.get("apiVersion") == V1BETA1
        paths = _V1BETA1_FIELDS[kind] if beta else paths
        return (V1BETA1 if beta else "", *(_at(raw, path) for path in paths))
    values = tuple(_at(raw, path) for path in paths)
    # Most pods are in no gang: one shared tuple for them, not one each.
    return _NONE_OF.get(len(values), values) if not any(values) else values


def immutable_errors(kind: str, old: Fields, new: Fields) -> list[str]:
    """The errors of the update from `old` to `new`: one per immutable field whose value
    changed; v1beta1's by its own rules (see the module's doc)."""
    paths = _FIELDS[kind]
    if kind in _V1BETA1_FIELDS:
        # Judged by the new object's version; the old values by path, whatever its version.
        old_paths = _V1BETA1_FIELDS[kind] if old[0] == V1BETA1 else paths
        old_at = dict(zip(old_paths, old[1:], strict=True))
        if new[0] == V1BETA1:
            paths = _V1BETA1_FIELDS[kind]
            return _v1beta1_errors(kind, tuple(old_at.get(p) for p in paths), new[1:])
        old, new = tuple(old_at.get(p) for p in paths), new[1:]
    errs = []
    for path, before, after in zip(paths, old, new, strict=True):
        if _normal(before) != _normal(after):
            errs.append(invalid(path, _shown(after), IMMUTABLE))
    return errs


def _v1beta1_errors(kind: str, old: Fields, new: Fields) -> list[str]:
    if kind == "workload":
        ref_before, templates_before = old
        ref_after, templates_after = new
        errs = _immutable("spec.controllerRef", ref_before, ref_after)
        return errs + _templates_errors(templates_before, templates_after)
    parent, ref, policy, *rest = zip(old, new, strict=True)
    errs = _immutable("spec.parentCompositePodGroupName", *parent)
    errs += _immutable("spec.workloadRef", *ref)
    errs += _policy_errors("spec.schedulingPolicy", *policy)
    for name, (before, after) in zip(_GROUP_FIELDS, rest, strict=True):
        if name == "disruptionMode":  # defaulted to single upstream
            before, after = before or _SINGLE, after or _SINGLE
        errs += _immutable(f"spec.{name}", before, after)
    return errs


_SINGLE: dict[str, Any] = {"single": {}}


def _templates_errors(old: Any, new: Any) -> list[str]:
    """A Workload's podGroupTemplates: none added nor removed (by name), then each
    template's own rules against the template of its name."""
    path = "spec.podGroupTemplates"
    before = {t.get("name"): t for t in _items(old)}
    after = _items(new)
    names = {t.get("name") for t in after}
    errs = []
    added = next((i for i, t in enumerate(after) if t.get("name") not in before), None)
    if added is not None:
        errs.append(forbidden(f"{path}[{added}]", NO_ADD_ITEM))
    if any(name not in names for name in before):
        errs.append(forbidden(path, NO_REMOVE_ITEM))
    if errs:
        return errs
    for i, template in enumerate(after):
        old_template = before[template.get("name")]
        at = f"{path}[{i}]"
        errs += _policy_errors(
            f"{at}.schedulingPolicy",
            old_template.get("schedulingPolicy"),
            template.get("schedulingPolicy"),
        )
        for name in _GROUP_FIELDS:
            errs += _immutable(f"{at}.{name}", old_template.get(name), template.get(name))
    return errs


def _policy_errors(path: str, old: Any, new: Any) -> list[str]:
    """PodGroupSchedulingPolicy on update: `basic` immutable, `gang` neither set nor
    cleared; gang.minCount free to change."""
    old = old if isinstance(old, Mapping) else {}
    new = new if isinstance(new, Mapping) else {}
    errs = _immutable(f"{path}.basic", old.get("basic"), new.get("basic"), absent_is_empty=False)
    had, has = old.get("gang") is not None, new.get("gang") is not None
    if has and not had:
        errs.append(forbidden(f"{path}.gang", NO_SET))
    elif had and not has:
        errs.append(forbidden(f"{path}.gang", NO_UNSET))
    return errs


def _immutable(path: str, before: Any, after: Any, absent_is_empty: bool = True) -> list[str]:
    """validate.Immutable: it reports no value. `basic: {}` is set, not absent."""
    if absent_is_empty:
        before, after = _normal(before), _normal(after)
    return [] if before == after else [invalid(path, "null", IMMUTABLE)]


def _items(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def refusal(kind: str, name: str, errors: list[str]) -> str:
    """The API server's answer to the update: `Workload.scheduling.k8s.io "w" is invalid:
    spec.podGroups: Invalid value: [...]: field is immutable`."""
    return invalid_object(_QUALIFIED[kind], name, errors)


@dataclass
class ImmutableFields:
    """The uid and immutable fields of each object seen, by (kind, "ns/name")."""

    seen: dict[tuple[str, str], tuple[str, Fields]] = field(default_factory=dict)

    def refusal(
        self,
        kind: str,
        key: str,
        raw: Mapping[str, Any],
        deleted: bool,
        fields: Fields | None = None,
    ) -> str | None:
        """Why the event is refused as an update that changes an immutable field, or None.
        `fields`: the event's `immutable_fields`, when the caller has them already."""
        old = self.seen.get((kind, key))
        if old is None or deleted:
            return None
        old_uid, old_fields = old
        meta = raw.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if old_uid and uid != old_uid:
            return None  # another object of the same name
        new_fields = fields if fields is not None else immutable_fields(kind, raw)
        if new_fields is None or new_fields == old_fields:  # the common case: unchanged
            return None
        errors = immutable_errors(kind, old_fields, new_fields)
        return refusal(kind, str(meta.get("name") or ""), errors) if errors else None

    def remember(
        self,
        kind: str,
        key: str,
        raw: Mapping[str, Any],
        deleted: bool,
        fields: Fields | None = None,
    ) -> None:
        """The event was accepted: it is now the object (or the object is gone)."""
        fields = fields if fields is not None else immutable_fields(kind, raw)
        if fields is None:
            return
        if deleted:
            self.seen.pop((kind, key), None)
            return
        uid = str((raw.get("metadata") or {}).get("uid") or "")
        self.seen[kind, key] = (uid, fields)


# A pod's immutable fields, all top-level fields of its spec: their names there.
_POD_SPEC_FIELDS = frozenset(path.removeprefix("spec.") for path in _FIELDS["pod"])


def _in_no_gang(raw: Mapping[str, Any]) -> bool:
    """A pod whose spec has none of its immutable fields: their values are all None."""
    spec = raw.get("spec")
    return isinstance(spec, Mapping) and spec.keys().isdisjoint(_POD_SPEC_FIELDS)


def _at(raw: Mapping[str, Any], path: str) -> Any:
    value: Any = raw
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _normal(value: Any) -> Any:
    """Absent, null and empty are one value (an omitted optional field)."""
    return None if value in (None, {}, [], "") else value


def _shown(value: Any) -> str:
    return "null" if value is None else json.dumps(value, separators=(",", ":"), sort_keys=True)
