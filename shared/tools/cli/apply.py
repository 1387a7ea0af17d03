"""What `ksched apply` publishes (pure): manifests and the current cluster in, one
action per object out, with kubectl's verbs (created, configured, unchanged, deleted).

Like the API server on create, apply fills in metadata.uid, creationTimestamp and the
namespace; on an update it keeps what the cluster owns (uid, creationTimestamp,
spec.nodeName, status), so re-applying a bound pod does not unbind it. Pods a
re-applied workload no longer wants (scaled down, replaced template, vanished node)
are deleted, as its controller would, and so is a Deployment's ReplicaSet of an older
template (ksched keeps no revision history).

Objects of kinds ksched does not schedule by (ConfigMaps, Secrets, RBAC, PVCs, ...)
are skipped with one warning each, as a line of their own: the rest of the file is
applied.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.api.field_validation import check_object
from shared.api.models import PriorityClass, object_key
from shared.api.priority import PriorityClasses, Refused
from shared.subjects import (
    node_subject,
    pdb_subject,
    pod_subject,
    priority_class_subject,
    replica_set_subject,
    replication_controller_subject,
    service_subject,
    stateful_set_subject,
    workload_subject,
)
from shared.tools.cli.manifests import Manifest, ManifestError
from shared.tools.cli.workloads import (
    WORKLOAD_KINDS,
    controller_objects,
    expand,
    owner_reference,
    validate_node,
    validate_owner,
    validate_pod,
    with_default_selector,
)

# kubectl's resource.group names in `kind/name created`
RESOURCE_NAMES = {
    "Pod": "pod",
    "Node": "node",
    "PodDisruptionBudget": "poddisruptionbudget.policy",
    "PriorityClass": "priorityclass.scheduling.k8s.io",
    "Service": "service",
    "ReplicationController": "replicationcontroller",
    "Deployment": "deployment.apps",
    "ReplicaSet": "replicaset.apps",
    "StatefulSet": "statefulset.apps",
    "DaemonSet": "daemonset.apps",
    "Job": "job.batch",
    "Workload": "workload.scheduling.k8s.io",
}
SUPPORTED_KINDS = (
    "Pod",
    "Node",
    "PodDisruptionBudget",
    "PriorityClass",
    "Service",
    "Workload",  # scheduling.k8s.io/v1alpha1, the GangScheduling plugin's
    *WORKLOAD_KINDS,
)
CLUSTER_SCOPED = ("Node", "PriorityClass")
API_VERSIONS = {
    "PodDisruptionBudget": "policy/v1",
    "PriorityClass": "scheduling.k8s.io/v1",
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "Workload": "scheduling.k8s.io/v1alpha1",
}
_NAMESPACED_SUBJECTS = {
    "Pod": pod_subject,
    "PodDisruptionBudget": pdb_subject,
    "Service": service_subject,
    "ReplicaSet": replica_set_subject,
    "StatefulSet": stateful_set_subject,
    "ReplicationController": replication_controller_subject,
    "Workload": workload_subject,
}
SERVER_FIELDS = ("uid", "creationTimestamp", "resourceVersion", "generation")
# What Priority admission sets on a pod that did not state it (shared/api/priority.py)
ADMISSION_FIELDS = ("priority", "priorityClassName", "preemptionPolicy")


Table = Mapping[str, tuple[dict[str, Any], int]]  # key -> (object, stream sequence)


@dataclass(frozen=True)
class Current:
    """The cluster as apply sees it: objects and their stream sequences."""

    pods: Table = field(default_factory=dict)  # ns/name
    nodes: Table = field(default_factory=dict)
    pdbs: Table = field(default_factory=dict)
    priority_classes: Table = field(default_factory=dict)
    services: Table = field(default_factory=dict)
    replica_sets: Table = field(default_factory=dict)
    stateful_sets: Table = field(default_factory=dict)
    replication_controllers: Table = field(default_factory=dict)
    workloads: Table = field(default_factory=dict)

    def table(self, kind: str) -> Table:
        return {
            "Pod": self.pods,
            "Node": self.nodes,
            "PodDisruptionBudget": self.pdbs,
            "PriorityClass": self.priority_classes,
            "Service": self.services,
            "ReplicaSet": self.replica_sets,
            "StatefulSet": self.stateful_sets,
            "ReplicationController": self.replication_controllers,
            "Workload": self.workloads,
        }[kind]


@dataclass(frozen=True)
class Action:
    kind: str  # Pod, Node, PodDisruptionBudget, Service, ReplicaSet, ...
    obj: dict[str, Any]
    etype: str  # ADDED, MODIFIED, DELETED; "" publishes nothing (unchanged)
    expected_seq: int | None  # publish only if the subject is still at this sequence
    verb: str

    @property
    def subject(self) -> str:
        return subject_of(self.kind, self.obj)


@dataclass
class Applied:
    """One line of output and the actions behind it; a warning goes to stderr."""

    line: str
    actions: list[Action]
    warning: bool = False


def subject_of(kind: str, obj: dict[str, Any]) -> str:
    """The public subject an object of `kind` is published on."""
    meta = obj["metadata"]
    if kind == "Node":
        return node_subject(meta["name"])
    if kind == "PriorityClass":
        return priority_class_subject(meta["name"])
    return _NAMESPACED_SUBJECTS[kind](meta.get("namespace") or "default", meta["name"])


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
    admission = _priority_classes(manifests, current)
    out = []
    for m in manifests:
        kind = m.obj.get("kind")
        if not isinstance(kind, str) or not kind:
            raise m.error("kind: Required value")
        if kind not in SUPPORTED_KINDS:
            out.append(_skipped(m.obj))
            continue
        refused = check_object(m.obj)  # kubectl's strict validation, the API's checks
        if refused:
            raise ManifestError(refused.kubectl_error(m.source))
        if kind in WORKLOAD_KINDS:
            out += _unmodelled(m.obj)
            m = with_default_selector(m)
            validate_owner(m)
            pods = expand(m, list(nodes.values()))
            for pod in pods:
                validate_pod(m, pod)
            out.append(_workload(m, pods, current, now, new_uid))
            continue
        if kind == "Pod":
            validate_pod(m, m.obj)
            _admit(m, admission)
        elif kind != "Node" and not (m.obj.get("metadata") or {}).get("name"):
            raise m.error("metadata.name: Required value")
        elif kind == "Service":
            validate_owner(m)
        action = _one(kind, m.obj, current, now, new_uid)
        out.append(
            Applied(f"{RESOURCE_NAMES[kind]}/{m.obj['metadata']['name']} {action.verb}", [action])
        )
    return out


def _priority_classes(manifests: Sequence[Manifest], current: Current) -> PriorityClasses:
    """The classes Priority admission knows when these manifests' pods are created: the
    cluster's and those applied before them in the same run."""
    classes = PriorityClasses()
    raws = [obj for obj, _ in current.priority_classes.values()]
    raws += [m.obj for m in manifests if m.obj.get("kind") == "PriorityClass"]
    for raw in raws:
        try:
            classes.upsert(PriorityClass.model_validate(raw))
        except ValueError:
            continue  # refused on its own (its document fails validation)
    return classes


