"""Workload objects expanded into the pods their controllers would create (pure).

`ksched apply` has no controller manager behind it, so it plays the part of each
controller once, at apply time:

  Deployment   a ReplicaSet `<name>-<pod-template-hash>`, `replicas` pods
               `<replicaset>-<5 chars>` labelled with the pod-template-hash
  ReplicaSet   `replicas` pods `<name>-<5 chars>`
  StatefulSet  `replicas` pods `<name>-<ordinal>`
  Job          min(parallelism, completions) pods `<name>-<5 chars>`
  DaemonSet    one pod `<name>-<5 chars>` per current node the pod may run on
               (node selector, required node affinity, NoSchedule/NoExecute
               taints), pinned with the `matchFields metadata.name` node affinity
               and the tolerations the DaemonSet controller adds

Generated names are derived from the owner and the ordinal instead of drawn at
random, so that applying the same file twice names the same pods (kubectl's
`unchanged`) rather than creating more.
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
from shared.api.podresources import pod_resources_errors
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins.nodeaffinity import required_node_affinity_matches
from shared.plugins.tainttoleration import tolerates_hard_taints
from shared.tools.cli.manifests import Manifest

# k8s.io/apimachinery/pkg/util/rand: no vowels, no confusable digits.
ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "Job", "DaemonSet")
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
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise m.error("metadata.name: Required value")
    spec = obj.get("spec") or {}
    template = spec.get("template")
    if not isinstance(template, dict):
        raise m.error("spec.template: Required value")
    namespace = meta.get("namespace") or "default"
    owner = owner_reference(obj)
    if kind == "Deployment":
        rs = f"{name}-{pod_template_hash(template)}"
        labels = {"pod-template-hash": rs.rsplit("-", 1)[1]}
        rs_owner = {**owner, "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs}
        count = _count(m, spec, "replicas", 1)
        return [
            _pod(m, template, f"{rs}-{suffix(rs, i)}", namespace, rs_owner, labels)
            for i in range(count)
        ]
    if kind == "ReplicaSet":
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
    # No API server hands out a uid: a stable one per workload, as owners need one.
    uid = meta.get("uid") or str(
        uuid.uuid5(uuid.NAMESPACE_URL, f"{kind}/{meta.get('namespace') or 'default'}/{name}")
    )
    return {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


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
