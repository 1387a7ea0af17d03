"""scheduling.k8s.io PodGroup, v1alpha2 (Kubernetes 1.36, KEP-5832) and v1beta1 (1.37),
with the API server's validation.

A PodGroup is the runtime instance of a group of pods: a workload controller creates it
from one of its Workload's podGroupTemplates (spec.podGroupTemplateRef), copying the
template's schedulingPolicy into spec.schedulingPolicy. Pods join it by
spec.schedulingGroup.podGroupName; all the pods of one PodGroup are one gang when its
policy is `gang: {minCount}`. The GangScheduling plugin reads the policy from here, not
from the Workload.

Not scheduler-plugins' PodGroup (scheduling.x-k8s.io/v1alpha1, Coscheduling,
shared/podgroups.py): the two travel on subjects of their own,
`ksched.cluster.workloadpodgroups.<ns>.<name>` for this one and
`ksched.cluster.podgroups.<ns>.<name>` for Coscheduling's, so that objects of the same
name in the same namespace, which Kubernetes allows (two API groups), never replace
each other in the cluster stream.

v1beta1 names its template with spec.workloadRef {workloadName, templateName} instead
of podGroupTemplateRef, and adds what v1beta1's templates add (resourceClaims,
disruptionMode, priorityClassName, priority, the gated preemptionPolicy) and the gated
parentCompositePodGroupName (CompositePodGroup, off: refused). Its gang's minCount may
change on update (shared/api/immutable.py); GangScheduling reads the PodGroup as it is.

Validation follows the declarative tags on staging/src/k8s.io/api/scheduling/v1alpha2
and v1beta1 types.go (+k8s:required, +k8s:format, +k8s:unionMember, +k8s:minimum,
+k8s:maximum, +k8s:maxItems, +k8s:forbidden) with the messages the API server gives for
them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, model_validator

from shared.api.field_checks import Errors, dicts, grammar_errors
from shared.api.models import K8sModel, ObjectMeta, require_kind
from shared.api.validation import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    invalid,
    required,
)
from shared.api.workload import (
    V1ALPHA2,
    V1BETA1,
    PodGroupPolicy,
    V1beta1GroupFields,
    constraints_errors,
    forbidden_field,
    policy_errors,
    v1beta1_group_errors,
)

QUALIFIED_KIND = "PodGroup.scheduling.k8s.io"  # as the API server names it in errors
# status.conditions: the condition type, and its reasons
POD_GROUP_SCHEDULED = "PodGroupScheduled"
# v1beta1's name for it; once True it stays True (a terminal state upstream)
POD_GROUP_INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_PREEMPTED = "Preempted"


class WorkloadPodGroupTemplateReference(K8sModel):
    workload_name: str = ""
    pod_group_template_name: str = ""


class PodGroupTemplateReference(K8sModel):
    workload: WorkloadPodGroupTemplateReference | None = None


class PodGroupWorkloadReference(K8sModel):
    """v1beta1's spec.workloadRef: the Workload and template the PodGroup was made from."""

    workload_name: str = ""
    template_name: str = ""


class SchedulingPodGroupSpec(V1beta1GroupFields):
    pod_group_template_ref: PodGroupTemplateReference | None = None  # v1alpha2
    scheduling_policy: PodGroupPolicy = Field(default_factory=PodGroupPolicy)
    scheduling_constraints: dict[str, Any] | None = None
    # v1beta1: validated and carried (GangScheduling reads only the policy, as upstream)
    workload_ref: PodGroupWorkloadReference | None = None
    parent_composite_pod_group_name: str | None = None


class SchedulingPodGroup(K8sModel):
    """scheduling.k8s.io PodGroup (v1alpha2 or v1beta1): a gang's own object (1.36+)."""

    api_version: str = V1ALPHA2
    kind: str = "PodGroup"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: SchedulingPodGroupSpec = Field(default_factory=SchedulingPodGroupSpec)
    status: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _kind(self) -> SchedulingPodGroup:
        require_kind(self.kind, "PodGroup")
        return self

    @property
    def key(self) -> str:
        return self.metadata.key

    @property
    def min_count(self) -> int | None:
        """The gang's minCount, None for a `basic` group (no gang)."""
        gang = self.spec.scheduling_policy.gang
        return None if gang is None else gang.min_count


