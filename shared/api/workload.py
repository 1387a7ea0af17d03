"""scheduling.k8s.io Workload, v1alpha1 (Kubernetes 1.35, KEP-4671), v1alpha2 (1.36,
KEP-5832) and v1beta1 (1.37), and a pod's spec.workloadRef, with the API server's
validation of each.

v1alpha1 holds the pod groups inline (spec.podGroups[{name, policy}]) and pods point at
them with spec.workloadRef. v1alpha2 holds templates (spec.podGroupTemplates[{name,
schedulingPolicy, schedulingConstraints}]) from which a workload controller creates
PodGroup objects (shared/api/podgroup.py); pods point at those with spec.schedulingGroup.
v1beta1 keeps v1alpha2's shape and adds to each template resourceClaims, disruptionMode,
priorityClassName, priority and (behind a feature gate) preemptionPolicy; its topology
constraint is `topology: [{key}]`. All versions travel on the Workload's one subject,
told apart by apiVersion.

A Workload names its pod groups, each with a scheduling policy: `basic` (pods scheduled
one by one, as without a Workload) or `gang` (all-or-nothing: at least minCount pods of
the group placed together). A pod joins a group by spec.workloadRef {name, podGroup,
podGroupReplicaKey}; pods of one replica key form one gang. The GangScheduling plugin
reads them (shared/plugins/gangscheduling).

Validation follows pkg/apis/scheduling/validation (ValidateWorkload) and
pkg/apis/core/validation (the workloadRef part of ValidatePodSpec), with their messages;
v1beta1's follows the declarative tags of staging/src/k8s.io/api/scheduling/v1beta1
(validation-gen's code) with the feature gates at their defaults: CompositePodGroup and
PodGroupPreemptionPolicy off (their fields refused as "Forbidden"), and
TopologyAwareWorkloadScheduling treated as on, as for v1alpha2 (its constraints are
validated and carried, not acted on).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator, model_validator

from shared.api.field_checks import Errors, dicts, grammar_errors, label_name_errors
from shared.api.models import K8sModel, ObjectMeta, Pod, require_kind
from shared.api.validation import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    duplicate,
    int32,
    invalid,
    required,
    show,
)

WORKLOAD_MAX_POD_GROUPS = 8  # scheduling.WorkloadMaxPodGroups (v1alpha2: ...PodGroupTemplates)
V1ALPHA1 = "scheduling.k8s.io/v1alpha1"
V1ALPHA2 = "scheduling.k8s.io/v1alpha2"
V1BETA1 = "scheduling.k8s.io/v1beta1"
MAX_POD_GROUP_RESOURCE_CLAIMS = 4  # v1beta1 MaxPodGroupResourceClaims
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000  # the +k8s:maximum of `priority`


def int32_or_none(value: Any) -> Any:
    """An optional Go int32 field: null stays null, anything else decodes as Go would."""
    return None if value is None else int32(value)


class GangSchedulingPolicy(K8sModel):
    min_count: int = 0

    @field_validator("min_count", mode="before")
    @classmethod
    def _int32(cls, value: Any) -> Any:
        return int32_or_none(value)  # an int32 in the API; null is refused as before


class PodGroupPolicy(K8sModel):
    basic: dict[str, Any] | None = None
    gang: GangSchedulingPolicy | None = None


class WorkloadPodGroup(K8sModel):
    name: str = ""
    policy: PodGroupPolicy = Field(default_factory=PodGroupPolicy)


class V1beta1GroupFields(K8sModel):
    """What v1beta1 adds to a pod group template and to a PodGroup's spec. ksched
    validates and carries them; GangScheduling reads only the policy, as upstream's
    plugin does."""

    resource_claims: list[dict[str, Any]] = Field(default_factory=list)
    disruption_mode: dict[str, Any] | None = None
    priority_class_name: str = ""
    priority: int | None = None
    preemption_policy: str | None = None

    @field_validator("priority", mode="before")
    @classmethod
    def _int32(cls, value: Any) -> Any:
        return int32_or_none(value)


class PodGroupTemplate(V1beta1GroupFields):
    """v1alpha2 and v1beta1: a template the workload controller makes PodGroup objects
    from."""

    name: str = ""
    scheduling_policy: PodGroupPolicy = Field(default_factory=PodGroupPolicy)
    scheduling_constraints: dict[str, Any] | None = None


class TypedLocalObjectReference(K8sModel):
    api_group: str = ""
    kind: str = ""
    name: str = ""


class WorkloadSpec(K8sModel):
    controller_ref: TypedLocalObjectReference | None = None
    pod_groups: list[WorkloadPodGroup] = Field(default_factory=list)  # v1alpha1
    pod_group_templates: list[PodGroupTemplate] = Field(default_factory=list)  # v1alpha2+
    # v1beta1, behind the CompositePodGroup gate (off): refused when set, never read
    composite_pod_group_templates: list[dict[str, Any]] = Field(default_factory=list)


class Workload(K8sModel):
    """scheduling.k8s.io Workload (v1alpha1, v1alpha2 or v1beta1): the pod groups, or pod
    group templates, GangScheduling reads."""

    api_version: str = V1ALPHA1
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

    def policy(self, name: str) -> PodGroupPolicy | None:
        """The scheduling policy of the pod group (v1alpha1) or pod group template
        (v1alpha2, v1beta1) of that name; None when it has none of that name."""
        group = next((g for g in self.spec.pod_groups if g.name == name), None)
        if group is not None:
            return group.policy
        template = next((t for t in self.spec.pod_group_templates if t.name == name), None)
        return None if template is None else template.scheduling_policy


# --- validation (the API server's, on create) ------------------------------------------


def workload_errors(raw: Mapping[str, Any]) -> Errors:
    """ValidateWorkload's errors for the spec (names are checked with the metadata), by
    the object's apiVersion: v1alpha1's podGroups, v1alpha2's and v1beta1's
    podGroupTemplates."""
    spec = raw.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    if raw.get("apiVersion") == V1BETA1:
        return _v1beta1_workload_errors(spec)
    errs: Errors = []
    ref = spec.get("controllerRef")
    if isinstance(ref, Mapping):
        errs += _controller_ref(ref, "spec.controllerRef")
    v2 = raw.get("apiVersion") == V1ALPHA2
    path = "spec.podGroupTemplates" if v2 else "spec.podGroups"
    groups = dicts(spec.get("podGroupTemplates" if v2 else "podGroups"))
    if not groups:
        return [*errs, required(path, "must have at least one item")]
    if len(groups) > WORKLOAD_MAX_POD_GROUPS:
        return [*errs, too_many(path, len(groups), WORKLOAD_MAX_POD_GROUPS)]
    seen: set[str] = set()
    for i, group in enumerate(groups):
        errs += _pod_group(group, f"{path}[{i}]", seen, v2)
    return errs


def too_many(path: str, count: int, most: int) -> str:
    """field.TooMany(path, count, most).Error()."""
    return f"{path}: Too many: {count}: must have at most {most} item{'s' if most != 1 else ''}"


def _controller_ref(ref: Mapping[str, Any], path: str) -> Errors:
    errs = grammar_errors(ref.get("apiGroup"), f"{path}.apiGroup", dns1123_subdomain_errors)
    for name in ("kind", "name"):
        if not ref.get(name):
            errs.append(required(f"{path}.{name}"))
    return errs


def _pod_group(
    group: Mapping[str, Any], path: str, seen: set[str], v2: bool, v1beta1: bool = False
) -> Errors:
    """A v1alpha1 pod group, or (v2) a v1alpha2 or (v1beta1) v1beta1 pod group template."""
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
    if not v2:
        policy = group.get("policy")
        return errs + policy_errors(policy if isinstance(policy, Mapping) else {}, f"{path}.policy")
    policy = group.get("schedulingPolicy")
    policy = policy if isinstance(policy, Mapping) else {}
    errs += policy_errors(policy, f"{path}.schedulingPolicy", least=1)
    if v1beta1:
        return errs + v1beta1_group_errors(group, path)
    return errs + constraints_errors(group.get("schedulingConstraints"), path)


def policy_errors(policy: Mapping[str, Any], path: str, least: int = 0) -> Errors:
    """A PodGroupPolicy (v1alpha1) or PodGroupSchedulingPolicy (v1alpha2+): exactly one
    of basic and gang; gang.minCount set and at least `least` (v1alpha1 allows any
    non-negative count, v1alpha2's declarative +k8s:minimum=1)."""
    union = union_errors(path, {k: policy.get(k) is not None for k in ("basic", "gang")})
    if union:
        return union
    gang = policy.get("gang")
    if not isinstance(gang, Mapping):
        return []
    count, count_path = gang.get("minCount"), f"{path}.gang.minCount"
    if not count:
        return [required(count_path)]
    if isinstance(count, int) and count < least:
        return [invalid(count_path, show(count), f"must be greater than or equal to {least}")]
    return []


def constraints_errors(constraints: Any, path: str) -> Errors:
    """v1alpha2's optional schedulingConstraints (TopologyAwareWorkloadScheduling):
    topologyConstraints required, at most one, each with a label-key topologyKey."""
    if not isinstance(constraints, Mapping):
        return []
    path = f"{path}.schedulingConstraints.topologyConstraints"
    items = dicts(constraints.get("topologyConstraints"))
    if not items:
        return [required(path)]
    if len(items) > 1:
        return [too_many(path, len(items), 1)]
    key = items[0].get("topologyKey")
    if not key:
        return [required(f"{path}[0].topologyKey")]
    return label_name_errors(key, f"{path}[0].topologyKey") if isinstance(key, str) else []


# --- v1beta1 (1.37) ------------------------------------------------------------------


def _v1beta1_workload_errors(spec: Mapping[str, Any]) -> Errors:
    """Validate_WorkloadSpec: exactly one of podGroupTemplates and
    compositePodGroupTemplates (the second forbidden while its gate is off), at most 8
    templates with unique names, each a valid template."""
    templates = dicts(spec.get("podGroupTemplates"))
    composite = spec.get("compositePodGroupTemplates")
    has_composite = isinstance(composite, list) and bool(composite)
    errs = union_errors(
        "spec",
        {"podGroupTemplates": bool(templates), "compositePodGroupTemplates": has_composite},
    )
    ref = spec.get("controllerRef")
    if isinstance(ref, Mapping):
        errs += _controller_ref(ref, "spec.controllerRef")
    path = "spec.podGroupTemplates"
    if len(templates) > WORKLOAD_MAX_POD_GROUPS:
        errs.append(too_many(path, len(templates), WORKLOAD_MAX_POD_GROUPS))
    else:
        seen: set[str] = set()
        for i, item in enumerate(templates):
            errs += _pod_group(item, f"{path}[{i}]", seen, v2=True, v1beta1=True)
    if has_composite:
        errs.append(forbidden_field("spec.compositePodGroupTemplates"))  # CompositePodGroup
    return errs


def union_errors(path: str, members: Mapping[str, bool]) -> Errors:
    """validate.Union: exactly one of the members (JSON names, in the type's order) set."""
    chosen = [f"`{name}`" for name, present in members.items() if present]
    names = ", ".join(f"`{name}`" for name in members)
    if not chosen:
        return [invalid(path, '""', f"must specify one of: {names}")]
    if len(chosen) > 1:
        shown = show("{" + ", ".join(chosen) + "}")
        many = f"exactly one of {names} is required, but multiple fields are set"
        return [invalid(path, shown, many)]
    return []


def forbidden_field(path: str) -> str:
    """field.Forbidden(path, "").Error(): a field a feature gate that is off refuses."""
    return f"{path}: Forbidden"


def v1beta1_group_errors(group: Mapping[str, Any], path: str) -> Errors:
    """What v1beta1 adds to a pod group template and a PodGroup's spec: the topology
    constraint's v1beta1 shape, resourceClaims, disruptionMode, priorityClassName,
    priority and the gated preemptionPolicy. `path` is the template's or "spec"."""
    errs = topology_errors(group.get("schedulingConstraints"), f"{path}.schedulingConstraints")
    errs += resource_claims_errors(group.get("resourceClaims"), f"{path}.resourceClaims")
    mode = group.get("disruptionMode")
    if isinstance(mode, Mapping):
        present = {k: mode.get(k) is not None for k in ("single", "all")}
        errs += union_errors(f"{path}.disruptionMode", present)
    name = group.get("priorityClassName")
    errs += grammar_errors(name, f"{path}.priorityClassName", dns1123_subdomain_errors)
    priority = group.get("priority")
    if isinstance(priority, int) and priority > HIGHEST_USER_DEFINABLE_PRIORITY:
        errs.append(
            invalid(
                f"{path}.priority",
                show(priority),
                f"must be less than or equal to {HIGHEST_USER_DEFINABLE_PRIORITY}",
            )
        )
    if group.get("preemptionPolicy") is not None:
        errs.append(forbidden_field(f"{path}.preemptionPolicy"))  # PodGroupPreemptionPolicy
    return errs


def topology_errors(constraints: Any, path: str) -> Errors:
    """v1beta1's PodGroupSchedulingConstraints: an optional `topology` of at most one
    {key}, the key required and a label key."""
    if not isinstance(constraints, Mapping):
        return []
    path = f"{path}.topology"
    items = dicts(constraints.get("topology"))
    if len(items) > 1:
        return [too_many(path, len(items), 1)]
    errs: Errors = []
    for i, item in enumerate(items):
        key = item.get("key")
        if not key:
            errs.append(required(f"{path}[{i}].key"))
        elif isinstance(key, str):
            errs += label_name_errors(key, f"{path}[{i}].key")
    return errs


def resource_claims_errors(claims: Any, path: str) -> Errors:
    """PodGroupResourceClaim list: at most 4, names unique; each a DNS-label name and
    exactly one of resourceClaimName and resourceClaimTemplateName (DNS subdomains)."""
    items = dicts(claims)
    if len(items) > MAX_POD_GROUP_RESOURCE_CLAIMS:
        return [too_many(path, len(items), MAX_POD_GROUP_RESOURCE_CLAIMS)]
    errs: Errors = []
    seen: set[str] = set()
    for i, claim in enumerate(items):
        at = f"{path}[{i}]"
        name = claim.get("name")
        if isinstance(name, str) and name and name in seen:
            errs.append(duplicate(at, dict(claim)))
        elif isinstance(name, str):
            seen.add(name)
        members = ("resourceClaimName", "resourceClaimTemplateName")
        errs += union_errors(at, {m: claim.get(m) is not None for m in members})
        if not name:
            errs.append(required(f"{at}.name"))
        else:
            errs += grammar_errors(name, f"{at}.name", dns1123_label_errors)
        for member in members:
            errs += grammar_errors(claim.get(member), f"{at}.{member}", dns1123_subdomain_errors)
    return errs


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


def group_gang_key(namespace: str, pod_group_name: str) -> str:
    """The gang of a pod whose spec.schedulingGroup names a v1alpha2 PodGroup object:
    "ns/PodGroup:name". ":" and capitals are in no DNS name, so it never equals a
    workloadRef gang's key nor a scheduler-plugins PodGroup's "ns/name"."""
    return f"{namespace}/PodGroup:{pod_group_name}" if pod_group_name else ""


def scheduling_group_of(raw_pod: Mapping[str, Any]) -> str:
    """The name of the v1alpha2 PodGroup the raw pod's spec.schedulingGroup names, or ""."""
    group = (raw_pod.get("spec") or {}).get("schedulingGroup")
    if not isinstance(group, Mapping):
        return ""
    name = group.get("podGroupName")
    return name if isinstance(name, str) else ""


def gang_of(raw_pod: Mapping[str, Any]) -> str:
    """gang_key of a raw pod: its schedulingGroup's PodGroup when it names one (1.36's
    field, which replaces workloadRef upstream), else its workloadRef's pod group."""
    meta = raw_pod.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    group = scheduling_group_of(raw_pod)
    if group:
        return group_gang_key(namespace, group)
    ref = (raw_pod.get("spec") or {}).get("workloadRef")
    if not isinstance(ref, Mapping):
        return ""
    return gang_key(
        namespace,
        ref.get("name") or "",
        ref.get("podGroup") or "",
        ref.get("podGroupReplicaKey") or "",
    )


def gang_of_pod(pod: Pod) -> str:
    """gang_key of a parsed pod (as gang_of)."""
    group = pod.spec.scheduling_group
    if group is not None and group.pod_group_name:
        return group_gang_key(pod.metadata.namespace, group.pod_group_name)
    ref = pod.spec.workload_ref
    if ref is None:
        return ""
    return gang_key(pod.metadata.namespace, ref.name, ref.pod_group, ref.pod_group_replica_key)


def scheduling_group_errors(group: Any, path: str = "spec.schedulingGroup") -> Errors:
    """The pod's spec.schedulingGroup (1.36): podGroupName, the one member of its union,
    set and a DNS subdomain (the PodGroup object's name)."""
    if not isinstance(group, Mapping):
        return []
    name = group.get("podGroupName")
    if not name:
        return [invalid(path, '""', "must specify one of: `podGroupName`")]
    return grammar_errors(name, f"{path}.podGroupName", dns1123_subdomain_errors)
