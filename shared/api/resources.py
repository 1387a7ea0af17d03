"""Effective pod resource requests, as kube-scheduler computes them.

Mirrors k8s.io/component-helpers/resource.PodRequests (AggregateContainerRequests,
overridden by the pod-level requests of spec.resources, plus overhead) and the
non-zero requests NodeInfo and scoring use. Works on the raw JSON shape of a
core/v1 PodSpec (camelCase keys), with the API server's defaulting of requests
(container and pod level) applied here. Sums and maxima are taken over exact
quantities and rounded to integers only at the end, as Kubernetes rounds the
aggregated Quantity, not each container's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from shared.api.quantity import (
    QuantityError,
    int_value,
    milli_value,
    parse_nonnegative,
    resource_amount,
)

Amounts = dict[str, Fraction]
HostPort = tuple[str, str, int]  # (hostIP, protocol, hostPort)

SIDECAR_RESTART_POLICY = "Always"  # an init container with this policy keeps running
HUGEPAGES_PREFIX = "hugepages-"
DEFAULT_MILLI_CPU_REQUEST = 100  # schedutil.DefaultMilliCPURequest
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024  # schedutil.DefaultMemoryRequest
# Only a missing request is defaulted for scoring; an explicit 0 stays 0.
_NONZERO_DEFAULTS: Amounts = {
    "cpu": Fraction(DEFAULT_MILLI_CPU_REQUEST, 1000),
    "memory": Fraction(DEFAULT_MEMORY_REQUEST),
}
_POD_LEVEL_NAMES = frozenset({"cpu", "memory"})
_DEFAULT_HOST_IP = "0.0.0.0"
_DEFAULT_PROTOCOL = "TCP"


def is_supported_pod_level_resource(name: str) -> bool:
    """resourcehelper.IsSupportedPodLevelResource: cpu, memory and hugepages-*."""
    return name in _POD_LEVEL_NAMES or name.startswith(HUGEPAGES_PREFIX)


def is_overcommit_allowed(name: str) -> bool:
    """helper.IsOvercommitAllowed: native resources other than hugepages."""
    native = "/" not in name or "kubernetes.io/" in name
    return native and not name.startswith(HUGEPAGES_PREFIX)


def _mapping(value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise QuantityError(f"{field}: must be a map of resource name to quantity")
    return value


def _quantities(value: Any, field: str) -> Amounts:
    items = _mapping(value, field).items()
    return {name: parse_nonnegative(q, field=f"{field}.{name}") for name, q in items}


def _exact_container_requests(container: dict[str, Any], field: str) -> Amounts:
    resources = _mapping(container.get("resources"), f"{field}.resources")
    requests = _quantities(resources.get("requests"), f"{field}.resources.requests")
    limits_field = f"{field}.resources.limits"
    for name, q in _mapping(resources.get("limits"), limits_field).items():
        # API-server defaulting: a limit without a request is also the request.
        if name not in requests:
            requests[name] = parse_nonnegative(q, field=f"{limits_field}.{name}")
    return requests


def exact_container_limits(container: dict[str, Any], field: str) -> Amounts:
    resources = _mapping(container.get("resources"), f"{field}.resources")
    return _quantities(resources.get("limits"), f"{field}.resources.limits")


def container_requests(container: dict[str, Any], *, field: str) -> dict[str, int]:
    """One container's requests in accounting units; `field` is e.g. spec.containers[0]."""
    return _to_units(_exact_container_requests(container, field))


def _to_units(amounts: Amounts) -> dict[str, int]:
    return {name: resource_amount(name, q) for name, q in amounts.items()}


