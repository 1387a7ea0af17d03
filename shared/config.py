"""KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1), the parts in use.

Read by every service from KSCHED_CONFIG; with no file, kube-scheduler's
defaults. The plugin set per profile is validated by the framework.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from shared.api.models import DEFAULT_SCHEDULER_NAME, describe_validation_error

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"

# Feature gates (kube-scheduler's --feature-gates) ksched knows, with their defaults; set
# in the file's featureGates, or KSCHED_FEATURE_GATES="Name=false,..." (which wins).
OPPORTUNISTIC_BATCHING = "OpportunisticBatching"  # KEP-5598, on by default since 1.35
FEATURE_GATES: dict[str, bool] = {OPPORTUNISTIC_BATCHING: True}
FEATURE_GATES_ENV = "KSCHED_FEATURE_GATES"


class ConfigError(ValueError):
    """A configuration ksched refuses to start with; the message names the field."""


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class PluginRef(_Model):
    name: str
    weight: int | None = None


class PluginSet(_Model):
    enabled: list[PluginRef] = Field(default_factory=list)
    disabled: list[PluginRef] = Field(default_factory=list)


class Plugins(_Model):
    # Extension point name -> plugin set, as in the v1 API (queueSort, filter, score, ...).
    model_config = ConfigDict(alias_generator=to_camel, extra="allow", populate_by_name=True)
    multi_point: PluginSet = Field(default_factory=PluginSet)


class PluginConfig(_Model):
    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class Profile(_Model):
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    plugins: Plugins | None = None
    plugin_config: list[PluginConfig] = Field(default_factory=list)


class SchedulerConfiguration(_Model):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")
    api_version: str = API_VERSION
    kind: str = KIND
    parallelism: int = Field(default=16, ge=1)
    percentage_of_nodes_to_score: int | None = Field(default=None, ge=0, le=100)
    pod_initial_backoff_seconds: float = Field(default=1, gt=0)
    pod_max_backoff_seconds: float = Field(default=10, gt=0)
    profiles: list[Profile] = Field(default_factory=lambda: [Profile()])
    feature_gates: dict[str, bool] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> SchedulerConfiguration:
        for gate in self.feature_gates:
            _known_gate(gate)
        if self.api_version != API_VERSION:
            raise ValueError(f"apiVersion must be {API_VERSION}, got {self.api_version!r}")
        if self.kind != KIND:
            raise ValueError(f"kind must be {KIND}, got {self.kind!r}")
        if self.pod_max_backoff_seconds < self.pod_initial_backoff_seconds:
            raise ValueError("podMaxBackoffSeconds must be >= podInitialBackoffSeconds")
        names = [p.scheduler_name for p in self.profiles]
        if not names:
            raise ValueError("profiles: at least one profile is required")
        if len(set(names)) != len(names):
            raise ValueError(f"profiles: duplicate schedulerName in {names}")
        return self

    @property
    def scheduler_names(self) -> frozenset[str]:
        return frozenset(p.scheduler_name for p in self.profiles)

    def feature_enabled(self, gate: str, environ: Mapping[str, str] = os.environ) -> bool:
        """The gate's value: KSCHED_FEATURE_GATES, else featureGates, else its default."""
        from_env = parse_feature_gates(environ.get(FEATURE_GATES_ENV, ""))
        return from_env.get(gate, self.feature_gates.get(gate, FEATURE_GATES[gate]))


def _known_gate(gate: str) -> None:
    if gate not in FEATURE_GATES:
        raise ValueError(
            f"featureGates: unknown feature gate {gate!r}, known: {sorted(FEATURE_GATES)}"
        )


def parse_feature_gates(text: str) -> dict[str, bool]:
    """`Name=true,Other=false` (kube's --feature-gates form)."""
    gates: dict[str, bool] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        name, value = name.strip(), value.strip().lower()
        if value not in ("true", "false"):
            raise ConfigError(f"{FEATURE_GATES_ENV}: {item!r} is not Name=true or Name=false")
        try:
            _known_gate(name)
        except ValueError as err:
            raise ConfigError(f"{FEATURE_GATES_ENV}: {err}") from None
        gates[name] = value == "true"
    return gates


def parse_config(doc: Any, source: str = "configuration") -> SchedulerConfiguration:
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: must be a mapping")
    try:
        return SchedulerConfiguration.model_validate(doc)
    except ValidationError as err:
        raise ConfigError(f"{source}: {describe_validation_error(err)}") from None


def load_config(path: str | None) -> SchedulerConfiguration:
    if not path:
        return SchedulerConfiguration()
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: invalid YAML: {err}") from None
    return parse_config(doc, path)
