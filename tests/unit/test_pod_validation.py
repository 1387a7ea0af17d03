"""What the API server's validation refuses in a pod spec on create, in its words
(pkg/apis/core/validation, 1.34): one named case per rule, each the error list the API
server gives for it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from shared.api.pod_validation import pod_spec_errors, port_name_errors
from shared.api.validation import qualified_name_errors
from shared.tools.synthetic import make_pod

DNS_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
TERM = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
TSC = "spec.topologySpreadConstraints[0]"


def spec(**fields: Any) -> dict[str, Any]:
    """make_pod's spec (one container "app" with requests) with `fields` set."""
    base = copy.deepcopy(make_pod("p")["spec"])
    base.update(fields)
    return base


def container(**fields: Any) -> dict[str, Any]:
    return {"name": "app", "image": "registry.k8s.io/pause:3.9", **fields}


def tsc(**fields: Any) -> dict[str, Any]:
    return {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", **fields}


def node_term(*expressions: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": list(expressions)}]
            }
        }
    }


CASES: dict[str, tuple[dict[str, Any], list[str]]] = {
    # containers
    "no containers": ({"schedulerName": "default-scheduler"}, ["spec.containers: Required value"]),
    "an empty container list": (spec(containers=[]), ["spec.containers: Required value"]),
    "a container without name or image": (
        spec(containers=[{"resources": {}}]),
        ["spec.containers[0].name: Required value", "spec.containers[0].image: Required value"],
    ),
    "a container name with capitals": (
        spec(containers=[container(name="App")]),
        [f'spec.containers[0].name: Invalid value: "App": {DNS_LABEL_MSG}'],
    ),
    "a container name with dots": (
        spec(containers=[container(name="a.b")]),
        ['spec.containers[0].name: Invalid value: "a.b": must not contain dots'],
    ),
    "two containers of one name": (
        spec(containers=[container(), container()]),
        ['spec.containers[1].name: Duplicate value: "app"'],
    ),
    "an init container named as a container": (
        spec(initContainers=[container()]),
        ['spec.initContainers[0].name: Duplicate value: "app"'],
    ),
    "imagePullPolicy": (
        spec(containers=[container(imagePullPolicy="Sometimes")]),
        [
            'spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes": '
            'supported values: "Always", "IfNotPresent", "Never"'
        ],
    ),
    "terminationMessagePolicy": (
        spec(containers=[container(terminationMessagePolicy="Log")]),
        [
            'spec.containers[0].terminationMessagePolicy: Unsupported value: "Log": '
            'supported values: "File", "FallbackToLogsOnError"'
        ],
    ),
    "a container's restartPolicy": (
        spec(containers=[container(restartPolicy="Always")]),
        ["spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers"],
    ),
    "an init container's restartPolicy": (
        spec(initContainers=[container(name="init", restartPolicy="Never")]),
        [
            'spec.initContainers[0].restartPolicy: Unsupported value: "Never": '
            'supported values: "Always"'
        ],
    ),
    "a probe on an init container that is no sidecar": (
        spec(initContainers=[container(name="init", livenessProbe={"exec": {"command": ["x"]}})]),
        [
            "spec.initContainers[0].livenessProbe: Forbidden: may not be set for init "
            "containers without restartPolicy=Always"
        ],
    ),
    # ports
    "containerPort 0": (
        spec(containers=[container(ports=[{"containerPort": 0}])]),
        ["spec.containers[0].ports[0].containerPort: Required value"],
    ),
    "containerPort 65536": (
        spec(containers=[container(ports=[{"containerPort": 65536}])]),
        [
            "spec.containers[0].ports[0].containerPort: Invalid value: 65536: "
            "must be between 1 and 65535, inclusive"
        ],
    ),
    "hostPort -1": (
        spec(containers=[container(ports=[{"containerPort": 80, "hostPort": -1}])]),
        [
            "spec.containers[0].ports[0].hostPort: Invalid value: -1: "
            "must be between 1 and 65535, inclusive"
        ],
    ),
    "protocol": (
        spec(containers=[container(ports=[{"containerPort": 80, "protocol": "ICMP"}])]),
        [
            'spec.containers[0].ports[0].protocol: Unsupported value: "ICMP": '
            'supported values: "SCTP", "TCP", "UDP"'
        ],
    ),
    "a port name twice": (
        spec(
            containers=[
                container(
                    ports=[
                        {"name": "http", "containerPort": 80},
                        {"name": "http", "containerPort": 81},
                    ]
                )
            ]
        ),
        ['spec.containers[0].ports[1].name: Duplicate value: "http"'],
    ),
    "two containers on one host port": (
        spec(
            containers=[
                container(ports=[{"containerPort": 80, "hostPort": 8080}]),
                container(name="b", ports=[{"containerPort": 81, "hostPort": 8080}]),
            ]
        ),
        ['spec.containers[1].ports[0].hostPort: Duplicate value: "TCP//8080"'],
    ),
    # the pod's policies
    "restartPolicy": (
        spec(restartPolicy="Sometimes"),
        [
            'spec.restartPolicy: Unsupported value: "Sometimes": supported values: '
            '"Always", "OnFailure", "Never"'
        ],
    ),
    "dnsPolicy": (
        spec(dnsPolicy="Cluster"),
        [
            'spec.dnsPolicy: Unsupported value: "Cluster": supported values: '
            '"ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"'
        ],
    ),
    "dnsPolicy None without dnsConfig": (
        spec(dnsPolicy="None"),
        ["spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None"],
    ),
    "preemptionPolicy": (
        spec(preemptionPolicy="Sometimes"),
        [
            'spec.preemptionPolicy: Unsupported value: "Sometimes": supported values: '
            '"PreemptLowerPriority", "Never"'
        ],
    ),
    "an empty preemptionPolicy": (
        spec(preemptionPolicy=""),
        ["spec.preemptionPolicy: Required value"],
    ),
    "activeDeadlineSeconds 0": (
        spec(activeDeadlineSeconds=0),
        [
            "spec.activeDeadlineSeconds: Invalid value: 0: "
            "must be between 1 and 2147483647, inclusive"
        ],
    ),
    "os": (
        spec(os={"name": "plan9"}),
        ['spec.os: Unsupported value: "plan9": supported values: "linux", "windows"'],
    ),
    "a scheduling gate twice": (
        spec(schedulingGates=[{"name": "example.com/wait"}, {"name": "example.com/wait"}]),
        ['spec.schedulingGates[1]: Duplicate value: "example.com/wait"'],
    ),
    # tolerations
    "a toleration operator": (
        spec(tolerations=[{"key": "k", "operator": "Equals", "value": "v"}]),
        [
            'spec.tolerations[0].operator: Unsupported value: "Equals": supported values: '
            '"Equal", "Exists"'
        ],
    ),
    "a toleration effect": (
        spec(tolerations=[{"key": "k", "operator": "Exists", "effect": "NoRun"}]),
        [
            'spec.tolerations[0].effect: Unsupported value: "NoRun": supported values: '
            '"NoSchedule", "PreferNoSchedule", "NoExecute"'
        ],
    ),
    "a toleration without key that is not Exists": (
        spec(tolerations=[{"operator": "Equal", "value": "v"}]),
        [
            'spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists '
            'when `key` is empty, which means "match all values and all keys"'
        ],
    ),
    "a value with Exists": (
        spec(tolerations=[{"key": "k", "operator": "Exists", "value": "v"}]),
        [
            'spec.tolerations[0].operator: Invalid value: "v": value must be empty when '
            "`operator` is 'Exists'"
        ],
    ),
    "tolerationSeconds without NoExecute": (
        spec(tolerations=[{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]),
        [
            'spec.tolerations[0].effect: Invalid value: "NoSchedule": effect must be '
            "'NoExecute' when `tolerationSeconds` is set"
        ],
    ),
    # topology spread
    "maxSkew 0": (
        spec(topologySpreadConstraints=[tsc(maxSkew=0)]),
        [f"{TSC}.maxSkew: Invalid value: 0: must be greater than zero"],
    ),
    "whenUnsatisfiable": (
        spec(topologySpreadConstraints=[tsc(whenUnsatisfiable="Never")]),
        [
            f'{TSC}.whenUnsatisfiable: Unsupported value: "Never": supported values: '
            '"DoNotSchedule", "ScheduleAnyway"'
        ],
    ),
    "no topologyKey": (
        spec(topologySpreadConstraints=[tsc(topologyKey="")]),
        [f"{TSC}.topologyKey: Required value: can not be empty"],
    ),
    "minDomains 0": (
        spec(topologySpreadConstraints=[tsc(minDomains=0)]),
        [f"{TSC}.minDomains: Invalid value: 0: must be greater than zero"],
    ),
    "minDomains with ScheduleAnyway": (
        spec(topologySpreadConstraints=[tsc(minDomains=2, whenUnsatisfiable="ScheduleAnyway")]),
        [
            f"{TSC}.minDomains: Invalid value: 2: can only use minDomains if "
            "whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway"
        ],
    ),
    "nodeAffinityPolicy and nodeTaintsPolicy": (
        spec(topologySpreadConstraints=[tsc(nodeAffinityPolicy="Maybe", nodeTaintsPolicy="No")]),
        [
            f'{TSC}.nodeAffinityPolicy: Unsupported value: "Maybe": supported values: '
            '"Honor", "Ignore"',
            f'{TSC}.nodeTaintsPolicy: Unsupported value: "No": supported values: "Honor", "Ignore"',
        ],
    ),
    "one topology key and action twice": (
        spec(topologySpreadConstraints=[tsc(), tsc(maxSkew=2)]),
        [f'{TSC}.{{topologyKey, whenUnsatisfiable}}: Duplicate value: "{{zone, DoNotSchedule}}"'],
    ),
    "a selector operator": (
        spec(
            topologySpreadConstraints=[
                tsc(labelSelector={"matchExpressions": [{"key": "app", "operator": "Has"}]})
            ]
        ),
        [
            f'{TSC}.labelSelector.matchExpressions[0].operator: Invalid value: "Has": '
            "not a valid selector operator"
        ],
    ),
    # affinity
    "a node selector operator": (
        spec(affinity=node_term({"key": "disk", "operator": "Equals", "values": ["ssd"]})),
        [
            f'{TERM}.nodeSelectorTerms[0].matchExpressions[0].operator: Invalid value: "Equals": '
            "not a valid selector operator"
        ],
    ),
    "In without values": (
        spec(affinity=node_term({"key": "disk", "operator": "In"})),
        [
            f"{TERM}.nodeSelectorTerms[0].matchExpressions[0].values: Required value: must be "
            "specified when `operator` is 'In' or 'NotIn'"
        ],
    ),
    "Gt with two values": (
        spec(affinity=node_term({"key": "cpus", "operator": "Gt", "values": ["1", "2"]})),
        [
            f"{TERM}.nodeSelectorTerms[0].matchExpressions[0].values: Required value: must be "
            "specified single value when `operator` is 'Lt' or 'Gt'"
        ],
    ),
    "a required node affinity without terms": (
        spec(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}),
        [f"{TERM}.nodeSelectorTerms: Required value: must have at least one node selector term"],
    ),
    "a preferred term's weight": (
        spec(
            affinity={
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 101, "preference": {}}
                    ]
                }
            }
        ),
        [
            "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
            ".weight: Invalid value: 101: must be in the range 1-100"
        ],
    ),
    "a node field other than metadata.name": (
        spec(
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchFields": [{"key": "spec.x", "operator": "In", "values": ["a"]}]}
                        ]
                    }
                }
            }
        ),
        [
            f'{TERM}.nodeSelectorTerms[0].matchFields[0].key: Invalid value: "spec.x": '
            "not a valid field selector key"
        ],
    ),
    "matchLabelKeys without a labelSelector": (
        spec(
            affinity={
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"topologyKey": "zone", "matchLabelKeys": ["app"]}
                    ]
                }
            }
        ),
        [
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
            ".matchLabelKeys: Forbidden: must not be specified when labelSelector is not set"
        ],
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_the_api_servers_errors(name: str) -> None:
    given, expected = CASES[name]
    assert pod_spec_errors(given) == expected