def _containers(spec: dict[str, Any], key: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for i, container in enumerate(spec.get(key) or []):
        yield f"spec.{key}[{i}]", container


def _is_sidecar(container: dict[str, Any]) -> bool:
    return container.get("restartPolicy") == SIDECAR_RESTART_POLICY


def _add(into: Amounts, other: Amounts) -> None:
    for name, q in other.items():
        into[name] = into.get(name, Fraction(0)) + q


def _max(into: Amounts, other: Amounts) -> None:
    for name, q in other.items():
        into[name] = max(into.get(name, Fraction(0)), q)


def _with_defaults(requests: Amounts, defaults: Amounts) -> Amounts:
    return {**defaults, **requests}


_Reader = Callable[[dict[str, Any], str], Amounts]  # (container, its field) -> amounts


@dataclass(frozen=True)
class _PerContainer:
    """One amount per container (requests or limits), in the shape the sums need."""

    containers: list[Amounts]
    init_containers: list[tuple[Amounts, bool]]  # (amounts, is a restartable sidecar)

    @classmethod
    def of(
        cls, spec: dict[str, Any], read: Callable[[dict[str, Any], str], Amounts]
    ) -> _PerContainer:
        return cls(
            [read(c, f) for f, c in _containers(spec, "containers")],
            [(read(c, f), _is_sidecar(c)) for f, c in _containers(spec, "initContainers")],
        )

    def aggregate(self, defaults: Amounts) -> Amounts:
        """AggregateContainerRequests (or Limits); `defaults` fill in missing amounts."""
        total: Amounts = {}
        for amounts in self.containers:
            _add(total, _with_defaults(amounts, defaults))
        # KEP-753: while init container i runs, the sidecars started before it run too;
        # sidecars then keep running next to the regular containers.
        sidecars: Amounts = {}
        init_peak: Amounts = {}
        for exact, is_sidecar in self.init_containers:
            amounts = _with_defaults(exact, defaults)
            if is_sidecar:
                _add(total, amounts)
                _add(sidecars, amounts)
                in_use = dict(sidecars)
            else:
                in_use = dict(amounts)
                _add(in_use, sidecars)
            _max(init_peak, in_use)
        _max(total, init_peak)
        return total


@dataclass(frozen=True)
class PodLevel:
    """spec.resources after the API server's defaulting (SetDefaults_Pod with
    PodLevelResources on): exact amounts by resource name, as the pod states them."""

    requests: Amounts
    limits: Amounts

    @property
    def requests_set(self) -> bool:
        """IsPodLevelRequestsSet: a supported resource has a pod-level request."""
        return any(is_supported_pod_level_resource(n) for n in self.requests)

    @property
    def resources_set(self) -> bool:
        """IsPodLevelResourcesSet: a supported resource has a pod-level request or limit."""
        return self.requests_set or any(is_supported_pod_level_resource(n) for n in self.limits)


def _pod_level(spec: dict[str, Any], requests: _PerContainer) -> PodLevel:
    resources = _mapping(spec.get("resources"), "spec.resources")
    pod_requests = _quantities(resources.get("requests"), "spec.resources.requests")
    pod_limits = _quantities(resources.get("limits"), "spec.resources.limits")
    if not pod_requests and not pod_limits:
        return PodLevel(pod_requests, pod_limits)
    # defaultHugePagePodLimits: containers' hugepage limits become the pod's, unless
    # the pod states a request or a limit for that size.
    limits = _PerContainer.of(spec, exact_container_limits).aggregate({})
    for name, q in limits.items():
        if name.startswith(HUGEPAGES_PREFIX) and name not in pod_requests:
            pod_limits.setdefault(name, q)
    if pod_limits:
        # defaultPodRequests: a missing pod-level request is the containers' total
        # (overcommittable resources), else the pod-level limit.
        for name, q in requests.aggregate({}).items():
            if is_supported_pod_level_resource(name) and is_overcommit_allowed(name):
                pod_requests.setdefault(name, q)
        for name, q in pod_limits.items():
            if is_supported_pod_level_resource(name):
                pod_requests.setdefault(name, q)
    return PodLevel(pod_requests, pod_limits)


def pod_level_resources(spec: dict[str, Any]) -> PodLevel:
    """spec.resources as defaulted by the API server."""
    return _pod_level(spec, _PerContainer.of(spec, _exact_container_requests))


def aggregate_container_requests(spec: dict[str, Any]) -> Amounts:
    """AggregateContainerRequests, exact: the containers' share, without pod-level
    resources or overhead."""
    return _PerContainer.of(spec, _exact_container_requests).aggregate({})


@dataclass(frozen=True)
class _ParsedRequests:
    """A pod's container requests, parsed once for every aggregation of them."""

    containers: _PerContainer
    # Pod-level requests of the resources they apply to; empty when not set.
    pod_level: Amounts
    overhead: Amounts

    @classmethod
    def of(cls, spec: dict[str, Any]) -> _ParsedRequests:
        containers = _PerContainer.of(spec, _exact_container_requests)
        pod_level: Amounts = {}
        if spec.get("resources"):
            level = _pod_level(spec, containers)
            if level.requests_set:
                pod_level = {
                    n: q for n, q in level.requests.items() if is_supported_pod_level_resource(n)
                }
        return cls(containers, pod_level, _quantities(spec.get("overhead"), "spec.overhead"))


def _aggregate(parsed: _ParsedRequests, defaults: Amounts) -> Amounts:
    """PodRequests: the containers' total (`defaults` fill in missing container requests),
    pod-level requests in its place where the pod states them, plus overhead."""
    total = parsed.containers.aggregate(defaults)
    total.update(parsed.pod_level)
    _add(total, parsed.overhead)
    return total


def _node_nonzero(parsed: _ParsedRequests, requests: Amounts) -> Amounts:
    """What NodeInfo counts as the pod's non-zero cpu and memory (calculateResource):
    container defaults for a pod without pod-level requests; with them, defaults only
    for a resource neither level requests."""
    if not parsed.pod_level:
        return _aggregate(parsed, _NONZERO_DEFAULTS)
    missing = {name: q for name, q in _NONZERO_DEFAULTS.items() if name not in requests}
    return _aggregate(parsed, missing) if missing else requests


@dataclass(frozen=True)
class PodRequestTotals:
    """A pod's requests in accounting units (cpu in millicores, the rest in whole units),
    and its (milli-cpu, memory) with kube-scheduler's defaults for requests left out."""

    requests: dict[str, int]
    nonzero: tuple[int, int]  # what NodeInfo adds to the node's NonZeroRequested
    # What the scoring strategies ask of the pod itself (calculatePodResourceRequest):
    # container defaults always, then pod-level requests. Differs from `nonzero` only
    # for some pods with pod-level requests, as upstream.
    scored: tuple[int, int]


def pod_requests(spec: dict[str, Any]) -> dict[str, int]:
    """The pod's effective requests: cpu in millicores, everything else in whole units."""
    return _to_units(_aggregate(_ParsedRequests.of(spec), {}))


def pod_nonzero_requests(spec: dict[str, Any]) -> tuple[int, int]:
    """(milli-cpu, memory bytes) NodeInfo counts, with defaults for requests left out."""
    parsed = _ParsedRequests.of(spec)
    return _nonzero(_node_nonzero(parsed, _aggregate(parsed, {})))


def pod_request_totals(spec: dict[str, Any]) -> PodRequestTotals:
    """All of the above from one parse of the containers (a pod's resources, once)."""
    parsed = _ParsedRequests.of(spec)
    exact = _aggregate(parsed, {})
    nonzero = _nonzero(_node_nonzero(parsed, exact))
    scored = _nonzero(_aggregate(parsed, _NONZERO_DEFAULTS)) if parsed.pod_level else nonzero
    return PodRequestTotals(_to_units(exact), nonzero, scored)


def pod_limits(spec: dict[str, Any]) -> dict[str, int]:
    """PodLimits without overhead: the containers' limits, pod-level limits in their
    place where the pod states them."""
    total = _PerContainer.of(spec, exact_container_limits).aggregate({})
    level = pod_level_resources(spec)
    if level.resources_set:
        total.update((n, q) for n, q in level.limits.items() if is_supported_pod_level_resource(n))
    return _to_units(total)


def _nonzero(total: Amounts) -> tuple[int, int]:
    return milli_value(total.get("cpu", Fraction(0))), int_value(total.get("memory", Fraction(0)))


def pod_host_ports(spec: dict[str, Any]) -> list[HostPort]:
    """Host ports the pod holds for its lifetime: sidecars' first, then containers'."""
    running = [c for _, c in _containers(spec, "initContainers") if _is_sidecar(c)]
    running += [c for _, c in _containers(spec, "containers")]
    return [
        (
            port.get("hostIP") or _DEFAULT_HOST_IP,
            port.get("protocol") or _DEFAULT_PROTOCOL,
            int(port["hostPort"]),
        )
        for container in running
        for port in container.get("ports") or []
        if int(port.get("hostPort") or 0) > 0
    ]
