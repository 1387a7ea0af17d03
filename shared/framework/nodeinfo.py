"""NodeInfo: a node and the aggregate of the pods on it (kube-scheduler's framework.NodeInfo).

The cache owns the authoritative NodeInfos; workers hold snapshot copies built
from the records the cache writes to Redis. Both use this one type so that the
Filter code that validates an assume is the code that chose the node.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from shared.api.quantity import parse_nonnegative, resource_amount
from shared.api.resources import pod_host_ports, pod_nonzero_requests, pod_requests

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
        cpu, memory = pod_nonzero_requests(spec)
        return cls(pod_requests(spec), cpu, memory, tuple(pod_host_ports(spec)))

    def to_record(self) -> list[Any]:
        return [
            self.requests,
            self.nonzero_cpu,
            self.nonzero_memory,
            [list(p) for p in self.host_ports],
        ]

    @classmethod
    def from_record(cls, rec: list[Any]) -> PodResources:
        return cls(rec[0], rec[1], rec[2], tuple((p[0], p[1], p[2]) for p in rec[3]))


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
    num_pods: int = 0
    used_ports: Counter[HostPort] = field(default_factory=Counter)
    generation: int = 0
    pods: dict[str, PodResources] = field(default_factory=dict)  # cache only; empty in snapshots

    def set_node(self, raw_node: dict[str, Any] | None) -> None:
        self.raw_node = raw_node
        self.allocatable = allocatable_of(raw_node) if raw_node is not None else {}

    @property
    def allowed_pod_number(self) -> int:
        return self.allocatable.get("pods", 0)

    @property
    def labels(self) -> dict[str, str]:
        meta = (self.raw_node or {}).get("metadata") or {}
        return meta.get("labels") or {}

    def add_pod(self, key: str, res: PodResources, *, track: bool = True) -> None:
        self._account(res, +1)
        if track:
            self.pods[key] = res

    def remove_pod(self, key: str) -> bool:
        res = self.pods.pop(key, None)
        if res is None:
            return False
        self._account(res, -1)
        return True

    def _account(self, res: PodResources, sign: int) -> None:
        for name, amount in res.requests.items():
            self.requested[name] += sign * amount
            if self.requested[name] == 0:
                del self.requested[name]
        self.nonzero_cpu += sign * res.nonzero_cpu
        self.nonzero_memory += sign * res.nonzero_memory
        self.num_pods += sign
        for port in res.host_ports:
            self.used_ports[port] += sign
            if self.used_ports[port] <= 0:
                del self.used_ports[port]

    def to_record(self) -> dict[str, Any]:
        """The worker's view: aggregates, not the pod list."""
        return {
            "name": self.name,
            "node": self.raw_node,
            "requested": dict(self.requested),
            "nonzero": [self.nonzero_cpu, self.nonzero_memory],
            "num_pods": self.num_pods,
            "ports": [[*p, n] for p, n in self.used_ports.items()],
            "generation": self.generation,
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> NodeInfo:
        info = cls(name=rec["name"], generation=rec["generation"], num_pods=rec["num_pods"])
        info.set_node(rec["node"])
        info.requested = Counter(rec["requested"])
        info.nonzero_cpu, info.nonzero_memory = rec["nonzero"]
        info.used_ports = Counter({(p[0], p[1], p[2]): p[3] for p in rec["ports"]})
        return info
