"""policy/v1 PodDisruptionBudget, as far as preemption reads it.

Published on `ksched.cluster.pdbs.<namespace>.<name>` as watch events, like pods.
ksched has no disruption controller: when `status.disruptionsAllowed` is absent,
`disruptions_allowed` derives it from the spec and the pods placed in the
snapshot, as the controller would (see docs/preemption.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from pydantic import Field, field_validator, model_validator

from shared.api.models import K8sModel, LabelSelector, ObjectMeta, Pod, require_kind
from shared.framework.selectors import label_selector_error, label_selector_matches

IntOrPercent = int | str
_PERCENT = re.compile(r"^[0-9]+%$")


def _int_or_percent(value: Any, field: str) -> IntOrPercent | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"{field} must be an integer or a percentage, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{field} must be non-negative, got {value}")
        return value
    if isinstance(value, str) and _PERCENT.match(value):
        return value
    raise ValueError(f"{field} must be an integer or a percentage like '50%', got {value!r}")


class PodDisruptionBudgetSpec(K8sModel):
    selector: LabelSelector | None = None
    min_available: IntOrPercent | None = None
    max_unavailable: IntOrPercent | None = None

    @field_validator("min_available", "max_unavailable", mode="before")
    @classmethod
    def _check_amount(cls, value: Any) -> Any:
        return _int_or_percent(value, "minAvailable/maxUnavailable")

    @model_validator(mode="after")
    def _one_of(self) -> PodDisruptionBudgetSpec:
        if self.min_available is not None and self.max_unavailable is not None:
            raise ValueError("minAvailable and maxUnavailable cannot be both set")
        error = label_selector_error(self.selector)
        if error:
            raise ValueError(f"selector: {error}")
        return self


class PodDisruptionBudgetStatus(K8sModel):
    disruptions_allowed: int | None = Field(default=None, ge=0)
    disrupted_pods: dict[str, Any] = Field(default_factory=dict)

    @field_validator("disrupted_pods", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return {} if value is None else value


class PodDisruptionBudget(K8sModel):
    api_version: str = "policy/v1"
    kind: str = "PodDisruptionBudget"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodDisruptionBudgetSpec = Field(default_factory=PodDisruptionBudgetSpec)
    status: PodDisruptionBudgetStatus = Field(default_factory=PodDisruptionBudgetStatus)

    @model_validator(mode="after")
    def _kind_and_namespace(self) -> PodDisruptionBudget:
        require_kind(self.kind, "PodDisruptionBudget")
        self.metadata.defaulted()
        return self

    @property
    def key(self) -> str:
        return self.metadata.key

    def matches(self, pod: Pod) -> bool:
        """Whether the budget covers the pod: same namespace, non-empty selector matching
        its labels (a nil or empty selector matches nothing here, as in kube's preemption)."""
        sel = self.spec.selector
        if pod.metadata.namespace != self.metadata.namespace or sel is None:
            return False
        if not sel.match_labels and not sel.match_expressions:
            return False
        return label_selector_matches(sel, pod.metadata.labels)

    def disruptions_allowed(self, placed: Iterable[Pod]) -> int:
        """status.disruptionsAllowed, or what the disruption controller would compute from
        the pods currently placed (every placed pod counts as healthy and expected)."""
        if self.status.disruptions_allowed is not None:
            return self.status.disruptions_allowed
        healthy = sum(1 for p in placed if self.matches(p) and not p.metadata.deletion_timestamp)
        return max(0, healthy - self._desired_healthy(healthy))

    def _desired_healthy(self, expected: int) -> int:
        spec = self.spec
        if spec.max_unavailable is not None:
            return max(0, expected - _scaled(spec.max_unavailable, expected))
        # policy/v1 defaulting: neither set means minAvailable 1.
        min_available = 1 if spec.min_available is None else spec.min_available
        return _scaled(min_available, expected)


def _scaled(value: IntOrPercent, total: int) -> int:
    """GetScaledValueFromIntOrPercent, rounding up as the disruption controller does."""
    if isinstance(value, int):
        return value
    return math.ceil(int(value[:-1]) * total / 100)