def _admit(m: Manifest, admission: PriorityClasses) -> None:
    """Priority admission as the API server applies it to a kubectl client's pod: a
    priority stated without a class is refused unless it is the computed one."""
    try:
        admission.admit(m.obj, strict=True)
    except Refused as err:
        raise ManifestError(
            f'Error from server (Forbidden): error when creating "{m.source}": {err}'
        ) from None


# What apply reads of a workload's spec, as its controller would (workloads.py).
_MODELLED_SPEC = {
    "Deployment": ("replicas", "selector", "template"),
    "ReplicaSet": ("replicas", "selector", "template"),
    "ReplicationController": ("replicas", "selector", "template"),
    "StatefulSet": ("replicas", "selector", "template", "serviceName"),
    "DaemonSet": ("selector", "template"),
    "Job": ("parallelism", "completions", "selector", "template"),
}


def _unmodelled(obj: dict[str, Any]) -> list[Applied]:
    """One warning line naming what of a workload's spec ksched does not model (volume
    claims, rollout and ordering policies...): those fields are ignored, not refused."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    ignored = [f"spec.{k}" for k in spec if k not in _MODELLED_SPEC.get(obj["kind"], spec)]
    if not ignored:
        return []
    meta = obj.get("metadata") or {}
    name = f"{RESOURCE_NAMES[obj['kind']]}/{meta.get('name') or meta.get('generateName') or ''}"
    line = f"Warning: {name}: ksched does not model {', '.join(ignored)} (ignored)"
    return [Applied(line, [], warning=True)]


def _skipped(obj: dict[str, Any]) -> Applied:
    """kubectl-like: one warning line for an object of a kind ksched does not schedule by."""
    kind = obj["kind"]
    meta = obj.get("metadata") or {}
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    resource = kind.lower() + (f".{group}" if group else "")
    name = meta.get("name") or meta.get("generateName") or ""
    line = f"Warning: {resource}/{name} skipped: ksched does not schedule {kind}"
    return Applied(line, [], warning=True)


def _one(
    kind: str, obj: dict[str, Any], current: Current, now: str, new_uid: Callable[[], str]
) -> Action:
    desired = copy.deepcopy(obj)
    desired.setdefault("apiVersion", API_VERSIONS.get(kind, "v1"))
    meta = desired.setdefault("metadata", {})
    namespaced = kind not in CLUSTER_SCOPED
    if namespaced:
        meta["namespace"] = meta.get("namespace") or "default"
    existing = current.table(kind).get(key_of(desired, namespaced))
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
    """The workload's objects (its ReplicaSet, StatefulSet, ...) and pods, and the
    deletion of what it owned and no longer wants."""
    owned = controller_objects(m)
    actions = [_one(o["kind"], o, current, now, new_uid) for o in owned]
    actions += [_one("Pod", pod, current, now, new_uid) for pod in pods]
    owner = _owner_uid(m)
    # A Deployment owns ReplicaSets, which own its pods: the ReplicaSets of older
    # templates go, and so do their pods.
    wanted_sets = {key_of(o) for o in owned if o["kind"] == "ReplicaSet"}
    owners = {owner, *(o["metadata"]["uid"] for o in owned)}
    for key, (old, seq) in sorted(current.replica_sets.items()):
        if owner not in _owner_uids(old):
            continue
        if uid := (old.get("metadata") or {}).get("uid"):
            owners.add(uid)
        if key not in wanted_sets:
            actions.append(Action("ReplicaSet", old, "DELETED", seq, "deleted"))
    wanted = {key_of(p) for p in pods}
    for key, (old, seq) in sorted(current.pods.items()):
        if key not in wanted and owners & _owner_uids(old):
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


def _owner_uids(obj: dict[str, Any]) -> set[str]:
    """The uids of the object's owners (a reference without one names nobody)."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return {r["uid"] for r in refs if isinstance(r, dict) and r.get("uid")}


def _owner_uid(m: Manifest) -> str:
    return str(owner_reference(m.obj)["uid"])


def pod_lines(applied: Applied) -> list[str]:
    """A workload's pods under its line, so that the user sees the generated names."""
    return [
        f"  pod/{a.obj['metadata']['name']} {a.verb}"
        for a in applied.actions
        if a.kind == "Pod" and not applied.line.startswith("pod/")
    ]
