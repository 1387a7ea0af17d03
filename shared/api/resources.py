"""Effective pod resource requests, as kube-scheduler computes them.

Mirrors k8s.io/component-helpers/resource.PodRequests (AggregateContainerRequests
plus overhead) and NodeInfo's non-zero requests for scoring. Works on the raw
JSON shape of a core/v1 PodSpec (camelCase keys). Sums and maxima are taken over
exact quantities and rounded to integers only at the end, as Kubernetes rounds
the aggregated Quantity, not each container's.
"""

from __future__ import annotations

from collections.abc import Iterator
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
DEFAULT_MILLI_CPU_REQUEST = 100  # schedutil.DefaultMilliCPURequest
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024  # schedutil.DefaultMemoryRequest
# Only a missing request is defaulted for scoring; an explicit 0 stays 0.
_NONZERO_DEFAULTS: Amounts = {
    "cpu": Fraction(DEFAULT_MILLI_CPU_REQUEST, 1000),
    "memory": Fraction(DEFAULT_MEMORY_REQUEST),
}
_DEFAULT_HOST_IP = "0.0.0.0"
_DEFAULT_PROTOCOL = "TCP"


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


@dataclass(frozen=True)
class _ParsedRequests:
    """A pod's container requests, parsed once for every aggregation of them."""

    containers: list[Amounts]
    init_containers: list[tuple[Amounts, bool]]  # (requests, is a restartable sidecar)
    overhead: Amounts

    @classmethod
    def of(cls, spec: dict[str, Any]) -> _ParsedRequests:
        return cls(
            [_exact_container_requests(c, f) for f, c in _containers(spec, "containers")],
            [
                (_exact_container_requests(c, f), _is_sidecar(c))
                for f, c in _containers(spec, "initContainers")
            ],
            _quantities(spec.get("overhead"), "spec.overhead"),
        )


def _aggregate(parsed: _ParsedRequests, defaults: Amounts) -> Amounts:
    """AggregateContainerRequests + overhead; `defaults` fill in missing container requests."""
    total: Amounts = {}
    for requests in parsed.containers:
        _add(total, _with_defaults(requests, defaults))
    # KEP-753: while init container i runs, the sidecars started before it run too;
    # sidecars then keep running next to the regular containers.
    sidecars: Amounts = {}
    init_peak: Amounts = {}
    for exact, is_sidecar in parsed.init_containers:
        requests = _with_defaults(exact, defaults)
        if is_sidecar:
            _add(total, requests)
            _add(sidecars, requests)
            in_use = dict(sidecars)
        else:
            in_use = dict(requests)
            _add(in_use, sidecars)
        _max(init_peak, in_use)
    _max(total, init_peak)
    _add(total, parsed.overhead)
    return total


def pod_requests(spec: dict[str, Any]) -> dict[str, int]:
    """The pod's effective requests: cpu in millicores, everything else in whole units."""
    return _to_units(_aggregate(_ParsedRequests.of(spec), {}))


def pod_nonzero_requests(spec: dict[str, Any]) -> tuple[int, int]:
    """(milli-cpu, memory bytes) for scoring, with defaults for containers requesting none."""
    return _nonzero(_aggregate(_ParsedRequests.of(spec), _NONZERO_DEFAULTS))


def pod_requests_and_nonzero(spec: dict[str, Any]) -> tuple[dict[str, int], tuple[int, int]]:
    """Both of the above from one parse of the containers (a pod's resources, once)."""
    parsed = _ParsedRequests.of(spec)
    return _to_units(_aggregate(parsed, {})), _nonzero(_aggregate(parsed, _NONZERO_DEFAULTS))


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
