"""The API server's validation of pod-level resources (spec.resources, KEP-2837
PodLevelResources, on by default since Kubernetes 1.34), with its messages.

pkg/apis/core/validation's validatePodResources: the claims are forbidden,
validatePodResourceRequirements checks each name (validatePodResourceName: only
cpu, memory and hugepages-* are supported at pod level), each hugepages amount,
and requests against limits; validatePodResourceConsistency checks that a pod-level
request covers what the containers request together, and that no container's limit
exceeds the pod's. As upstream, the pod is checked as the API server's defaulting
left it (resources.pod_level_resources), and quantities are quoted back in their
canonical form. Go walks the maps in random order; names are sorted here.

Checked where pods enter ksched (the door, shared/api/events.py, and `ksched apply`),
as names and labels are; internal paths and test vectors carry pods as given.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import Any

from shared.api.quantity import (
    DECIMAL_SI,
    QuantityError,
    parse_quantity,
    quantity_format,
    quantity_string,
)
from shared.api.resources import (
    HUGEPAGES_PREFIX,
    aggregate_container_requests,
    exact_container_limits,
    is_overcommit_allowed,
    is_supported_pod_level_resource,
    pod_level_resources,
)
from shared.api.validation import (
    forbidden,
    go_quote,
    invalid,
    not_supported,
    qualified_name_errors,
    required,
)

PATH = "spec.resources"
# sets.List(resourcehelper.SupportedPodLevelResources())
SUPPORTED_POD_LEVEL_RESOURCES = ("cpu", HUGEPAGES_PREFIX, "memory")
# helper.IsStandardResourceName: the unprefixed names a resource may have.
_STANDARD_RESOURCES = frozenset(
    {
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "storage",
        "requests.storage",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_QOS_RESOURCES = frozenset({"cpu", "memory"})


def pod_resources_errors(spec: Mapping[str, Any]) -> list[str]:
    """validatePodResources: field.Error strings, one per problem (none without
    spec.resources)."""
    resources = spec.get("resources")
    if resources is None:
        return []
    if not isinstance(resources, dict):
        return [f"{PATH}: must be an object with requests and limits"]
    errors = []
    if resources.get("claims") is not None:
        errors.append(
            forbidden(f"{PATH}.claims", "claims cannot be set for Resources at pod-level")
        )
    errors += _name_errors(resources)
    try:
        shown = _Shown(dict(spec))
        errors += _requirement_errors(shown)
        errors += _consistency_errors(shown)
    except QuantityError as err:
        errors.append(str(err))
    return errors


def _name_errors(resources: dict[str, Any]) -> list[str]:
    errors = []
    for kind in ("limits", "requests"):
        amounts = resources.get(kind) or {}
        if isinstance(amounts, dict):  # else parsing the amounts says what is wrong
            errors += [e for n in sorted(amounts) for e in _pod_resource_name_errors(kind, n)]
    return errors


def _pod_resource_name_errors(kind: str, name: str) -> list[str]:
    """validatePodResourceName: a valid resource name, supported at pod level."""
    path = f"{PATH}.{kind}[{name}]"
    problems = qualified_name_errors(name)
    if problems:
        return [invalid(path, go_quote(name), p) for p in problems]
    standard = name in _STANDARD_RESOURCES or name.startswith(
        (HUGEPAGES_PREFIX, "requests." + HUGEPAGES_PREFIX)
    )
    if "/" not in name and not standard:
        return [
            invalid(path, go_quote(name), "must be a standard resource type or fully qualified")
        ]
    if not is_supported_pod_level_resource(name):
        return [not_supported(path, name, SUPPORTED_POD_LEVEL_RESOURCES)]
    return []


class _Shown:
    """The defaulted pod-level amounts, and each amount as Quantity.String() shows it
    (in the notation of the value it came from)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        level = pod_level_resources(spec)
        self.requests, self.limits = level.requests, level.limits
        self.aggregate = aggregate_container_requests(spec)
        resources = spec["resources"]
        self._raw_requests = resources.get("requests") or {}
        self._raw_limits = resources.get("limits") or {}

    def request(self, name: str) -> str:
        raws = [self._raw_requests.get(name), *self._container_raws(name)]
        return _string(self.requests[name], [*raws, self._raw_limits.get(name)])

    def limit(self, name: str) -> str:
        raws = [self._raw_limits.get(name), *self._container_raws(name)]
        return _string(self.limits[name], raws)

    def aggregated(self, name: str) -> str:
        return _string(self.aggregate[name], list(self._container_raws(name)))

    def _container_raws(self, name: str) -> Iterator[Any]:
        """The amounts the containers state for `name`, in the order Go sums them."""
        for key in ("containers", "initContainers"):
            for container in self.spec.get(key) or []:
                resources = container.get("resources") or {}
                for kind in ("requests", "limits"):
                    yield (resources.get(kind) or {}).get(name)


