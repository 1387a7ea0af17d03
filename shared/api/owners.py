"""Services and the controllers that own pods, as far as the scheduler reads them:
their selectors (core/v1 Service and ReplicationController, apps/v1 ReplicaSet and
StatefulSet).

PodTopologySpread's default constraints take their selector from the Services that
select a pod and from the pod's controller (helper.DefaultSelector, see
shared/plugins/helper.py). They are published as watch events on
`ksched.cluster.{services,replicasets,statefulsets,replicationcontrollers}.<ns>.<name>`
and refused at the door as the API server refuses them on create, with its message
(`StatefulSet.apps "zk" is invalid: spec.selector: Required value`), for what the
scheduler relies on: names, selectors, and a template its selector matches.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from shared.api.models import K8sModel, LabelSelector, ObjectMeta, require_kind
from shared.api.validation import (
    dns1035_label_errors,
    dns1123_subdomain_errors,
    go_quote,
    go_string_map,
    invalid,
    invalid_object,
    label_errors,
    label_value_errors,
    qualified_name_errors,
)
from shared.framework.selectors import label_selector_matches

SELECTOR_MISMATCH = "`selector` does not match template `labels`"


class PodTemplateSpec(K8sModel):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)


class ServiceSpec(K8sModel):
    # None (no selector) selects no pod; {} selects every pod of the namespace
    selector: dict[str, str] | None = None


class Service(K8sModel):
    api_version: str = "v1"
    kind: str = "Service"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ServiceSpec = Field(default_factory=ServiceSpec)

    @model_validator(mode="after")
    def _valid(self) -> Service:
        require_kind(self.kind, "Service")
        self.metadata.defaulted()
        errors = label_errors(self.spec.selector or {}, "spec.selector")
        if errors:
            raise ValueError(invalid_object("Service", self.metadata.name, errors))
        return self


class ControllerSpec(K8sModel):
    """What a ReplicaSet's or a StatefulSet's spec holds that the scheduler reads."""

    replicas: int | None = None
    selector: LabelSelector | None = None
    template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)


class _AppsController(K8sModel):
    """apps/v1 ReplicaSet and StatefulSet, alike as far as the scheduler reads them."""

    # the object upstream's "empty selector is invalid for ..." names
    EMPTY_SELECTOR_FOR: ClassVar[str]
    api_version: str = "apps/v1"
    kind: str = ""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ControllerSpec = Field(default_factory=ControllerSpec)

    @model_validator(mode="after")
    def _valid(self) -> _AppsController:
        kind = type(self).__name__
        require_kind(self.kind, kind)
        self.metadata.defaulted()
        _check_apps_spec(f"{kind}.apps", self.metadata.name, self.spec, self.EMPTY_SELECTOR_FOR)
        return self


class ReplicaSet(_AppsController):
    EMPTY_SELECTOR_FOR = "deployment"  # sic: upstream's ReplicaSet message
    kind: str = "ReplicaSet"


class StatefulSet(_AppsController):
    EMPTY_SELECTOR_FOR = "statefulset"
    kind: str = "StatefulSet"


class Deployment(_AppsController):
    """Not a live object (its ReplicaSets are): `ksched apply` validates it with this."""

    EMPTY_SELECTOR_FOR = "deployment"
    kind: str = "Deployment"


class ReplicationControllerSpec(K8sModel):
    replicas: int | None = None
    selector: dict[str, str] | None = None
    template: PodTemplateSpec | None = None


class ReplicationController(K8sModel):
    api_version: str = "v1"
    kind: str = "ReplicationController"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ReplicationControllerSpec = Field(default_factory=ReplicationControllerSpec)

    @model_validator(mode="after")
    def _valid(self) -> ReplicationController:
        require_kind(self.kind, "ReplicationController")
        self.metadata.defaulted()
        spec = self.spec
        template = spec.template
        if not spec.selector and template is not None:  # v1 defaulting
            spec.selector = dict(template.metadata.labels)
        errors = _replicas_errors(spec.replicas)
        if not spec.selector:
            errors.append("spec.selector: Required value")
        if template is None:
            errors.append("spec.template: Required value")
        elif spec.selector and not _set_matches(spec.selector, template.metadata.labels):
            errors.append(_template_mismatch(template))
        if errors:
            raise ValueError(invalid_object("ReplicationController", self.metadata.name, errors))
        return self


Owner = Service | ReplicaSet | StatefulSet | ReplicationController
Controller = ReplicaSet | StatefulSet | ReplicationController
OWNER_MODELS: dict[str, type[Owner]] = {
    "Service": Service,
    "ReplicaSet": ReplicaSet,
    "StatefulSet": StatefulSet,
    "ReplicationController": ReplicationController,
}
_QUALIFIED_KINDS = {
    "ReplicaSet": "ReplicaSet.apps",
    "StatefulSet": "StatefulSet.apps",
    "Deployment": "Deployment.apps",
}


def name_error(obj: Owner | Deployment) -> str | None:
    """ValidateObjectMeta's name check: Service names are DNS-1035 labels, the
    controllers' DNS-1123 subdomains."""
    name = obj.metadata.name
    service = obj.kind == "Service"
    problems = dns1035_label_errors(name) if service else dns1123_subdomain_errors(name)
    if not problems:
        return None
    kind = _QUALIFIED_KINDS.get(obj.kind, obj.kind)
    return invalid_object(
        kind, name, [invalid("metadata.name", go_quote(name), m) for m in problems]
    )