def test_a_pod_affinity_term_without_topology_key() -> None:
    """Required, then the label-name grammar of "" (two messages), as upstream."""
    term = {"labelSelector": {"matchLabels": {"app": "db"}}}
    got = pod_spec_errors(
        spec(
            affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        )
    )
    at = "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
    assert got == [f"{at}.topologyKey: Required value: can not be empty"] + [
        f'{at}.topologyKey: Invalid value: "": {m}' for m in qualified_name_errors("")
    ]


VALID = {
    "make_pod's pod": spec(),
    "enums left empty (defaulted)": spec(
        restartPolicy="",
        dnsPolicy="",
        containers=[container(imagePullPolicy="", ports=[{"containerPort": 80, "protocol": ""}])],
    ),
    "a sidecar with probes": spec(
        initContainers=[
            container(
                name="proxy", restartPolicy="Always", readinessProbe={"tcpSocket": {"port": 1}}
            )
        ]
    ),
    "a toleration of everything": spec(tolerations=[{"operator": "Exists"}]),
    "every enum at a valid value": spec(
        restartPolicy="OnFailure",
        dnsPolicy="None",
        dnsConfig={"nameservers": ["1.1.1.1"]},
        preemptionPolicy="Never",
        os={"name": "linux"},
        topologySpreadConstraints=[
            tsc(minDomains=3, nodeAffinityPolicy="Honor", nodeTaintsPolicy="Ignore"),
            tsc(whenUnsatisfiable="ScheduleAnyway"),
        ],
        tolerations=[{"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute"}],
    ),
    "values of the wrong JSON type (the models' to refuse)": spec(
        containers=[container(ports=[{"containerPort": "80"}, "x"]), 7],
        tolerations="all",
        topologySpreadConstraints=[tsc(maxSkew="1", labelSelector={"matchLabels": {"a": 1}})],
        affinity=[],
    ),
}


