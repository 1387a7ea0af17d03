"""Parsing real manifests, with the API server's defaulting."""

from __future__ import annotations

from fractions import Fraction

import pytest
import yaml
from pydantic import ValidationError

from shared.api.models import Node, Pod, describe_validation_error

POD_YAML = """
apiVersion: v1
kind: Pod
metadata:
  name: web-0
  labels: {app: web}
  creationTimestamp: "2026-11-21T10:00:00Z"
  managedFields: [{manager: kubectl}]
spec:
  containers:
  - name: app
    image: nginx:1.27
    resources:
      requests: {cpu: 250m, memory: 64Mi}
      limits: {cpu: 500m, memory: 128Mi, ephemeral-storage: 1Gi}
    ports: [{containerPort: 80, hostPort: 8080, hostIP: 10.0.0.1}]
  initContainers:
  - name: proxy
    image: envoy
    restartPolicy: Always
  tolerations: [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}]
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [a, b]}]
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule,
     labelSelector: {matchLabels: {app: web}}}
  schedulingGates: [{name: wait}]
  someFutureField: {x: 1}
status: {phase: Pending}
"""

NODE_YAML = """
apiVersion: v1
kind: Node
metadata: {name: node-1.example, labels: {kubernetes.io/hostname: node-1}}
spec:
  taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
status:
  capacity: {cpu: "4", memory: 16Gi, pods: "110", nvidia.com/gpu: "2"}
  images: [{names: ["nginx:1.27"], sizeBytes: 70000000}]
"""


def test_real_pod_manifest_parses_with_defaults() -> None:
    pod = Pod.model_validate(yaml.safe_load(POD_YAML))
    assert pod.metadata.namespace == "default"
    assert pod.spec.scheduler_name == "default-scheduler"
    assert pod.spec.priority == 0
    app = pod.spec.containers[0]
    assert app.resources.requests["cpu"] == Fraction(1, 4)
    # a limit without a request defaults the request
    assert app.resources.requests["ephemeral-storage"] == 1024**3
    assert app.ports[0].host_ip == "10.0.0.1"
    assert app.ports[0].protocol == "TCP"
    assert pod.spec.init_containers[0].restart_policy == "Always"
    assert pod.spec.tolerations[0].effect == "NoSchedule"
    assert pod.spec.affinity and pod.spec.affinity.node_affinity
    assert pod.spec.topology_spread_constraints[0].max_skew == 1
    assert pod.spec.scheduling_gates[0].name == "wait"
    assert pod.key == "default/web-0"


def test_node_allocatable_defaults_to_capacity() -> None:
    node = Node.model_validate(yaml.safe_load(NODE_YAML))
    assert node.allocatable["cpu"] == 4
    assert node.allocatable["nvidia.com/gpu"] == 2
    assert node.spec.taints[0].key == "dedicated"


def test_explicit_allocatable_is_kept() -> None:
    doc = yaml.safe_load(NODE_YAML)
    doc["status"]["allocatable"] = {"cpu": "3500m"}
    assert Node.model_validate(doc).allocatable == {"cpu": Fraction(7, 2)}


def test_null_fields_are_defaults() -> None:
    pod = Pod.model_validate(
        {
            "metadata": {"name": "p", "labels": None},
            "spec": {"schedulerName": None, "priority": None, "containers": []},
        }
    )
    assert pod.spec.scheduler_name == "default-scheduler"
    assert pod.spec.priority == 0
    assert pod.metadata.labels == {}


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        (
            {"spec": {"containers": [{"resources": {"requests": {"memory": "12xb"}}}]}},
            "spec.containers[0].resources.requests.memory",
        ),
        ({"spec": {"priority": "high"}}, "spec.priority"),
        ({"spec": {"tolerations": [{"operator": "Maybe"}]}}, "spec.tolerations[0].operator"),
        ({"spec": {"overhead": {"cpu": "-1"}}}, "spec.overhead.cpu"),
    ],
)
def test_errors_name_the_field(patch: dict, field: str) -> None:
    doc = {"metadata": {"name": "p"}, **patch}
    with pytest.raises(ValidationError) as info:
        Pod.model_validate(doc)
    assert describe_validation_error(info.value).startswith(field)
