"""scheduler_perf's workloads as ksched publishes them (pure: objects, no I/O).

Each workload is the same shape as kube-scheduler's test/integration/scheduler_perf
config: nodes of 4 cpu / 32Gi / 110 pods over 3 zones, init pods placed first,
then the measured pods, whose bindings are sampled. Pod templates follow
scheduler_perf's (100m cpu / 500Mi; anti-affinity `color: green` on hostname
across the init and measured namespaces; spread `color: blue` maxSkew 5 over
zones, DoNotSchedule; node affinity zone In [two of the three zones]).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared.tools.synthetic import HOSTNAME, ZONE, ZONES, add_spread, make_node, make_pod

INIT_NAMESPACE = "sched-setup"  # scheduler_perf's namespaces for init and measured pods
MEASURED_NAMESPACE = "sched-test"
UNSCHEDULABLE_RATE = 5.0  # pods/s injected alongside the Unschedulable workload
CHURN_INTERVAL = 1.0  # seconds between recreations in SchedulingWithMixedChurn

Obj = dict[str, Any]
PodTemplate = Callable[[str, str], Obj]  # (namespace, name) -> pod


def bench_node(i: int) -> Obj:
    return make_node(f"node-{i:05d}", cpu="4", memory="32Gi", pods=110, zone=ZONES[i % 3])


def default_pod(namespace: str, name: str) -> Obj:
    return make_pod(name, namespace=namespace, labels={"app": "bench"})


def anti_affinity_pod(namespace: str, name: str) -> Obj:
    pod = make_pod(name, namespace=namespace, labels={"color": "green"})
    term = {
        "labelSelector": {"matchLabels": {"color": "green"}},
        "topologyKey": HOSTNAME,
        "namespaces": [INIT_NAMESPACE, MEASURED_NAMESPACE],
    }
    pod["spec"]["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    }
    return pod


def spreading_pod(namespace: str, name: str) -> Obj:
    pod = make_pod(name, namespace=namespace, labels={"color": "blue"})
    return add_spread(pod, 5, ZONE, "color", "blue")


def node_affinity_pod(namespace: str, name: str) -> Obj:
    pod = make_pod(name, namespace=namespace, labels={"app": "bench"})
    expr = {"key": ZONE, "operator": "In", "values": list(ZONES[:2])}
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expr]}]
            }
        }
    }
    return pod


def large_cpu_pod(namespace: str, name: str) -> Obj:
    """Fits no node (scheduler_perf's pod-large-cpu): stays unschedulable."""
    return make_pod(name, namespace=namespace, cpu="9", memory="500Mi", labels={"app": "large"})


def low_priority_pod(namespace: str, name: str) -> Obj:
    """scheduler_perf's pod-low-priority: 900m, so that four fill a 4-cpu node."""
    return make_pod(name, namespace=namespace, cpu="900m", memory="500Mi", labels={"app": "low"})


def high_priority_pod(namespace: str, name: str) -> Obj:
    """scheduler_perf's pod-high-priority: 3 cpu at priority 10, which on a node full of
    low-priority pods fits only by preempting three of them."""
    return make_pod(
        name, namespace=namespace, cpu="3", memory="500Mi", labels={"app": "high"}, priority=10
    )


def high_priority_large_cpu_pod(namespace: str, name: str) -> Obj:
    return make_pod(
        name, namespace=namespace, cpu="9", memory="500Mi", labels={"app": "churn"}, priority=10
    )


@dataclass(frozen=True)
class Size:
    nodes: int
    init_pods: int
    measured_pods: int


@dataclass(frozen=True)
class Workload:
    name: str
    threshold: float  # kube-scheduler's scheduler_perf threshold, pods/s (5000 nodes)
    full: Size
    short: Size
    measured: PodTemplate = default_pod
    init: PodTemplate = default_pod
    init_schedulable: bool = True  # False: init pods are waited on as unschedulable
    inject_unschedulable: bool = False  # large-cpu pods at UNSCHEDULABLE_RATE alongside
    churn: bool = False  # a node and a high-priority pod recreated every CHURN_INTERVAL
    # Measured pods first fail (and preempt): wait for their bindings, not their verdicts.
    measured_bind_late: bool = False

    def size(self, full: bool) -> Size:
        return self.full if full else self.short

    def init_objects(self, size: Size) -> list[Obj]:
        return [self.init(INIT_NAMESPACE, f"init-{i}") for i in range(size.init_pods)]

    def measured_objects(self, size: Size, prefix: str = "pod") -> list[Obj]:
        return [
            self.measured(MEASURED_NAMESPACE, f"{prefix}-{i}") for i in range(size.measured_pods)
        ]


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("SchedulingBasic", 680, Size(5000, 1000, 10000), Size(500, 500, 4000)),
        Workload(
            "SchedulingPodAntiAffinity",
            60,
            Size(5000, 1000, 2000),
            Size(500, 100, 400),
            measured=anti_affinity_pod,
            init=anti_affinity_pod,
        ),
        Workload(
            "TopologySpreading",
            460,
            Size(5000, 5000, 5000),
            Size(500, 1000, 2000),
            measured=spreading_pod,
        ),
        Workload(
            "SchedulingNodeAffinity",
            220,
            Size(5000, 5000, 10000),
            Size(500, 500, 3000),
            measured=node_affinity_pod,
            init=node_affinity_pod,
        ),
        Workload(
            "Unschedulable",
            590,
            Size(5000, 100, 10000),
            Size(500, 100, 3000),
            init=large_cpu_pod,
            init_schedulable=False,
            inject_unschedulable=True,
        ),
        Workload(
            "SchedulingWithMixedChurn", 710, Size(5000, 0, 10000), Size(500, 0, 3000), churn=True
        ),
        Workload(
            "PreemptionAsync",
            570,
            Size(5000, 20000, 5000),
            Size(500, 2000, 500),
            measured=high_priority_pod,
            init=low_priority_pod,
            measured_bind_late=True,
        ),
    )
}


def churn_objects(round_: int) -> list[Obj]:
    """What one churn round creates (scheduler_perf's churn in recreate mode: a node and
    a high-priority large pod; there is no Service object in ksched)."""
    node = make_node(f"churn-node-{round_}", cpu="4", memory="32Gi", zone=ZONES[round_ % 3])
    return [node, high_priority_large_cpu_pod(MEASURED_NAMESPACE, f"churn-pod-{round_}")]
