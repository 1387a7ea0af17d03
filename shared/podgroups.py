"""Pod groups (gangs) as the cache tracks them, for the Coscheduling plugin.

A pod belongs to group NAME of its namespace by the label
`scheduling.x-k8s.io/pod-group: NAME`. The group's minimum member count comes
from a PodGroup object published on `ksched.cluster.podgroups.<ns>.<name>`
(spec.minMember, spec.scheduleTimeoutSeconds), else from the pod's annotation
`scheduling.x-k8s.io/min-available`.

`PodGroups` is the cache's pure bookkeeping: the PodGroup objects and, per
group, the keys of its existing (not deleted, not finished) pods, whether
pending or bound, which PreFilter counts (scheduler-plugins lists them with
the pod lister). Each group's record is what workers read from Redis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.api.models import object_key

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
MIN_AVAILABLE_ANNOTATION = "scheduling.x-k8s.io/min-available"
POD_GROUP_RESOURCE = "PodGroup"  # the cluster event resource Coscheduling registers


def pod_group_of(raw_pod: dict[str, Any]) -> str:
    """The "ns/name" of the pod's group, or "" for a pod in no group."""
    meta = raw_pod.get("metadata") or {}
    name = (meta.get("labels") or {}).get(POD_GROUP_LABEL)
    if not name:
        return ""
    return object_key(meta.get("namespace") or "", str(name))


def pod_group_spec(raw_group: dict[str, Any]) -> dict[str, Any]:
    """What ksched reads of a PodGroup object (scheduling.x-k8s.io/v1alpha1)."""
    meta = raw_group.get("metadata") or {}
    spec = raw_group.get("spec") or {}
    timeout = spec.get("scheduleTimeoutSeconds")
    return {
        "min_member": int(spec.get("minMember") or 0),
        "timeout": float(timeout) if timeout is not None else None,
        "created": meta.get("creationTimestamp") or "",
    }


def validate_pod_group(raw_group: dict[str, Any]) -> None:
    """Raise ValueError for a PodGroup ksched cannot use."""
    spec = raw_group.get("spec")
    if spec is not None and not isinstance(spec, dict):
        raise ValueError("spec must be an object")
    spec = spec or {}
    for name in ("minMember", "scheduleTimeoutSeconds"):
        value = spec.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"spec.{name} must be a non-negative integer, got {value!r}")


@dataclass
class PodGroups:
    """PodGroup objects and group membership, with the keys changed since last taken."""

    specs: dict[str, dict[str, Any]] = field(default_factory=dict)
    members: dict[str, set[str]] = field(default_factory=dict)
    dirty: set[str] = field(default_factory=set)
    # Every group's record, kept current: the cache's plugins read it (handle.pod_groups).
    records: dict[str, dict[str, Any]] = field(default_factory=dict)

    def upsert_group(self, key: str, raw_group: dict[str, Any]) -> None:
        self.specs[key] = pod_group_spec(raw_group)
        self._changed(key)

    def delete_group(self, key: str) -> None:
        if self.specs.pop(key, None) is not None:
            self._changed(key)

    def set_member(self, pod_key: str, group: str, present: bool) -> None:
        """The pod exists in `group` (present) or not any more."""
        keys = self.members.setdefault(group, set())
        before = len(keys)
        if present:
            keys.add(pod_key)
        else:
            keys.discard(pod_key)
        if not keys:
            del self.members[group]
        if len(keys) != before:
            self._changed(group)

    def _changed(self, key: str) -> None:
        self.dirty.add(key)
        record = self.record(key)
        if record is None:
            self.records.pop(key, None)
        else:
            self.records[key] = record

    def record(self, key: str) -> dict[str, Any] | None:
        """The group's record for workers, None when the cache knows nothing of it."""
        spec, members = self.specs.get(key), self.members.get(key)
        if spec is None and not members:
            return None
        return {**(spec or {}), "object": spec is not None, "members": len(members or ())}

    def restore(self, key: str, rec: dict[str, Any], pod_keys: list[str]) -> None:
        if rec.get("object"):
            self.specs[key] = {k: rec.get(k) for k in ("min_member", "timeout", "created")}
        if pod_keys:
            self.members[key] = set(pod_keys)
        self._changed(key)
        self.dirty.discard(key)

    def take_dirty(self) -> set[str]:
        dirty, self.dirty = self.dirty, set()
        return dirty
