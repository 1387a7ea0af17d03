"""Pod-level resources (spec.resources, KEP-2837): the API server's defaulting, PodRequests
and PodLimits with them, the non-zero requests NodeInfo and scoring use, and the API
server's validation messages."""

from __future__ import annotations

import copy
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.api.events import BadEvent, decode_cluster_event
from shared.api.models import Pod
from shared.api.podresources import pod_resources_errors
from shared.api.resources import (
    DEFAULT_MEMORY_REQUEST,
    PodRequestTotals,
    pod_level_resources,
    pod_limits,
    pod_request_totals,
    pod_requests,
)
from shared.tools.cli.apply import Current, plan
from shared.tools.cli.manifests import ManifestError, parse_manifests
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


# --- validation ---------------------------------------------------------------------


def test_docs_manifest_is_valid() -> None:
    assert pod_resources_errors(docs_pod()["spec"]) == []
    Pod.model_validate(docs_pod())


ABOVE_CPU_LIMIT = (
    'spec.resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1'
)
VALIDATION: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "requests below the containers' total",
        spec(
            ctr({"cpu": "1", "memory": "6Gi"}),
            ctr({"cpu": "500m"}),
            requests={"cpu": "1", "memory": "576Mi"},
        ),
        [
            'spec.resources.requests[cpu]: Invalid value: "1": must be greater than or equal '
            "to aggregate container requests of 1500m",
            'spec.resources.requests[memory]: Invalid value: "576Mi": must be greater than or '
            "equal to aggregate container requests of 6Gi",
        ],
    ),
    (
        "request above the limit",
        spec(ctr(), requests={"cpu": "2"}, limits={"cpu": "1"}),
        [ABOVE_CPU_LIMIT],
    ),
    (
        "defaulted request above the limit (KEP-2837 example 2)",
        spec(
            ctr(limits={"memory": "60Gi"}),
            ctr(limits={"memory": "60Gi"}),
            limits={"memory": "100Gi"},
        ),
        [
            'spec.resources.requests: Invalid value: "120Gi": must be less than or equal to '
            "memory limit of 100Gi",
        ],
    ),
    (
        "container limit above the pod's",
        spec(ctr(limits={"cpu": "2"}), requests={"cpu": "2"}, limits={"cpu": "1"}),
        [
            ABOVE_CPU_LIMIT,
            'spec.resources.containers[0][cpu].limits: Invalid value: "2": must be less than or '
            "equal to pod limits of 1",
        ],
    ),
    (
        "unsupported and non-standard names",
        spec(
            ctr(), requests={"ephemeral-storage": "1Gi", "foo": "1"}, limits={"example.com/gpu": 1}
        ),
        [
            'spec.resources.limits[example.com/gpu]: Unsupported value: "example.com/gpu": '
            'supported values: "cpu", "hugepages-", "memory"',
            'spec.resources.requests[ephemeral-storage]: Unsupported value: "ephemeral-storage": '
            'supported values: "cpu", "hugepages-", "memory"',
            'spec.resources.requests[foo]: Invalid value: "foo": must be a standard resource type '
            "or fully qualified",
        ],
    ),
    (
        "claims",
        {"containers": [ctr()], "resources": {"claims": [{"name": "gpu"}]}},
        ["spec.resources.claims: Forbidden: claims cannot be set for Resources at pod-level"],
    ),
    (
        "hugepages alone, not whole pages, without a limit",
        spec(ctr(), requests={"hugepages-2Mi": "3Mi"}),
        [
            'spec.resources.requests[hugepages-2Mi]: Invalid value: "3Mi": 3Mi is not positive '
            "integer multiple of hugepages-2Mi",
            "spec.resources.limits: Required value: Limit must be set for non overcommitable "
            "resources",
            "spec.resources: Forbidden: HugePages require cpu or memory",
        ],
    ),
    (
        "hugepages request and limit must be equal",
        spec(ctr(), requests={"cpu": "1", "hugepages-2Mi": "2Mi"}, limits={"hugepages-2Mi": "4Mi"}),
        [
            'spec.resources.requests: Invalid value: "2Mi": must be equal to hugepages-2Mi '
            "limit of 4Mi"
        ],
    ),
]


@pytest.mark.parametrize(
    ("spec_", "errors"), [c[1:] for c in VALIDATION], ids=[c[0] for c in VALIDATION]
)
def test_validation_messages(spec_: dict[str, Any], errors: list[str]) -> None:
    assert pod_resources_errors(spec_) == errors


def test_bad_pod_level_quantity_names_its_field() -> None:
    errors = pod_resources_errors(spec(ctr(), requests={"cpu": "abc"}))
    assert errors == [
        "spec.resources.requests.cpu: invalid quantity 'abc': must match the Kubernetes "
        "quantity grammar (e.g. 100m, 1.5Gi, 2e3)"
    ]


def test_the_door_refuses_what_the_api_server_refuses() -> None:
    subject = "ksched.cluster.pods.pod-resources-example.pod-resources-demo"

    def decode(pod: dict[str, Any]) -> Any:
        data = json.dumps({"type": "ADDED", "object": pod}).encode()
        return decode_cluster_event(subject, data, None, 1)

    assert decode(docs_pod()).obj.spec.containers[0].name == "pod-resources-demo-ctr-1"
    bad = copy.deepcopy(docs_pod())
    bad["spec"]["resources"]["requests"]["memory"] = "300Mi"
    with pytest.raises(BadEvent) as info:
        decode(bad)
    assert str(info.value) == (
        'spec.resources.requests: Invalid value: "300Mi": must be less than or equal to memory '
        "limit of 200Mi"
    )


def test_apply_refuses_what_the_api_server_refuses() -> None:
    text = MANIFEST.read_text()
    (applied,) = plan(parse_manifests(text, "pod-level-resources.yaml"), Current(), "")
    assert [a.obj["metadata"]["name"] for a in applied.actions] == ["pod-resources-demo"]
    bad = text.replace('cpu: "0.5"\n        memory: "100Mi"', 'cpu: "2"\n        memory: "100Mi"')
    with pytest.raises(ManifestError) as err:
        plan(parse_manifests(bad, "bad.yaml"), Current(), "")
    assert str(err.value) == (
        'bad.yaml: document 0: spec.resources.containers[0][cpu].limits: Invalid value: "2": '
        "must be less than or equal to pod limits of 1"
    )


def test_a_malformed_spec_resources_is_reported_once() -> None:
    assert pod_resources_errors({"resources": {"requests": ["cpu"]}}) == [
        "spec.resources.requests: must be a map of resource name to quantity"
    ]
    assert pod_resources_errors({"resources": "1"}) == [
        "spec.resources: must be an object with requests and limits"
    ]