def _string(q: Fraction, raws: list[Any]) -> str:
    """Quantity.String() of `q`, held in the format of the first stated amount."""
    first = next((raw for raw in raws if raw is not None), None)
    return quantity_string(q, DECIMAL_SI if first is None else quantity_format(first))


def _requirement_errors(shown: _Shown) -> list[str]:
    """validateResourceRequirements at pod level, past the names: hugepages amounts,
    requests against limits."""
    errors: list[str] = []
    for kind, amounts, show in (
        ("limits", shown.limits, shown.limit),
        ("requests", shown.requests, shown.request),
    ):
        for name in sorted(amounts):
            if name.startswith(HUGEPAGES_PREFIX) and not _divisible(name, amounts[name]):
                value = show(name)
                detail = f"{value} is not positive integer multiple of {name}"
                errors.append(invalid(f"{PATH}.{kind}[{name}]", go_quote(value), detail))
    for name in sorted(shown.requests):
        errors += _request_against_limit(shown, name)
    named = shown.requests.keys() | shown.limits.keys()
    if any(n.startswith(HUGEPAGES_PREFIX) for n in named) and not named & _QOS_RESOURCES:
        errors.append(forbidden(PATH, "HugePages require cpu or memory"))
    return errors


def _request_against_limit(shown: _Shown, name: str) -> list[str]:
    request, limit = shown.requests[name], shown.limits.get(name)
    if limit is None:
        if is_overcommit_allowed(name):
            return []
        return [required(f"{PATH}.limits", "Limit must be set for non overcommitable resources")]
    if request != limit and not is_overcommit_allowed(name):
        detail = f"must be equal to {name} limit of {shown.limit(name)}"
    elif request > limit:
        detail = f"must be less than or equal to {name} limit of {shown.limit(name)}"
    else:
        return []
    return [invalid(f"{PATH}.requests", go_quote(shown.request(name)), detail)]


def _divisible(name: str, amount: Fraction) -> bool:
    """helper.IsHugePageResourceValueDivisible: a whole number of pages."""
    try:
        page = parse_quantity(name.removeprefix(HUGEPAGES_PREFIX))
    except QuantityError:
        return False
    if page <= 0 or page.denominator != 1:
        return False
    return math.ceil(amount) % page == 0  # Quantity.Value() rounds up


def _consistency_errors(shown: _Shown) -> list[str]:
    """validatePodResourceConsistency: a pod-level request covers the containers'
    aggregate requests; no regular container's limit exceeds the pod-level limit."""
    errors = []
    for name in sorted(shown.aggregate):
        request = shown.requests.get(name)
        if request is not None and shown.aggregate[name] > request:
            detail = "must be greater than or equal to aggregate container requests of "
            detail += shown.aggregated(name)
            errors.append(
                invalid(f"{PATH}.requests[{name}]", go_quote(shown.request(name)), detail)
            )
    for i, container in enumerate(shown.spec.get("containers") or []):
        limits = exact_container_limits(container, f"spec.containers[{i}]")
        raws = (container.get("resources") or {}).get("limits") or {}
        for name in sorted(limits):
            pod_limit = shown.limits.get(name)
            if pod_limit is None or limits[name] <= pod_limit:
                continue
            value = go_quote(_string(limits[name], [raws[name]]))
            detail = f"must be less than or equal to pod limits of {shown.limit(name)}"
            errors.append(invalid(f"{PATH}.containers[{i}][{name}].limits", value, detail))
    return errors
