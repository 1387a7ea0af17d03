"""What the API server answers for one object it is asked to create, and how kubectl
shows the answer: `ksched apply`/`create` check each manifest object with it.

kubectl validates strictly by default (fieldValidation=Strict): the API server first
decodes the object, failing it as a BadRequest for any field its schema does not have
(shared/api/schema.py), then validates what it decoded, failing it as Invalid with
one field.Error per problem (apimachinery's NewInvalid). kubectl prints them
(pkg/cmd/util/helpers.go, checkErr):

  Error from server (BadRequest): error when creating "pod.yaml": Pod in version "v1"
  cannot be handled as a Pod: strict decoding error: unknown field "spec.nodeSelecter"

  The Pod "p" is invalid: spec.containers: Required value

and, for several field errors, each on its own line after `The Pod "p" is invalid: `:
`* spec.containers[0].name: Required value`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.api.field_checks import string_map
from shared.api.pod_validation import pod_spec_errors
from shared.api.schema import bad_request, unknown_fields
from shared.api.schema_fields import KINDS
from shared.api.validation import aggregate, go_quote, label_errors
from shared.api.workload import workload_errors

# Kinds whose spec.template is a pod template the API server validates as a pod spec.
TEMPLATE_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job")


@dataclass(frozen=True)
class ObjectErrors:
    """One object's strict-decoding errors (the unknown fields' paths) and validation
    errors (field.Error strings), as the API server finds them on create."""

    kind: str
    name: str
    api_version: str
    unknown: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.unknown or self.invalid)

    def message(self) -> str:
        """The API server's Status message ("" when it would create the object)."""
        if self.unknown:
            return bad_request(self.kind, self.api_version, self.unknown)
        if self.invalid:
            return invalid_message(self.kind, self.name, self.invalid)
        return ""

    def kubectl_error(self, source: str, verb: str = "creating") -> str:
        """What kubectl prints for the object read from `source` ("" for none). `kubectl
        apply` of an object that does not exist yet says "creating" too."""
        if self.unknown:
            return (
                f"Error from server (BadRequest): error when {verb} {go_quote(source)}: "
                f"{self.message()}"
            )
        if not self.invalid:
            return ""
        head = f"The {self.kind} {go_quote(self.name)} is invalid: "
        causes = list(dict.fromkeys(self.invalid))
        if len(causes) == 1:
            return head + causes[0]
        return head + "\n" + "\n".join(f"* {c}" for c in causes)


def check_object(obj: Mapping[str, Any]) -> ObjectErrors:
    """The errors `kubectl create` (or `apply` of a new object) would meet for `obj`."""
    kind = str(obj.get("kind") or "")
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    api_version = obj.get("apiVersion")
    return ObjectErrors(
        kind,
        str(meta.get("name") or ""),
        api_version if isinstance(api_version, str) else KINDS.get(kind, "v1"),
        unknown_fields(obj, kind),
        validation_errors(obj),
    )


def validation_errors(obj: Mapping[str, Any]) -> list[str]:
    """The label grammar of the object's labels and, for a pod or a workload, its pod
    spec's validation (a workload's template at spec.template); a scheduling.k8s.io
    Workload's spec."""
    kind = obj.get("kind")
    errs = _labels(obj.get("metadata"), "metadata.labels")
    spec = obj.get("spec")
    if kind == "Pod":
        errs += pod_spec_errors(spec, "spec", node_selector=True)
    elif kind == "Workload":
        errs += workload_errors(obj)
    elif kind in TEMPLATE_KINDS and isinstance(spec, Mapping):
        template = spec.get("template")
        if isinstance(template, Mapping):
            errs += _labels(template.get("metadata"), "spec.template.metadata.labels")
            errs += pod_spec_errors(template.get("spec"), "spec.template.spec", node_selector=True)
    return errs


def _labels(meta: Any, path: str) -> list[str]:
    labels = string_map(meta.get("labels")) if isinstance(meta, Mapping) else None
    return label_errors(labels, path) if labels else []


def invalid_message(kind: str, name: str, errors: list[str]) -> str:
    """NewInvalid's message: `Pod "p" is invalid: <error>`, several in brackets; the
    kind qualified by its API group ("Deployment.apps")."""
    group = KINDS.get(kind, "v1").rpartition("/")[0]
    qualified = f"{kind}.{group}" if group else kind
    return f"{qualified} {go_quote(name)} is invalid: {aggregate(errors)}"
