"""What `ksched apply` publishes (pure): manifests and the current cluster in, one
action per object out, with kubectl's verbs (created, configured, unchanged, deleted).

Like the API server on create, apply fills in metadata.uid, creationTimestamp and the
namespace; on an update it keeps what the cluster owns (uid, creationTimestamp,
spec.nodeName, status), so re-applying a bound pod does not unbind it. Pods a
re-applied workload no longer wants (scaled down, replaced template, vanished node)
are deleted, as its controller would.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.api.models import object_key
from shared.tools.cli.manifests import Manifest
from shared.tools.cli.workloads import (
    WORKLOAD_KINDS,
    expand,
    owner_reference,
    validate_node,
    validate_pod,
)

# kubectl's resource.group names in `kind/name created`
RESOURCE_NAMES = {
    "Pod": "pod",
    "Node": "node",
    "PodDisruptionBudget": "poddisruptionbudget.policy",
    "PriorityClass": "priorityclass.scheduling.k8s.io",
    "Deployment": "deployment.apps",
    "ReplicaSet": "replicaset.apps",
    "StatefulSet": "statefulset.apps",
    "DaemonSet": "daemonset.apps",
    "Job": "job.batch",
}
SUPPORTED_KINDS = ("Pod", "Node", "PodDisruptionBudget", "PriorityClass", *WORKLOAD_KINDS)
CLUSTER_SCOPED = ("Node", "PriorityClass")
API_VERSIONS = {"PodDisruptionBudget": "policy/v1", "PriorityClass": "scheduling.k8s.io/v1"}
SERVER_FIELDS = ("uid", "creationTimestamp", "resourceVersion", "generation")
# What Priority admission sets on a pod that did not state it (shared/api/priority.py)
ADMISSION_FIELDS = ("priority", "priorityClassName", "preemptionPolicy")


@dataclass(frozen=True)
class Current:
    """The cluster as apply sees it: objects and their stream sequences."""

    pods: Mapping[str, tuple[dict[str, Any], int]] = field(default_factory=dict)  # ns/name
    nodes: Mapping[str, tuple[dict[str, Any], int]] = field(default_factory=dict)
    pdbs: Mapping[str, tuple[dict[str, Any], int]] = field(default_factory=dict)
    priority_classes: Mapping[str, tuple[dict[str, Any], int]] = field(default_factory=dict)


@dataclass(frozen=True)
class Action:
    kind: str  # Pod, Node, PodDisruptionBudget
    obj: dict[str, Any]
    etype: str  # ADDED, MODIFIED, DELETED; "" publishes nothing (unchanged)
    expected_seq: int | None  # publish only if the subject is still at this sequence
    verb: str


@dataclass
class Applied:
    """One line of output and the actions behind it."""

    line: str
    actions: list[Action]


def key_of(obj: dict[str, Any], namespaced: bool = True) -> str:
    meta = obj.get("metadata") or {}
    return object_key(meta.get("namespace") or "", meta["name"]) if namespaced else meta["name"]


def plan(
    manifests: Sequence[Manifest],
    current: Current,
    now: str,
    new_uid: Callable[[], str] = lambda: str(uuid.uuid4()),
) -> list[Applied]:
    """Validate everything first (a bad document publishes nothing), then plan."""
    nodes = {k: v[0] for k, v in current.nodes.items()}
    for m in manifests:  # daemon pods also go to nodes applied in the same run
        if m.obj.get("kind") == "Node":
            validate_node(m, m.obj)
            nodes[m.obj["metadata"]["name"]] = m.obj
    out = []
    for m in manifests:
        kind = m.obj.get("kind")
        if kind not in SUPPORTED_KINDS:
            raise m.error(
                f"kind: Unsupported value: {kind!r}: supported values: {list(SUPPORTED_KINDS)}"
            )
        if kind in WORKLOAD_KINDS:
            pods = expand(m, list(nodes.values()))
            for pod in pods:
                validate_pod(m, pod)
            out.append(_workload(m, pods, current, now, new_uid))
            continue
        if kind == "Pod":
            validate_pod(m, m.obj)
        elif kind != "Node" and not (m.obj.get("metadata") or {}).get("name"):
            raise m.error("metadata.name: Required value")
        action = _one(kind, m.obj, current, now, new_uid)
        out.append(
            Applied(f"{RESOURCE_NAMES[kind]}/{m.obj['metadata']['name']} {action.verb}", [action])
        )
    return out


def _table(kind: str, current: Current) -> Mapping[str, tuple[dict[str, Any], int]]:
    tables = {"Pod": current.pods, "Node": current.nodes, "PriorityClass": current.priority_classes}
    return tables.get(kind, current.pdbs)


def _one(
    kind: str, obj: dict[str, Any], current: Current, now: str, new_uid: Callable[[], str]
) -> Action:
    desired = copy.deepcopy(obj)
    desired.setdefault("apiVersion", API_VERSIONS.get(kind, "v1"))
    meta = desired.setdefault("metadata", {})
    namespaced = kind not in CLUSTER_SCOPED
    if namespaced:
        meta["namespace"] = meta.get("namespace") or "default"
    existing = _table(kind, current).get(key_of(desired, namespaced))
    if existing is None:
        meta.setdefault("uid", new_uid())
        meta.setdefault("creationTimestamp", now)
        return Action(kind, desired, "ADDED", None, "created")
    old, seq = existing
    for name in SERVER_FIELDS:
        if name in (old.get("metadata") or {}):
            meta[name] = old["metadata"][name]
    if kind == "Pod":  # the scheduler's, kubelet's and admission's fields stay
        old_spec = old.get("spec") or {}
        if old_spec.get("nodeName"):
            desired.setdefault("spec", {})["nodeName"] = old_spec["nodeName"]
        spec = desired.setdefault("spec", {})
        for name in ADMISSION_FIELDS:
            if name in old_spec and name not in spec:
                spec[name] = old_spec[name]
        if "status" in old:
            desired["status"] = old["status"]
    if desired == old:
        return Action(kind, old, "", seq, "unchanged")
    return Action(kind, desired, "MODIFIED", seq, "configured")


def _workload(
    m: Manifest,
    pods: list[dict[str, Any]],
    current: Current,
    now: str,
    new_uid: Callable[[], str],
) -> Applied:
    actions = [_one("Pod", pod, current, now, new_uid) for pod in pods]
    wanted = {key_of(p) for p in pods}
    owner = pods[0]["metadata"]["ownerReferences"][0]["uid"] if pods else _owner_uid(m)
    for key, (old, seq) in sorted(current.pods.items()):
        refs = (old.get("metadata") or {}).get("ownerReferences") or []
        if key not in wanted and any(r.get("uid") == owner for r in refs):
            actions.append(Action("Pod", old, "DELETED", seq, "deleted"))
    verbs = {a.verb for a in actions}
    verb = (
        "unchanged"
        if verbs <= {"unchanged"}
        else "created"
        if verbs == {"created"}
        else "configured"
    )
    return Applied(f"{RESOURCE_NAMES[m.obj['kind']]}/{m.obj['metadata']['name']} {verb}", actions)


def _owner_uid(m: Manifest) -> str:
    return str(owner_reference(m.obj)["uid"])


def pod_lines(applied: Applied) -> list[str]:
    """A workload's pods under its line, so that the user sees the generated names."""
    return [
        f"  pod/{a.obj['metadata']['name']} {a.verb}"
        for a in applied.actions
        if a.kind == "Pod" and not applied.line.startswith("pod/")
    ]