@pytest.mark.parametrize("name", VALID)
def test_what_the_api_server_accepts(name: str) -> None:
    assert pod_spec_errors(VALID[name]) == []


def test_a_template_reports_at_its_own_path() -> None:
    assert pod_spec_errors({"restartPolicy": "Always"}, "spec.template.spec") == [
        "spec.template.spec.containers: Required value"
    ]


def test_the_node_selector_is_checked_only_when_asked() -> None:
    bad = spec(nodeSelector={"disk": "ssd!"})
    assert pod_spec_errors(bad) == []
    assert pod_spec_errors(bad, node_selector=True)[0].startswith(
        'spec.nodeSelector: Invalid value: "ssd!": '
    )


@pytest.mark.parametrize(
    ("name", "problems"),
    [
        ("http", []),
        ("h2c-9", []),
        (
            "HTTP",
            [
                "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "must contain at least one letter (a-z)",
            ],
        ),
        ("a--b", ["must not contain consecutive hyphens"]),
        ("-ab", ["must not begin or end with a hyphen"]),
        ("abcdefghijklmnop", ["must be no more than 15 characters"]),
        ("8080", ["must contain at least one letter (a-z)"]),
    ],
)
def test_port_names(name: str, problems: list[str]) -> None:
    assert port_name_errors(name) == problems
