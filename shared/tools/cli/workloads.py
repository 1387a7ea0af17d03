"""Workload objects expanded into the pods their controllers would create (pure).

`ksched apply` has no controller manager behind it, so it plays the part of each
controller once, at apply time:

  Deployment   a ReplicaSet `<name>-<pod-template-hash>`, `replicas` pods
               `<replicaset>-<5 chars>` labelled with the pod-template-hash
  ReplicaSet   `replicas` pods `<name>-<5 chars>`
  ReplicationController  likewise
  StatefulSet  `replicas` pods `<name>-<ordinal>`
  Job          min(parallelism, completions) pods `<name>-<5 chars>`
  DaemonSet    one pod `<name>-<5 chars>` per current node the pod may run on
               (node selector, required node affinity, NoSchedule/NoExecute
               taints), pinned with the `matchFields metadata.name` node affinity
               and the tolerations the DaemonSet controller adds

Generated names are derived from the owner and the ordinal instead of drawn at
random, so that applying the same file twice names the same pods (kubectl's
`unchanged`) rather than creating more.

The ReplicaSets, StatefulSets and ReplicationControllers (a Deployment's ReplicaSet
included) are published too, with stable uids that their pods' ownerReferences
name: PodTopologySpread's default constraints take their selectors
(`controller_objects`). As the extensions/v1beta1 API did, a workload without
spec.selector gets its template's labels as its selector (apps/v1 requires one).
"""

from __future__ import annotations

import copy
import hashlib
import json
import uuid
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from shared.api.models import Node, Pod, describe_validation_error, validate_subdomain
from shared.api.owners import OWNER_MODELS, Deployment, name_error
from shared.api.podresources import pod_resources_errors
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.nodeaffinity import required_node_affinity_matches
from shared.plugins.tainttoleration import tolerates_hard_taints
from shared.tools.cli.manifests import WORKLOAD_KINDS, Manifest

# k8s.io/apimachinery/pkg/util/rand: no vowels, no confusable digits.
ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# The workloads whose objects ksched keeps live (shared/api/owners.py), and Deployments,
# validated like them.
SELECTING_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "ReplicationController")
POD_TEMPLATE_HASH = "pod-template-hash"
DAEMONSET_TOLERATIONS: tuple[tuple[str, str], ...] = (
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
)


def safe_encode(text: str) -> str:
    """rand.SafeEncodeString: each character mapped into the alphabet."""
    return "".join(ALPHABET[ord(c) % len(ALPHABET)] for c in text)


def fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def pod_template_hash(template: dict[str, Any]) -> str:
    """Deployment's pod-template-hash: fnv32a of the template, safe-encoded (kube hashes
    its Go printout; ours hashes canonical JSON, so the values differ)."""
    return safe_encode(str(fnv32a(json.dumps(template, sort_keys=True).encode())))


def suffix(owner: str, ordinal: int) -> str:
    """Five alphabet characters standing for kube's random suffix, stable per ordinal."""
    digest = hashlib.blake2s(f"{owner}/{ordinal}".encode(), digest_size=5).digest()
    return "".join(ALPHABET[b % len(ALPHABET)] for b in digest)


