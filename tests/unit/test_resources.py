"""Effective pod requests (component-helpers PodRequests), non-zero requests and host ports."""

from __future__ import annotations

import re
from typing import Any

import pytest

from shared.api.quantity import QuantityError
from shared.api.resources import (
    DEFAULT_MEMORY_REQUEST,
    container_requests,
    pod_host_ports,
    pod_nonzero_requests,
    pod_request_totals,
    pod_requests,
)
from tests.builders import make_container as ctr

Mi = 1024 * 1024
Gi = 1024 * Mi


CONTAINER_CASES: list[tuple[str, dict[str, Any], dict[str, int]]] = [
    ("no-resources", {"name": "c"}, {}),
    ("null-resources", {"name": "c", "resources": None}, {}),
    ("requests", ctr({"cpu": "250m", "memory": "64Mi"}), {"cpu": 250, "memory": 64 * Mi}),
    ("limits-only", ctr(limits={"cpu": "1", "memory": "1Gi"}), {"cpu": 1000, "memory": Gi}),
    (
        "request-wins-over-limit",
        ctr({"cpu": "100m"}, {"cpu": "2", "memory": "1Gi"}),
        {"cpu": 100, "memory": Gi},
    ),
    ("explicit-zero", ctr({"cpu": "0"}), {"cpu": 0}),
    ("json-numbers", ctr({"cpu": 0.5, "memory": 1024}), {"cpu": 500, "memory": 1024}),
    ("extended", ctr(limits={"nvidia.com/gpu": 2}), {"nvidia.com/gpu": 2}),
]


@pytest.mark.parametrize(
    ("container", "expected"),
    [c[1:] for c in CONTAINER_CASES],
    ids=[c[0] for c in CONTAINER_CASES],
)
def test_container_requests(container: dict[str, Any], expected: dict[str, int]) -> None:
    assert container_requests(container, field="spec.containers[0]") == expected


@pytest.mark.parametrize(
    ("container", "field"),
    [
        (ctr({"cpu": "-1"}), "spec.containers[0].resources.requests.cpu"),
        (ctr(limits={"memory": "-1Mi"}), "spec.containers[0].resources.limits.memory"),
        (ctr({"cpu": "1.5.2"}), "spec.containers[0].resources.requests.cpu"),
        ({"resources": {"requests": ["cpu"]}}, "spec.containers[0].resources.requests"),
    ],
    ids=["negative-request", "negative-limit", "malformed", "not-a-map"],
)
def test_container_requests_errors_name_field(container: dict[str, Any], field: str) -> None:
    with pytest.raises(QuantityError, match=f"^{re.escape(field)}: "):
        container_requests(container, field="spec.containers[0]")


POD_CASES: list[tuple[str, dict[str, Any], dict[str, int]]] = [
    ("empty", {}, {}),
    ("null-lists", {"containers": None, "initContainers": None, "overhead": None}, {}),
    (
        "containers-summed",
        {"containers": [ctr({"cpu": "100m", "memory": "1Gi"}), ctr({"cpu": "1.5"})]},
        {"cpu": 1600, "memory": Gi},
    ),
    (
        "limits-only-defaulting",
        {"containers": [ctr(limits={"cpu": "2"}), ctr({"cpu": "1"}, {"cpu": "3"})]},
        {"cpu": 3000},
    ),
    (
        "init-larger-than-containers",
        {
            "initContainers": [ctr({"cpu": "2", "memory": "100Mi"})],
            "containers": [ctr({"cpu": "500m", "memory": "1Gi"}), ctr({"cpu": "500m"})],
        },
        {"cpu": 2000, "memory": Gi},
    ),
    (
        "init-containers-max-not-sum",
        {
            "initContainers": [ctr({"cpu": "1"}), ctr({"cpu": "2"})],
            "containers": [ctr({"cpu": "100m"})],
        },
        {"cpu": 2000},
    ),
    (
        "kep-753-sidecar-example",
        {
            "initContainers": [ctr({"cpu": "1"}, sidecar=True), ctr({"cpu": "2"})],
            "containers": [ctr({"cpu": "3"})],
        },
        {"cpu": 4000},  # max(3 + 1, 2 + 1, 1)
    ),
    (
        "init-after-sidecar-dominates",
        {
            "initContainers": [ctr({"cpu": "1"}, sidecar=True), ctr({"cpu": "5"})],
            "containers": [ctr({"cpu": "1"})],
        },
        {"cpu": 6000},  # the init container runs next to the sidecar
    ),
    (
        "init-before-sidecar-runs-alone",
        {
            "initContainers": [ctr({"cpu": "5"}), ctr({"cpu": "1"}, sidecar=True)],
            "containers": [ctr({"cpu": "1"})],
        },
        {"cpu": 5000},
    ),
    (
        "sidecars-accumulate",
        {
            "initContainers": [
                ctr({"memory": "1Gi"}, sidecar=True),
                ctr({"memory": "2Gi"}, sidecar=True),
                ctr({"memory": "2Gi"}),
            ],
            "containers": [ctr({"memory": "1Gi"})],
        },
        {"memory": 5 * Gi},  # the init container runs next to both sidecars: 2 + 3 > 1 + 3
    ),
    (
        "non-sidecar-restart-policy",
        {
            "initContainers": [{"restartPolicy": "Never", "resources": {"requests": {"cpu": 2}}}],
            "containers": [ctr({"cpu": "1"})],
        },
        {"cpu": 2000},
    ),
    (
        "overhead",
        {"containers": [ctr({"cpu": "1", "memory": "1Gi"})], "overhead": {"cpu": "250m"}},
        {"cpu": 1250, "memory": Gi},
    ),
    (
        "overhead-on-top-of-init-max",
        {
            "initContainers": [ctr({"cpu": "2"})],
            "containers": [ctr({"cpu": "1"})],
            "overhead": {"cpu": "100m", "memory": "10Mi"},
        },
        {"cpu": 2100, "memory": 10 * Mi},
    ),
    (
        "extended-and-hugepages",
        {
            "initContainers": [ctr(limits={"nvidia.com/gpu": "2"})],
            "containers": [
                ctr({"nvidia.com/gpu": "1", "hugepages-2Mi": "4Mi", "ephemeral-storage": "1Gi"}),
            ],
        },
        {"nvidia.com/gpu": 2, "hugepages-2Mi": 4 * Mi, "ephemeral-storage": Gi},
    ),
    (
        "rounded-after-summing",
        {"containers": [ctr({"cpu": "0.4m"}), ctr({"cpu": "0.4m"})]},
        {"cpu": 1},  # Kubernetes sums exact quantities, then rounds up once
    ),
]


