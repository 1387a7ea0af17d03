"""Fluent builders for the Pod and Node objects tests publish or feed to the cache.

    make_pod("a").req(cpu="100m", memory="500").host_port(80).anti_affinity("app", "web")
    make_node("n1").capacity(cpu="4", memory="8Gi", pods=10).zone("zone-a").image("nginx", 10)

They build the Kubernetes JSON shape (camelCase), as users publish it.
"""

from __future__ import annotations

import copy
from typing import Any

from shared.framework.interface import ClusterObjects
from shared.framework.types import NodeInfo, PodInfo
from shared.podgroups import MIN_AVAILABLE_ANNOTATION, POD_GROUP_LABEL
from shared.tools.synthetic import HOSTNAME, ZONE, add_anti_affinity, add_spread

__all__ = [
    "HOSTNAME",
    "ZONE",
    "NodeBuilder",
    "PodBuilder",
    "cluster_objects",
    "make_container",
    "make_node",
    "make_pod",
    "requirements",
]


class PodBuilder:
    def __init__(self, name: str, namespace: str = "default") -> None:
        self._obj: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{namespace}-{name}",
                "labels": {},
            },
            "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]},
        }

    @property
    def _spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self._obj["spec"]
        return spec

    @property
    def _container(self) -> dict[str, Any]:
        container: dict[str, Any] = self._spec["containers"][0]
        return container

    def uid(self, uid: str) -> PodBuilder:
        self._obj["metadata"]["uid"] = uid
        return self

    def label(self, key: str, value: str) -> PodBuilder:
        self._obj["metadata"]["labels"][key] = value
        return self

    def annotation(self, key: str, value: str) -> PodBuilder:
        self._obj["metadata"].setdefault("annotations", {})[key] = value
        return self

    def owner(self, kind: str, name: str, api_version: str = "apps/v1") -> PodBuilder:
        """Controlled by `kind` `name` (an ownerReference with controller: true), as
        kube's st.MakePod().OwnerReference makes it."""
        ref = {"apiVersion": api_version, "kind": kind, "name": name, "controller": True}
        self._obj["metadata"]["ownerReferences"] = [{**ref, "uid": f"uid-{kind}-{name}"}]
        return self

    def gang(self, group: str, min_available: int | None = None) -> PodBuilder:
        """A member of pod group `group` (Coscheduling), with the min-available
        annotation when given."""
        self.label(POD_GROUP_LABEL, group)
        if min_available is not None:
            self.annotation(MIN_AVAILABLE_ANNOTATION, str(min_available))
        return self

    def workload(self, name: str, pod_group: str, replica: str = "") -> PodBuilder:
        """A pod of Workload `name`'s pod group (GangScheduling's spec.workloadRef)."""
        ref = {"name": name, "podGroup": pod_group}
        if replica:
            ref["podGroupReplicaKey"] = replica
        self._obj["spec"]["workloadRef"] = ref
        return self

    def scheduling_group(self, pod_group: str) -> PodBuilder:
        """A pod of the v1alpha2 PodGroup object `pod_group` (spec.schedulingGroup)."""
        self._obj["spec"]["schedulingGroup"] = {"podGroupName": pod_group}
        return self

    def priority(self, value: int) -> PodBuilder:
        self._spec["priority"] = value
        return self

    def req(self, **requests: str) -> PodBuilder:
        """Container requests; `example_com_foo="3"` names the resource example.com/foo."""
        resources = self._container.setdefault("resources", {}).setdefault("requests", {})
        for name, quantity in requests.items():
            resources[name.replace("_com_", ".com/").replace("_", "-")] = quantity
        return self

    def host_port(self, port: int, host_ip: str = "", protocol: str = "") -> PodBuilder:
        entry: dict[str, Any] = {"containerPort": port, "hostPort": port}
        if host_ip:
            entry["hostIP"] = host_ip
        if protocol:
            entry["protocol"] = protocol
        self._container.setdefault("ports", []).append(entry)
        return self

    def image(self, name: str) -> PodBuilder:
        self._container["image"] = name
        return self

    def node(self, name: str) -> PodBuilder:
        self._spec["nodeName"] = name
        return self

    def preempt_never(self) -> PodBuilder:
        self._spec["preemptionPolicy"] = "Never"
        return self

    def start_time(self, rfc3339: str) -> PodBuilder:
        self._obj.setdefault("status", {})["startTime"] = rfc3339
        return self

    def nominated(self, node: str) -> PodBuilder:
        self._obj.setdefault("status", {})["nominatedNodeName"] = node
        return self

    def anti_affinity(self, key: str, value: str, topology_key: str = HOSTNAME) -> PodBuilder:
        """Required anti-affinity to pods labelled key=value in the pod's namespace."""
        add_anti_affinity(self._obj, key, value, topology_key)
        return self

    def spread(
        self, max_skew: int, topology_key: str, key: str, value: str, *, hard: bool = True
    ) -> PodBuilder:
        """A topology spread constraint over pods labelled key=value."""
        add_spread(self._obj, max_skew, topology_key, key, value, hard=hard)
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)

    def info(self, version: int = 0) -> PodInfo:
        return PodInfo.of(self.obj(), version)


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._obj: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {HOSTNAME: name}},
            "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
        }

    def capacity(self, **resources: str | int) -> NodeBuilder:
        capacity = self._obj["status"]["capacity"]
        for name, quantity in resources.items():
            capacity[name.replace("_com_", ".com/").replace("_", "-")] = str(quantity)
        return self

    def zone(self, zone: str) -> NodeBuilder:
        self._obj["metadata"]["labels"][ZONE] = zone
        return self

    def label(self, key: str, value: str) -> NodeBuilder:
        self._obj["metadata"]["labels"][key] = value
        return self

    def image(self, name: str, size: int) -> NodeBuilder:
        self._obj["status"].setdefault("images", []).append({"names": [name], "sizeBytes": size})
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)

    def info(self) -> NodeInfo:
        info = NodeInfo(self._obj["metadata"]["name"])
        info.set_node(self.obj())
        return info


def requirements(
    requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A ResourceRequirements object with the parts given (a container's or the pod's)."""
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return resources


def make_container(
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    *,
    sidecar: bool = False,
    ports: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A container with these requests and limits; `sidecar`: a restartable init container."""
    container: dict[str, Any] = {
        "name": "c",
        "image": "i",
        "resources": requirements(requests, limits),
    }
    if sidecar:
        container["restartPolicy"] = "Always"
    if ports is not None:
        container["ports"] = ports
    return container


def cluster_objects(*raws: dict[str, Any]) -> ClusterObjects:
    """The objects plugins read besides nodes and pods (Namespaces, Services,
    controllers), from their Kubernetes JSON."""
    objects = ClusterObjects()
    for raw in raws:
        assert objects.add(raw), f"plugins read no {raw.get('kind')}"
    return objects


def make_pod(name: str, namespace: str = "default") -> PodBuilder:
    return PodBuilder(name, namespace)


def make_node(name: str) -> NodeBuilder:
    return NodeBuilder(name)