def expand(m: Manifest, nodes: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods a workload's controller would create; `nodes` are the current nodes
    (for a DaemonSet)."""
    obj = m.obj
    kind = obj.get("kind")
    name = _name(m)
    spec = obj.get("spec") or {}
    template = _template(m)
    namespace = (obj.get("metadata") or {}).get("namespace") or "default"
    owner = owner_reference(obj)
    if kind == "Deployment":
        rs = replica_set_of(obj)
        rs_name = rs["metadata"]["name"]
        count = _count(m, spec, "replicas", 1)
        return [
            _pod(
                m,
                rs["spec"]["template"],
                f"{rs_name}-{suffix(rs_name, i)}",
                namespace,
                owner_reference(rs),
            )
            for i in range(count)
        ]
    if kind in ("ReplicaSet", "ReplicationController"):
        count = _count(m, spec, "replicas", 1)
        return [
            _pod(m, template, f"{name}-{suffix(name, i)}", namespace, owner) for i in range(count)
        ]
    if kind == "StatefulSet":
        count = _count(m, spec, "replicas", 1)
        return [
            _pod(
                m,
                template,
                f"{name}-{i}",
                namespace,
                owner,
                {
                    "statefulset.kubernetes.io/pod-name": f"{name}-{i}",
                    "apps.kubernetes.io/pod-index": str(i),
                },
            )
            for i in range(count)
        ]
    if kind == "Job":
        return _job_pods(m, template, name, namespace, owner)
    if kind == "DaemonSet":
        return _daemon_pods(m, template, name, namespace, owner, nodes)
    raise m.error(f"kind: Unsupported value: {kind!r}: supported values: {list(WORKLOAD_KINDS)}")


def controller_objects(m: Manifest) -> list[dict[str, Any]]:
    """The objects published beside the workload's pods, for the scheduler to read: a
    Deployment's ReplicaSet, or the ReplicaSet, StatefulSet or ReplicationController
    itself (with its stable uid); none for a Job or a DaemonSet."""
    obj = m.obj
    kind = obj.get("kind")
    if kind == "Deployment":
        return [replica_set_of(obj)]
    if kind not in SELECTING_KINDS:
        return []
    published = copy.deepcopy(obj)
    meta = published.setdefault("metadata", {})
    meta["namespace"] = meta.get("namespace") or "default"
    meta["uid"] = owner_reference(obj)["uid"]
    return [published]


def with_default_selector(m: Manifest) -> Manifest:
    """The workload with spec.selector defaulted to its template's labels when absent
    (extensions/v1beta1's defaulting; the v1 ReplicationController's own)."""
    obj = m.obj
    spec = obj.get("spec")
    if obj.get("kind") not in SELECTING_KINDS or not isinstance(spec, dict):
        return m
    if spec.get("selector") is not None:
        return m
    labels = dict(((_template(m).get("metadata") or {}).get("labels")) or {})
    selector: Any = labels if obj["kind"] == "ReplicationController" else {"matchLabels": labels}
    return Manifest({**obj, "spec": {**spec, "selector": selector}}, m.source, m.where)


def replica_set_of(deployment: dict[str, Any]) -> dict[str, Any]:
    """The Deployment controller's ReplicaSet for the current template: named and
    labelled with the pod-template-hash, which its selector and template also carry."""
    meta = deployment.get("metadata") or {}
    spec = deployment.get("spec") or {}
    template = copy.deepcopy(spec.get("template") or {})
    hashed = pod_template_hash(spec.get("template") or {})
    name = f"{meta.get('name', '')}-{hashed}"
    namespace = meta.get("namespace") or "default"
    tmeta = template.setdefault("metadata", {})
    labels = {**(tmeta.get("labels") or {}), POD_TEMPLATE_HASH: hashed}
    tmeta["labels"] = labels
    selector = copy.deepcopy(spec.get("selector") or {})
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), POD_TEMPLATE_HASH: hashed}
    rs_meta = {
        "name": name,
        "namespace": namespace,
        "labels": dict(labels),
        "uid": _stable_uid("ReplicaSet", namespace, name),
        "ownerReferences": [owner_reference(deployment)],
    }
    rs_spec = {"replicas": spec.get("replicas", 1), "selector": selector, "template": template}
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": rs_meta, "spec": rs_spec}


def validate_owner(m: Manifest) -> None:
    """A Service, Deployment, ReplicaSet, StatefulSet or ReplicationController as the API
    server checks what ksched reads of it (name, selector, template labels), with its
    message, as the door will (shared/api/owners.py); other kinds pass."""
    kind = m.obj.get("kind")
    model = Deployment if kind == "Deployment" else OWNER_MODELS.get(str(kind))
    if model is None:
        return
    _name(m)
    try:
        obj = model.model_validate(m.obj)
    except ValidationError as err:
        raise m.error(describe_validation_error(err)) from None
    error = name_error(obj)
    if error:
        raise m.error(error)


def _name(m: Manifest) -> str:
    name = (m.obj.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise m.error("metadata.name: Required value")
    return name


def _template(m: Manifest) -> dict[str, Any]:
    template = (m.obj.get("spec") or {}).get("template")
    if not isinstance(template, dict):
        raise m.error("spec.template: Required value")
    return template


def _job_pods(
    m: Manifest, template: dict[str, Any], name: str, namespace: str, owner: dict[str, Any]
) -> list[dict[str, Any]]:
    spec = m.obj.get("spec") or {}
    count = _count(m, spec, "parallelism", 1)
    if spec.get("completions") is not None:
        count = min(count, _count(m, spec, "completions", 1))
    labels = {"batch.kubernetes.io/job-name": name, "job-name": name}
    return [
        _pod(m, template, f"{name}-{suffix(name, i)}", namespace, owner, labels)
        for i in range(count)
    ]


def _daemon_pods(
    m: Manifest,
    template: dict[str, Any],
    name: str,
    namespace: str,
    owner: dict[str, Any],
    nodes: Sequence[dict[str, Any]],
) -> list[dict[str, Any]]:
    pods = []
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        node_name = node["metadata"]["name"]
        pod = _pod(m, template, f"{name}-{suffix(name, hash_node(node_name))}", namespace, owner)
        _add_daemon_tolerations(pod)
        if not _may_run_on(m, pod, node):
            continue
        _pin_to_node(pod, node_name)
        pods.append(pod)
    return pods


def hash_node(node_name: str) -> int:
    """A stable ordinal per node, so that a node's daemon pod keeps its name."""
    return fnv32a(node_name.encode())


def _may_run_on(m: Manifest, pod: dict[str, Any], node: dict[str, Any]) -> bool:
    """The DaemonSet controller's predicates: node affinity (and selector), hard taints."""
    try:
        info = PodInfo.of(pod)
        model = Node.model_validate(node)
    except ValidationError as err:
        raise m.error(f"spec.template: {describe_validation_error(err)}") from None
    node_info = NodeInfo(model.metadata.name)
    node_info.set_node(node)
    return required_node_affinity_matches(info, node_info) and tolerates_hard_taints(
        model.spec.taints, info.pod.spec.tolerations
    )


def _add_daemon_tolerations(pod: dict[str, Any]) -> None:
    tolerations = pod["spec"].setdefault("tolerations", [])
    have = {(t.get("key"), t.get("effect")) for t in tolerations if isinstance(t, dict)}
    for key, effect in DAEMONSET_TOLERATIONS:
        if (key, effect) not in have:
            tolerations.append({"key": key, "operator": "Exists", "effect": effect})


def _pin_to_node(pod: dict[str, Any], node_name: str) -> None:
    """ReplaceDaemonSetPodNodeNameNodeAffinity: the required terms become one term
    matching the node's name; preferred terms stay."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
    affinity = pod["spec"].setdefault("affinity", {}) or {}
    pod["spec"]["affinity"] = affinity
    node_affinity = affinity.setdefault("nodeAffinity", {}) or {}
    affinity["nodeAffinity"] = node_affinity
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [term]}


def _pod(
    m: Manifest,
    template: dict[str, Any],
    name: str,
    namespace: str,
    owner: dict[str, Any],
    extra_labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    tmeta = template.get("metadata") or {}
    spec = template.get("spec")
    if not isinstance(spec, dict):
        raise m.error("spec.template.spec: Required value")
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {**(tmeta.get("labels") or {}), **(extra_labels or {})},
        "ownerReferences": [owner],
    }
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(spec)}


def owner_reference(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    kind, name = obj.get("kind", ""), meta.get("name", "")
    uid = meta.get("uid") or _stable_uid(kind, meta.get("namespace") or "default", name)
    return {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _stable_uid(kind: str, namespace: str, name: str) -> str:
    """No API server hands out a uid: a stable one per workload, as owners need one."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{kind}/{namespace}/{name}"))


def _count(m: Manifest, spec: dict[str, Any], field: str, default: int) -> int:
    value = spec.get(field, default)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise m.error(f"spec.{field}: Invalid value: {value!r}: must be a non-negative integer")
    return value


def validate_pod(m: Manifest, pod: dict[str, Any]) -> Pod:
    _check_name(m, pod)
    try:
        model = Pod.model_validate(pod)
    except ValidationError as err:
        raise m.error(describe_validation_error(err)) from None
    errors = pod_resources_errors(pod.get("spec") or {})
    if errors:
        raise m.error("; ".join(errors))
    return model


def validate_node(m: Manifest, node: dict[str, Any]) -> Node:
    _check_name(m, node)
    try:
        return Node.model_validate(node)
    except ValidationError as err:
        raise m.error(describe_validation_error(err)) from None


def _check_name(m: Manifest, obj: dict[str, Any]) -> None:
    name = (obj.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise m.error("metadata.name: Required value")
    try:
        validate_subdomain(name, "metadata.name")
    except ValueError as err:
        raise m.error(str(err)) from None