@pytest.mark.parametrize(
    ("spec", "expected"), [c[1:] for c in POD_CASES], ids=[c[0] for c in POD_CASES]
)
def test_pod_requests(spec: dict[str, Any], expected: dict[str, int]) -> None:
    got = pod_requests(spec)
    assert {k: v for k, v in got.items() if v} == {k: v for k, v in expected.items() if v}


def test_pod_requests_error_names_init_container_field() -> None:
    spec = {"initContainers": [ctr(), ctr({"cpu": "-1"})]}
    field = "spec.initContainers[1].resources.requests.cpu"
    with pytest.raises(QuantityError, match=f"^{re.escape(field)}: must be non-negative"):
        pod_requests(spec)


def test_pod_requests_error_names_overhead_field() -> None:
    with pytest.raises(QuantityError, match=r"^spec\.overhead\.memory: must be non-negative"):
        pod_requests({"overhead": {"memory": "-1"}})


NONZERO_CASES: list[tuple[str, dict[str, Any], tuple[int, int]]] = [
    ("empty-pod", {}, (0, 0)),
    ("best-effort", {"containers": [ctr()]}, (100, DEFAULT_MEMORY_REQUEST)),
    ("two-best-effort", {"containers": [ctr(), ctr()]}, (200, 2 * DEFAULT_MEMORY_REQUEST)),
    ("cpu-only", {"containers": [ctr({"cpu": "1"})]}, (1000, 200 * Mi)),
    ("memory-only", {"containers": [ctr({"memory": "1Gi"})]}, (100, Gi)),
    ("explicit-zero-kept", {"containers": [ctr({"cpu": "0", "memory": "0"})]}, (0, 0)),
    ("limits-only", {"containers": [ctr(limits={"cpu": "2"})]}, (2000, 200 * Mi)),
    (
        "init-defaults",
        {"initContainers": [ctr({"memory": "1Gi"})], "containers": [ctr()]},
        (100, Gi),
    ),
    (
        "sidecar-defaults",
        {"initContainers": [ctr(sidecar=True)], "containers": [ctr({"cpu": "1"})]},
        (1100, 400 * Mi),
    ),
    (
        "overhead-as-is",
        {"containers": [ctr()], "overhead": {"cpu": "50m", "memory": "1Mi"}},
        (150, 201 * Mi),
    ),
]


@pytest.mark.parametrize(
    ("spec", "expected"), [c[1:] for c in NONZERO_CASES], ids=[c[0] for c in NONZERO_CASES]
)
def test_pod_nonzero_requests(spec: dict[str, Any], expected: tuple[int, int]) -> None:
    assert pod_nonzero_requests(spec) == expected


HOST_PORT_CASES: list[tuple[str, dict[str, Any], list[tuple[str, str, int]]]] = [
    ("no-ports", {"containers": [ctr()]}, []),
    ("container-port-only", {"containers": [ctr(ports=[{"containerPort": 80}])]}, []),
    (
        "defaults",
        {"containers": [ctr(ports=[{"containerPort": 80, "hostPort": 8080}])]},
        [("0.0.0.0", "TCP", 8080)],
    ),
    (
        "explicit-ip-and-protocol",
        {
            "containers": [
                ctr(ports=[{"hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"}]),
                ctr(ports=[{"hostPort": 0}, {"hostPort": 9000, "protocol": "SCTP"}]),
            ]
        },
        [("10.0.0.1", "UDP", 53), ("0.0.0.0", "SCTP", 9000)],
    ),
    (
        "sidecar-ports-count-init-ports-do-not",
        {
            "initContainers": [
                ctr(ports=[{"hostPort": 1}]),
                ctr(ports=[{"hostPort": 2}], sidecar=True),
            ],
            "containers": [ctr(ports=[{"hostPort": 3}])],
        },
        [("0.0.0.0", "TCP", 2), ("0.0.0.0", "TCP", 3)],
    ),
    ("null-ports", {"containers": [{"ports": None}]}, []),
]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [c[1:] for c in HOST_PORT_CASES],
    ids=[c[0] for c in HOST_PORT_CASES],
)
def test_pod_host_ports(spec: dict[str, Any], expected: list[tuple[str, str, int]]) -> None:
    assert pod_host_ports(spec) == expected


@pytest.mark.parametrize(
    ("spec", "expected"), [c[1:] for c in NONZERO_CASES], ids=[c[0] for c in NONZERO_CASES]
)
def test_requests_and_nonzero_from_one_parse(
    spec: dict[str, Any], expected: tuple[int, int]
) -> None:
    """What PodResources uses: both aggregations from one parse, as each alone."""
    assert (t := pod_request_totals(spec)) and (t.requests, t.nonzero, t.scored) == (
        pod_requests(spec),
        expected,
        expected,
    )
