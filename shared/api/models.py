"""core/v1 Pod and Node, as far as the scheduler reads them.

Accepts real Kubernetes JSON/YAML: camelCase names, unknown fields ignored.
Applies the API server's defaulting that the scheduler relies on. Validation
errors name the field (see `describe_validation_error`).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

# re-exported: callers have always found the object keys here
from shared.api.names import DEFAULT_NAMESPACE, object_key
from shared.api.names import key_of as key_of
from shared.api.names import namespace_and_name as namespace_and_name
from shared.api.quantity import QuantityError, parse_nonnegative
from shared.api.validation import int32, is_dns1123_label, is_dns1123_subdomain

DEFAULT_SCHEDULER_NAME = "default-scheduler"


def _quantity(value: Any) -> Fraction:
    try:
        return parse_nonnegative(value, field="quantity")
    except QuantityError as err:
        # pydantic prefixes the location; keep only the reason.
        raise ValueError(str(err).split(": ", 1)[-1]) from None


Quantity = Annotated[Fraction, BeforeValidator(_quantity)]
ResourceList = dict[str, Quantity]


# Names are checked where objects enter ksched (shared.api.events), as the API
# server does on create; internal paths and test vectors carry names as given.
def validate_subdomain(name: str, what: str) -> str:
    if not is_dns1123_subdomain(name):
        raise ValueError(
            f"invalid {what} {name!r}: must be a DNS-1123 subdomain (lowercase alphanumerics, "
            "'-' or '.', starting and ending with an alphanumeric, at most 253 characters)"
        )
    return name


def validate_label(name: str, what: str) -> str:
    if not is_dns1123_label(name):
        raise ValueError(
            f"invalid {what} {name!r}: must be a DNS-1123 label (lowercase alphanumerics or "
            "'-', starting and ending with an alphanumeric, at most 63 characters)"
        )
    return name


class K8sModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        arbitrary_types_allowed=True,
    )


class ObjectMeta(K8sModel):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None

    @field_validator("labels", "annotations", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return {} if value is None else value

    @property
    def key(self) -> str:
        """namespace/name, how namespaced objects are named across ksched."""
        return object_key(self.namespace, self.name)

    def defaulted(self) -> None:
        """A namespaced object without a namespace is in the default one."""
        self.namespace = self.namespace or DEFAULT_NAMESPACE


def require_kind(kind: str, expected: str) -> None:
    if kind != expected:
        raise ValueError(f"kind must be {expected}, got {kind!r}")


# --- selectors and affinity ---------------------------------------------------


# Enumerations, each listed in the order the API server's messages list them
# (shared/api/pod_validation.py refuses other values with those messages).
LabelSelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
NodeSelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
TolerationOperator = Literal["Equal", "Exists"]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
UnsatisfiableConstraintAction = Literal["DoNotSchedule", "ScheduleAnyway"]
NodeInclusionPolicy = Literal["Honor", "Ignore"]
Protocol = Literal["SCTP", "TCP", "UDP"]
PreemptionPolicy = Literal["PreemptLowerPriority", "Never"]


class LabelSelectorRequirement(K8sModel):
    key: str
    operator: LabelSelectorOperator
    values: list[str] = Field(default_factory=list)


class LabelSelector(K8sModel):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)


class NodeSelectorRequirement(K8sModel):
    key: str
    operator: NodeSelectorOperator
    values: list[str] = Field(default_factory=list)


class NodeSelectorTerm(K8sModel):
    match_expressions: list[NodeSelectorRequirement] = Field(default_factory=list)
    match_fields: list[NodeSelectorRequirement] = Field(default_factory=list)


class NodeSelector(K8sModel):
    node_selector_terms: list[NodeSelectorTerm] = Field(default_factory=list)


class PreferredSchedulingTerm(K8sModel):
    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(K8sModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = Field(
        default_factory=list
    )


class PodAffinityTerm(K8sModel):
    label_selector: LabelSelector | None = None
    namespaces: list[str] = Field(default_factory=list)
    topology_key: str = ""
    namespace_selector: LabelSelector | None = None
    match_label_keys: list[str] = Field(default_factory=list)
    mismatch_label_keys: list[str] = Field(default_factory=list)


class WeightedPodAffinityTerm(K8sModel):
    weight: int
    pod_affinity_term: PodAffinityTerm


class PodAffinity(K8sModel):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = Field(
        default_factory=list
    )
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = Field(
        default_factory=list
    )


class Affinity(K8sModel):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class Toleration(K8sModel):
    key: str = ""
    operator: TolerationOperator = "Equal"
    value: str = ""
    effect: TaintEffect | Literal[""] = ""  # empty: every effect
    toleration_seconds: int | None = None


class TopologySpreadConstraint(K8sModel):
    # Ranges (maxSkew, minDomains) are checked at the door: shared/api/scheduling_validation.py
    max_skew: int
    topology_key: str
    when_unsatisfiable: UnsatisfiableConstraintAction
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: NodeInclusionPolicy | None = None
    node_taints_policy: NodeInclusionPolicy | None = None
    match_label_keys: list[str] = Field(default_factory=list)


# --- pods ---------------------------------------------------------------------


class ResourceRequirements(K8sModel):
    requests: ResourceList = Field(default_factory=dict)
    limits: ResourceList = Field(default_factory=dict)

    @model_validator(mode="after")
    def _requests_default_to_limits(self) -> ResourceRequirements:
        # API-server defaulting: a limit without a request sets the request.
        for name, amount in self.limits.items():
            self.requests.setdefault(name, amount)
        return self


class ContainerPort(K8sModel):
    # Port ranges are checked at the door: shared/api/pod_validation.py
    container_port: int = 0
    host_port: int = 0
    protocol: Protocol = "TCP"
    host_ip: str = Field(default="", alias="hostIP")


class Container(K8sModel):
    name: str = ""
    image: str = ""
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    ports: list[ContainerPort] = Field(default_factory=list)
    restart_policy: str | None = None


class PodSchedulingGate(K8sModel):
    name: str


class WorkloadReference(K8sModel):
    """core/v1 WorkloadReference (1.35, gate GenericWorkload): the pod's Workload, the
    PodGroup of it the pod is in, and which replica of that group."""

    name: str = ""
    pod_group: str = ""
    pod_group_replica_key: str = ""


class PodSchedulingGroup(K8sModel):
    """core/v1 PodSchedulingGroup (1.36, gate GenericWorkload): the scheduling.k8s.io/
    v1alpha2 PodGroup object the pod is in."""

    pod_group_name: str = ""


class PodSpec(K8sModel):
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    node_name: str = ""
    priority: int = 0
    priority_class_name: str = ""
    preemption_policy: PreemptionPolicy = "PreemptLowerPriority"
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] = Field(default_factory=list)
    overhead: ResourceList = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: list[Toleration] = Field(default_factory=list)
    topology_spread_constraints: list[TopologySpreadConstraint] = Field(default_factory=list)
    scheduling_gates: list[PodSchedulingGate] = Field(default_factory=list)
    workload_ref: WorkloadReference | None = None
    scheduling_group: PodSchedulingGroup | None = None

    @field_validator("scheduler_name", "node_name", "priority_class_name", mode="before")
    @classmethod
    def _null_string(cls, value: Any) -> Any:
        return "" if value is None else value

    @field_validator("scheduler_name", mode="after")
    @classmethod
    def _default_scheduler(cls, value: str) -> str:
        return value or DEFAULT_SCHEDULER_NAME

    @field_validator("priority", mode="before")
    @classmethod
    def _int32_priority(cls, value: Any) -> Any:
        return 0 if value is None else int32(value)  # an int32 in the API


class PodCondition(K8sModel):
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None


class PodStatus(K8sModel):
    phase: str = ""
    conditions: list[PodCondition] = Field(default_factory=list)
    nominated_node_name: str = ""
    start_time: str | None = None


class Pod(K8sModel):
    api_version: str = "v1"
    kind: str = "Pod"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)

    @model_validator(mode="after")
    def _defaults_and_names(self) -> Pod:
        require_kind(self.kind, "Pod")
        self.metadata.defaulted()
        return self

    @property
    def key(self) -> str:
        return self.metadata.key


# --- nodes --------------------------------------------------------------------


class Taint(K8sModel):
    key: str
    value: str = ""
    effect: TaintEffect


class NodeSpec(K8sModel):
    unschedulable: bool = False
    taints: list[Taint] = Field(default_factory=list)


class ContainerImage(K8sModel):
    names: list[str] = Field(default_factory=list)
    size_bytes: int = Field(default=0, ge=0)


class NodeCondition(K8sModel):
    type: str = ""
    status: str = ""


class NodeStatus(K8sModel):
    capacity: ResourceList = Field(default_factory=dict)
    allocatable: ResourceList | None = None
    images: list[ContainerImage] = Field(default_factory=list)
    conditions: list[NodeCondition] = Field(default_factory=list)  # compared on updates

    @model_validator(mode="after")
    def _allocatable_defaults_to_capacity(self) -> NodeStatus:
        # As the API server does: a node that reports no allocatable can use its capacity.
        if self.allocatable is None:
            self.allocatable = dict(self.capacity)
        return self


class Node(K8sModel):
    api_version: str = "v1"
    kind: str = "Node"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: NodeStatus = Field(default_factory=NodeStatus)

    @model_validator(mode="after")
    def _kind(self) -> Node:
        require_kind(self.kind, "Node")
        return self

    @property
    def allocatable(self) -> ResourceList:
        return self.status.allocatable or {}


class PodGroupSpec(K8sModel):
    min_member: int = Field(default=0, ge=0)
    schedule_timeout_seconds: int | None = Field(default=None, ge=0)


class PodGroup(K8sModel):
    """scheduling.x-k8s.io/v1alpha1 PodGroup: the gang the Coscheduling plugin reads."""

    api_version: str = "scheduling.x-k8s.io/v1alpha1"
    kind: str = "PodGroup"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodGroupSpec = Field(default_factory=PodGroupSpec)

    @model_validator(mode="after")
    def _kind(self) -> PodGroup:
        require_kind(self.kind, "PodGroup")
        return self

    @property
    def key(self) -> str:
        return self.metadata.key


class PriorityClass(K8sModel):
    """scheduling.k8s.io/v1 PriorityClass: what a pod's priorityClassName resolves to."""

    api_version: str = "scheduling.k8s.io/v1"
    kind: str = "PriorityClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    value: int = Field(ge=-(2**31), le=2**31 - 1)
    global_default: bool = False
    preemption_policy: PreemptionPolicy | None = None
    description: str = ""

    @model_validator(mode="after")
    def _kind(self) -> PriorityClass:
        require_kind(self.kind, "PriorityClass")
        return self


# --- watch events -------------------------------------------------------------

EventType = Literal["ADDED", "MODIFIED", "DELETED"]
EVENT_TYPES: tuple[str, ...] = ("ADDED", "MODIFIED", "DELETED")


def describe_validation_error(err: ValidationError) -> str:
    """One line per problem, each naming the field the way kubectl would."""
    parts = []
    for problem in err.errors():
        path = ""
        for loc in problem["loc"]:
            path += f"[{loc}]" if isinstance(loc, int) else (f".{loc}" if path else str(loc))
        msg = problem["msg"].removeprefix("Value error, ")
        parts.append(f"{path}: {msg}" if path else msg)
    return "; ".join(parts)