def with_scheduled_condition(
    raw: Mapping[str, Any], status: str, reason: str, message: str, now: str
) -> dict[str, Any] | None:
    """The PodGroup with its PodGroupScheduled condition (v1beta1:
    PodGroupInitiallyScheduled) set (metav1.Condition: type, status, reason, message,
    lastTransitionTime kept while the status stays), or None when nothing would change
    (no write, as for a pod's PodScheduled) or, in v1beta1, once it is True."""
    st = raw.get("status")
    st = st if isinstance(st, Mapping) else {}
    conditions = dicts(st.get("conditions"))
    old = scheduled_condition(raw)
    beta = raw.get("apiVersion") == V1BETA1
    if beta and old is not None and old.get("status") == "True":
        return None
    if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == (
        status,
        reason,
        message,
    ):
        return None
    since = old.get("lastTransitionTime") if old and old.get("status") == status else now
    cond = {
        "type": POD_GROUP_INITIALLY_SCHEDULED if beta else POD_GROUP_SCHEDULED,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    }
    others = [dict(c) for c in conditions if c is not old]
    return {**raw, "status": {**st, "conditions": [*others, cond]}}


def scheduled_condition(raw: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The PodGroup's PodGroupScheduled (v1beta1: PodGroupInitiallyScheduled) condition,
    if it has one."""
    st = raw.get("status")
    conditions = dicts(st.get("conditions")) if isinstance(st, Mapping) else []
    wanted = (
        POD_GROUP_INITIALLY_SCHEDULED if raw.get("apiVersion") == V1BETA1 else POD_GROUP_SCHEDULED
    )
    return next((c for c in conditions if c.get("type") == wanted), None)


def pod_group_errors(raw: Mapping[str, Any]) -> Errors:
    """The spec's errors (the name is checked with the metadata)."""
    spec = raw.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    if raw.get("apiVersion") == V1BETA1:
        return _v1beta1_errors(spec)
    errs: Errors = []
    ref = spec.get("podGroupTemplateRef")
    if isinstance(ref, Mapping):
        errs += _template_ref(ref, "spec.podGroupTemplateRef")
    policy = spec.get("schedulingPolicy")
    policy = policy if isinstance(policy, Mapping) else {}
    errs += policy_errors(policy, "spec.schedulingPolicy", least=1)
    return errs + constraints_errors(spec.get("schedulingConstraints"), "spec")


def _v1beta1_errors(spec: Mapping[str, Any]) -> Errors:
    """Validate_PodGroupSpec, in its fields' order."""
    errs: Errors = []
    if spec.get("parentCompositePodGroupName") is not None:
        errs.append(forbidden_field("spec.parentCompositePodGroupName"))  # CompositePodGroup
    ref = spec.get("workloadRef")
    if isinstance(ref, Mapping):
        for name, grammar in (
            ("workloadName", dns1123_subdomain_errors),
            ("templateName", dns1123_label_errors),
        ):
            field_path = f"spec.workloadRef.{name}"
            if not ref.get(name):
                errs.append(required(field_path))
            else:
                errs += grammar_errors(ref.get(name), field_path, grammar)
    policy = spec.get("schedulingPolicy")
    policy = policy if isinstance(policy, Mapping) else {}
    errs += policy_errors(policy, "spec.schedulingPolicy", least=1)
    return errs + v1beta1_group_errors(spec, "spec")


def _template_ref(ref: Mapping[str, Any], path: str) -> Errors:
    """A union whose one member is `workload`: {workloadName, podGroupTemplateName}, both
    required DNS labels."""
    workload = ref.get("workload")
    if not isinstance(workload, Mapping):
        return [invalid(path, '""', "must specify one of: `workload`")]
    errs: Errors = []
    for name in ("workloadName", "podGroupTemplateName"):
        field_path = f"{path}.workload.{name}"
        if not workload.get(name):
            errs.append(required(field_path))
        else:
            errs += grammar_errors(workload.get(name), field_path, dns1123_label_errors)
    return errs