def controller_ref(raw_pod: dict[str, Any]) -> dict[str, Any] | None:
    """metav1.GetControllerOf: the pod's ownerReference with controller: true."""
    refs = (raw_pod.get("metadata") or {}).get("ownerReferences") or []
    return next((r for r in refs if isinstance(r, dict) and r.get("controller") is True), None)


def _check_apps_spec(kind: str, name: str, spec: ControllerSpec, empty_for: str) -> None:
    """ValidateReplicaSetSpec / ValidateStatefulSetSpec, the parts the scheduler reads."""
    errors = _replicas_errors(spec.replicas)
    selector = spec.selector
    if selector is None:
        errors.append("spec.selector: Required value")
    else:
        selector_errors = _label_selector_errors(selector, "spec.selector")
        errors += selector_errors
        if not selector.match_labels and not selector.match_expressions:
            shown = _go_label_selector(selector)
            errors.append(
                invalid("spec.selector", shown, f"empty selector is invalid for {empty_for}")
            )
        elif not selector_errors and not label_selector_matches(
            selector, spec.template.metadata.labels
        ):
            errors.append(_template_mismatch(spec.template))
    if errors:
        raise ValueError(invalid_object(kind, name, errors))


def _replicas_errors(replicas: int | None) -> list[str]:
    if replicas is not None and replicas < 0:
        return [invalid("spec.replicas", str(replicas), "must be greater than or equal to 0")]
    return []


def _label_selector_errors(selector: LabelSelector, path: str) -> list[str]:
    """unversionedvalidation.ValidateLabelSelector (label values strictly)."""
    errors = label_errors(selector.match_labels, f"{path}.matchLabels")
    for i, req in enumerate(selector.match_expressions):
        where = f"{path}.matchExpressions[{i}]"
        if req.operator in ("In", "NotIn") and not req.values:
            errors.append(
                f"{where}.values: Required value: must be specified when `operator` is "
                "'In' or 'NotIn'"
            )
        elif req.operator in ("Exists", "DoesNotExist") and req.values:
            errors.append(
                f"{where}.values: Forbidden: may not be specified when `operator` is "
                "'Exists' or 'DoesNotExist'"
            )
        errors += [
            invalid(f"{where}.key", go_quote(req.key), m) for m in qualified_name_errors(req.key)
        ]
        for j, value in enumerate(req.values):
            errors += [
                invalid(f"{where}.values[{j}]", go_quote(value), m)
                for m in label_value_errors(value)
            ]
    return errors


def _set_matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _template_mismatch(template: PodTemplateSpec) -> str:
    meta = template.metadata
    labels = meta.labels if meta.labels or "labels" in meta.model_fields_set else None
    return invalid("spec.template.metadata.labels", go_string_map(labels), SELECTOR_MISMATCH)


def _go_label_selector(selector: LabelSelector) -> str:
    """%#v of an empty metav1.LabelSelector, the value the API server shows."""
    fields = selector.model_fields_set
    labels = "map[string]string{}" if "match_labels" in fields else "map[string]string(nil)"
    exprs = (
        "[]v1.LabelSelectorRequirement{}"
        if "match_expressions" in fields
        else "[]v1.LabelSelectorRequirement(nil)"
    )
    return f"v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{exprs}}}"
