"""PodInfo and NodeInfo: what plugins read (kube-scheduler's framework/types.go).

The cache owns the authoritative NodeInfos; workers hold snapshot copies built
from the records the cache writes to Redis. Both use these types so that the
Filter code that validates an assume is the code that chose the node.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from shared.api.models import Node, Pod
from shared.api.quantity import parse_nonnegative, resource_amount
from shared.api.resources import pod_host_ports, pod_requests_and_nonzero

HostPort = tuple[str, str, int]  # (hostIP, protocol, port)


@dataclass(frozen=True)
class PodResources:
    """What a pod takes from a node; computed once per pod version."""

    requests: dict[str, int]  # cpu in millicores, everything else in units
    nonzero_cpu: int  # with kube-scheduler's defaults for pods that request none
    nonzero_memory: int
    host_ports: tuple[HostPort, ...] = ()

    @classmethod
    def of(cls, raw_pod: dict[str, Any]) -> PodResources:
        spec = raw_pod.get("spec") or {}
        requests, (cpu, memory) = pod_requests_and_nonzero(spec)
        return cls(requests, cpu, memory, tuple(pod_host_ports(spec)))


class PodInfo:
    """A pod with what the cycle derives from it once: model, raw object, resources.

    `derived` holds per-plugin precomputations (parsed affinity terms, ...) so
    that a pod already on a node is not re-parsed for every pod scheduled.
    """

    __slots__ = ("__dict__", "derived", "pod", "raw", "resources", "version")

    def __init__(self, pod: Pod, raw: dict[str, Any], resources: PodResources, version: int = 0):
        self.pod = pod
        self.raw = raw
        self.resources = resources
        self.version = version  # stream sequence of the pod version, 0 if unknown
        self.derived: dict[str, Any] = {}

    @classmethod
    def of(cls, raw: dict[str, Any], version: int = 0) -> PodInfo:
        return cls(Pod.model_validate(raw), raw, PodResources.of(raw), version)

    @property
    def key(self) -> str:
        return self.pod.key

    @cached_property
    def has_affinity(self) -> bool:
        aff = self.pod.spec.affinity
        return aff is not None and (aff.pod_affinity or aff.pod_anti_affinity) is not None

    @cached_property
    def has_required_anti_affinity(self) -> bool:
        aff = self.pod.spec.affinity
        anti = aff.pod_anti_affinity if aff is not None else None
        return anti is not None and bool(anti.required_during_scheduling_ignored_during_execution)

    def slim(self) -> dict[str, Any]:
        """The fields of the pod that plugins read of pods already on a node."""
        meta = self.raw.get("metadata") or {}
        spec = self.raw.get("spec") or {}
        keep_spec = (
            "nodeName",
            "schedulerName",
            "priority",
            "affinity",
            "containers",
            "initContainers",
            "overhead",
            "tolerations",
            "nodeSelector",
        )
        keep_meta = ("name", "namespace", "uid", "labels", "creationTimestamp", "deletionTimestamp")
        return {
            "metadata": {k: meta[k] for k in keep_meta if k in meta},
            "spec": {k: spec[k] for k in keep_spec if k in spec},
        }


@dataclass
class ImageStateSummary:
    size: int
    num_nodes: int


def allocatable_of(raw_node: dict[str, Any]) -> dict[str, int]:
    status = raw_node.get("status") or {}
    alloc = status.get("allocatable")
    if alloc is None:  # the API server defaults allocatable to capacity
        alloc = status.get("capacity") or {}
    return {
        name: resource_amount(name, parse_nonnegative(value, field=f"status.allocatable.{name}"))
        for name, value in alloc.items()
    }


@dataclass
class NodeInfo:
    name: str
    raw_node: dict[str, Any] | None = None  # None: node removed, pods still accounted
    allocatable: dict[str, int] = field(default_factory=dict)
    requested: Counter[str] = field(default_factory=Counter)
    nonzero_cpu: int = 0
    nonzero_memory: int = 0
    used_ports: Counter[HostPort] = field(default_factory=Counter)
    generation: int = 0
    pods: dict[str, PodInfo] = field(default_factory=dict)
    # Filled by the snapshot: image name -> size and how many nodes have it.
    image_states: dict[str, ImageStateSummary] = field(default_factory=dict)
    _node: Node | None = field(default=None, repr=False)

    def set_node(self, raw_node: dict[str, Any] | None) -> None:
        self.raw_node = raw_node
        self._node = None
        self.allocatable = allocatable_of(raw_node) if raw_node is not None else {}

    @property
    def node(self) -> Node:
        """The typed node (parsed on first use)."""
        if self._node is None:
            self._node = Node.model_validate(self.raw_node or {"metadata": {"name": self.name}})
        return self._node

    @property
    def num_pods(self) -> int:
        return len(self.pods)

    @property
    def allowed_pod_number(self) -> int:
        return self.allocatable.get("pods", 0)

    @property
    def labels(self) -> dict[str, str]:
        meta = (self.raw_node or {}).get("metadata") or {}
        return meta.get("labels") or {}

    @property
    def pods_with_affinity(self) -> list[PodInfo]:
        return [p for p in self.pods.values() if p.has_affinity]

    @property
    def pods_with_required_anti_affinity(self) -> list[PodInfo]:
        return [p for p in self.pods.values() if p.has_required_anti_affinity]

    def clone(self) -> NodeInfo:
        """NodeInfo.Snapshot: a copy whose pods and sums can change independently."""
        copy = NodeInfo(
            self.name,
            self.raw_node,
            dict(self.allocatable),
            Counter(self.requested),
            self.nonzero_cpu,
            self.nonzero_memory,
            Counter(self.used_ports),
            self.generation,
            dict(self.pods),
            self.image_states,
        )
        copy._node = self._node
        return copy

    def add_pod(self, pod: PodInfo) -> None:
        old = self.pods.get(pod.key)
        if old is not None:
            self._account(old.resources, -1)
        self.pods[pod.key] = pod
        self._account(pod.resources, +1)

    def remove_pod(self, key: str) -> bool:
        pod = self.pods.pop(key, None)
        if pod is None:
            return False
        self._account(pod.resources, -1)
        return True

    def _account(self, res: PodResources, sign: int) -> None:
        for name, amount in res.requests.items():
            self.requested[name] += sign * amount
            if self.requested[name] == 0:
                del self.requested[name]
        self.nonzero_cpu += sign * res.nonzero_cpu
        self.nonzero_memory += sign * res.nonzero_memory
        for port in res.host_ports:
            self.used_ports[port] += sign
            if self.used_ports[port] <= 0:
                del self.used_ports[port]

    def to_record(self) -> dict[str, Any]:
        """The worker's view; each pod as [key, version, slim pod] so that a reader
        re-parses only the pods whose version it has not seen."""
        return {
            "name": self.name,
            "node": self.raw_node,
            "generation": self.generation,
            "pods": [[p.key, p.version, p.slim()] for p in self.pods.values()],
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any], known: dict[str, PodInfo] | None = None) -> NodeInfo:
        """Rebuild from a record, reusing PodInfos from `known` whose version matches."""
        info = cls(name=rec["name"], generation=rec["generation"])
        info.set_node(rec["node"])
        known = known or {}
        for key, version, slim in rec["pods"]:
            pod = known.get(key)
            if pod is None or pod.version != version or version == 0:
                pod = PodInfo.of(slim, version)
            info.add_pod(pod)
        return info
