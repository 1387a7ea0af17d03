"""Pod-level resources (spec.resources, KEP-2837): the API server's defaulting, PodRequests
and PodLimits with them, and the non-zero requests NodeInfo and scoring use."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.api.resources import (
    DEFAULT_MEMORY_REQUEST,
    PodRequestTotals,
    pod_level_resources,
    pod_limits,
    pod_request_totals,
    pod_requests,
)
from tests.builders import make_container as ctr
from tests.builders import requirements

Mi = 1024 * 1024
Gi = 1024 * Mi
DEFAULT_MEMORY = DEFAULT_MEMORY_REQUEST
MANIFEST = Path(__file__).resolve().parents[1] / "data" / "manifests" / "pod-level-resources.yaml"


def docs_pod() -> dict[str, Any]:
    """pod-level-resources.yaml from the Kubernetes documentation, unchanged."""
    pod: dict[str, Any] = yaml.safe_load(MANIFEST.read_text())
    return pod


def spec(
    *containers: dict[str, Any],
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A PodSpec with these containers and pod-level requests and limits."""
    return {"containers": list(containers), "resources": requirements(requests, limits), **fields}


# (name, spec, requests, NodeInfo's non-zero (cpu, memory), scoring's (cpu, memory))
TOTALS: list[tuple[str, dict[str, Any], dict[str, int], tuple[int, int], tuple[int, int]]] = [
    (
        "docs-manifest: the pod's 1 cpu, not its containers' 500m",
        docs_pod()["spec"],
        {"cpu": 1000, "memory": 100 * Mi},
        (1000, 100 * Mi),
        (1000, 100 * Mi),
    ),
    (
        "pod-level cpu only: memory defaults per container, as without pod-level",
        spec(ctr({"cpu": "500m"}), ctr(), requests={"cpu": "1"}),
        {"cpu": 1000},
        (1000, 2 * DEFAULT_MEMORY),
        (1000, 2 * DEFAULT_MEMORY),
    ),
    (
        # NodeInfo defaults cpu only when no container requests it; scoring defaults
        # each container missing it (calculateResource vs calculatePodResourceRequest).
        "pod-level memory only: a container without cpu counts for scoring only",
        spec(ctr({"cpu": "500m"}), ctr(), requests={"memory": "1Gi"}),
        {"cpu": 500, "memory": Gi},
        (500, Gi),
        (600, Gi),
    ),
    (
        "overhead on top of pod-level requests",
        spec(ctr(), requests={"cpu": "1"}, overhead={"cpu": "250m", "memory": "10Mi"}),
        {"cpu": 1250, "memory": 10 * Mi},
        (1250, 10 * Mi),
        (1250, DEFAULT_MEMORY + 10 * Mi),
    ),
    (
        "explicit zero at pod level is not defaulted",
        spec(ctr(), requests={"cpu": "0", "memory": "0"}),
        {"cpu": 0, "memory": 0},
        (0, 0),
        (0, 0),
    ),
    (
        "pod-level limits default the requests: containers' total, else the limit",
        spec(ctr({"cpu": "500m"}), limits={"cpu": "2", "memory": "1Gi"}),
        {"cpu": 500, "memory": Gi},
        (500, Gi),
        (500, Gi),
    ),
    (
        "pod-level requests replace the init containers' peak",
        spec(
            ctr({"cpu": "1"}),
            requests={"cpu": "3"},
            initContainers=[ctr({"cpu": "5"}), ctr({"cpu": "1"}, sidecar=True)],
        ),
        {"cpu": 3000},
        (3000, 2 * DEFAULT_MEMORY),
        (3000, 2 * DEFAULT_MEMORY),
    ),
    (
        "hugepages at pod level",
        spec(
            ctr({"hugepages-2Mi": "2Mi"}, {"hugepages-2Mi": "2Mi"}),
            requests={"cpu": "1", "hugepages-2Mi": "4Mi"},
            limits={"hugepages-2Mi": "4Mi"},
        ),
        {"cpu": 1000, "hugepages-2Mi": 4 * Mi},
        (1000, DEFAULT_MEMORY),
        (1000, DEFAULT_MEMORY),
    ),
    (
        "only unsupported names at pod level: not set",
        spec(ctr({"ephemeral-storage": "1Gi"}), requests={"ephemeral-storage": "2Gi"}),
        {"ephemeral-storage": Gi},
        (100, DEFAULT_MEMORY),
        (100, DEFAULT_MEMORY),
    ),
    (
        "extended resources stay the containers'",
        spec(ctr({"example.com/gpu": "2"}), requests={"cpu": "1", "memory": "1Gi"}),
        {"cpu": 1000, "memory": Gi, "example.com/gpu": 2},
        (1000, Gi),
        (1000, Gi),
    ),
]


@pytest.mark.parametrize(
    ("spec_", "requests", "nonzero", "scored"),
    [c[1:] for c in TOTALS],
    ids=[c[0] for c in TOTALS],
)
def test_pod_request_totals(
    spec_: dict[str, Any], requests: dict[str, int], nonzero: tuple, scored: tuple
) -> None:
    assert pod_request_totals(spec_) == PodRequestTotals(requests, nonzero, scored)
    assert pod_requests(spec_) == requests


def test_defaulting_fills_only_what_the_pod_left_out() -> None:
    level = pod_level_resources(
        spec(
            ctr({"cpu": "200m"}, {"hugepages-1Gi": "1Gi"}),
            requests={"memory": "1Gi"},
            limits={"memory": "2Gi", "cpu": "1"},
        )
    )
    gi = 1024**3
    assert level.limits == {"memory": 2 * gi, "cpu": 1, "hugepages-1Gi": gi}
    # cpu from the containers' total; hugepages from the (defaulted) pod-level limit.
    assert level.requests == {"memory": gi, "cpu": Fraction(1, 5), "hugepages-1Gi": gi}


def test_pod_limits_prefer_pod_level() -> None:
    assert pod_limits(docs_pod()["spec"]) == {"cpu": 1000, "memory": 200 * Mi}
    assert pod_limits(spec(ctr(limits={"cpu": "2"}), requests={"memory": "1Gi"})) == {"cpu": 2000}
