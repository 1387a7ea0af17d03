"""scheduling.k8s.io/v1alpha1 Workload (Kubernetes 1.35, KEP-4671) and a pod's
spec.workloadRef, with the API server's validation of both.

A Workload names its pod groups, each with a scheduling policy: `basic` (pods scheduled
one by one, as without a Workload) or `gang` (all-or-nothing: at least minCount pods of
the group placed together). A pod joins a group by spec.workloadRef {name, podGroup,
podGroupReplicaKey}; pods of one replica key form one gang. The GangScheduling plugin
reads them (shared/plugins/gangscheduling).

Validation follows pkg/apis/scheduling/validation (ValidateWorkload) and
pkg/apis/core/validation (the workloadRef part of ValidatePodSpec), with their messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, model_validator

from shared.api.field_checks import Errors, dicts, grammar_errors
from shared.api.models import K8sModel, ObjectMeta, Pod, require_kind
from shared.api.validation import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    duplicate,
    invalid,
    required,
    show,
)

WORKLOAD_MAX_POD_GROUPS = 8  # scheduling.WorkloadMaxPodGroups
POLICY_UNION = "must specify one of: `basic`, `gang`"
POLICY_MANY = "exactly one of `basic`, `gang` is required, but multiple fields are set"


class GangSchedulingPolicy(K8sModel):
    min_count: int = 0


class PodGroupPolicy(K8sModel):
    basic: dict[str, Any] | None = None
    gang: GangSchedulingPolicy | None = None


class WorkloadPodGroup(K8sModel):
    name: str = ""
    policy: PodGroupPolicy = Field(default_factory=PodGroupPolicy)


class TypedLocalObjectReference(K8sModel):
    api_group: str = ""
    kind: str = ""
    name: str = ""


class WorkloadSpec(K8sModel):
    controller_ref: TypedLocalObjectReference | None = None
    pod_groups: list[WorkloadPodGroup] = Field(default_factory=list)


class Workload(K8sModel):
    """scheduling.k8s.io/v1alpha1 Workload: the pod groups GangScheduling reads."""

    api_version: str = "scheduling.k8s.io/v1alpha1"
    kind: str = "Workload"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: WorkloadSpec = Field(default_factory=WorkloadSpec)

    @model_validator(mode="after")
    def _kind(self) -> Workload:
        require_kind(self.kind, "Workload")
        return self

    @property
    def key(self) -> str:
        return self.metadata.key

    def pod_group(self, name: str) -> WorkloadPodGroup | None:
        return next((g for g in self.spec.pod_groups if g.name == name), None)


# --- validation (the API server's, on create) ------------------------------------------


def workload_errors(raw: Mapping[str, Any]) -> Errors:
    """ValidateWorkload's errors for the spec (names are checked with the metadata)."""
    spec = raw.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    errs: Errors = []
    ref = spec.get("controllerRef")
    if isinstance(ref, Mapping):
        errs += _controller_ref(ref, "spec.controllerRef")
    groups = dicts(spec.get("podGroups"))
    path = "spec.podGroups"
    if not groups:
        return [*errs, required(path, "must have at least one item")]
    if len(groups) > WORKLOAD_MAX_POD_GROUPS:
        most = f"must have at most {WORKLOAD_MAX_POD_GROUPS} items"
        return [*errs, f"{path}: Too many: {len(groups)}: {most}"]
    seen: set[str] = set()
    for i, group in enumerate(groups):
        errs += _pod_group(group, f"{path}[{i}]", seen)
    return errs


def _controller_ref(ref: Mapping[str, Any], path: str) -> Errors:
    errs = grammar_errors(ref.get("apiGroup"), f"{path}.apiGroup", dns1123_subdomain_errors)
    for name in ("kind", "name"):
        if not ref.get(name):
            errs.append(required(f"{path}.{name}"))
    return errs


def _pod_group(group: Mapping[str, Any], path: str, seen: set[str]) -> Errors:
    name = group.get("name")
    errs: Errors = []
    if not name:
        errs.append(required(f"{path}.name"))
    else:
        errs += grammar_errors(name, f"{path}.name", dns1123_label_errors)
    if isinstance(name, str) and name in seen:
        errs.append(duplicate(path, dict(group)))
    elif isinstance(name, str):
        seen.add(name)
    policy = group.get("policy")
    return errs + _policy(policy if isinstance(policy, Mapping) else {}, f"{path}.policy")


def _policy(policy: Mapping[str, Any], path: str) -> Errors:
    chosen = [f"`{k}`" for k in ("basic", "gang") if policy.get(k) is not None]
    if not chosen:
        return [invalid(path, '""', POLICY_UNION)]
    if len(chosen) > 1:
        return [invalid(path, show("{" + ", ".join(chosen) + "}"), POLICY_MANY)]
    gang = policy.get("gang")
    if not isinstance(gang, Mapping):
        return []
    count, count_path = gang.get("minCount"), f"{path}.gang.minCount"
    if not count:
        return [required(count_path)]
    if isinstance(count, int) and count < 0:
        return [invalid(count_path, show(count), "must be greater than or equal to 0")]
    return []


def workload_ref_errors(ref: Any, path: str = "spec.workloadRef") -> Errors:
    """The pod's spec.workloadRef (core validation's validateWorkloadReference): a
    Workload name, a pod group name, and an optional replica key."""
    if not isinstance(ref, Mapping):
        return []
    errs: Errors = []
    for name, grammar in (("name", dns1123_subdomain_errors), ("podGroup", dns1123_label_errors)):
        if not ref.get(name):
            errs.append(required(f"{path}.{name}"))
        else:
            errs += grammar_errors(ref.get(name), f"{path}.{name}", grammar)
    key = ref.get("podGroupReplicaKey")
    return errs + grammar_errors(key, f"{path}.podGroupReplicaKey", dns1123_label_errors)


# --- gangs ----------------------------------------------------------------------------


def gang_key(namespace: str, name: str, pod_group: str, replica: str = "") -> str:
    """The gang of a pod whose workloadRef is {name, podGroup, podGroupReplicaKey}:
    "ns/workload/podGroup[/replicaKey]" (pods with equal references are one gang, kube's
    matchingWorkloadReference), "" for none. Names hold no "/", so a gang key never
    equals a PodGroup's "ns/name"."""
    if not name:
        return ""
    key = f"{namespace}/{name}/{pod_group}"
    return f"{key}/{replica}" if replica else key


def gang_of(raw_pod: Mapping[str, Any]) -> str:
    """gang_key of a raw pod."""
    meta = raw_pod.get("metadata") or {}
    ref = (raw_pod.get("spec") or {}).get("workloadRef")
    if not isinstance(ref, Mapping):
        return ""
    namespace = meta.get("namespace") or ""
    return gang_key(
        namespace,
        ref.get("name") or "",
        ref.get("podGroup") or "",
        ref.get("podGroupReplicaKey") or "",
    )


def gang_of_pod(pod: Pod) -> str:
    """gang_key of a parsed pod."""
    ref = pod.spec.workload_ref
    if ref is None:
        return ""
    return gang_key(pod.metadata.namespace, ref.name, ref.pod_group, ref.pod_group_replica_key)
