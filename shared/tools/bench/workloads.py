"""scheduler_perf's workloads as ksched publishes them (pure: objects, no I/O).

Each workload has the shape of kube-scheduler's test/integration/scheduler_perf
configs (misc/, affinity/, topology_spreading/ performance-config.yaml): the node
template (node-default: 4 cpu / 32Gi / 110 pods, zone labels only where the
config's labelNodePrepareStrategy puts them), the init pods placed first, the
measured pods (the createPods op with collectMetrics), and the churn op running
alongside them. Pod templates are scheduler_perf's (templates/*.yaml): requests,
priorities and the labels they carry, nothing more. docs/bench.md has the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from shared.tools.synthetic import HOSTNAME, ZONE, add_spread, make_pod

# scheduler_perf's namespaces for the anti-affinity workload's init and measured pods
# (createNamespaces prefix "sched", count 2); the other workloads use them too.
INIT_NAMESPACE = "sched-0"
MEASURED_NAMESPACE = "sched-1"
# labelNodePrepareStrategy's zone values (a value per node; upstream draws one at
# random, ksched deals them in turn so that every run places the same way)
NODE_AFFINITY_ZONES = ("zone1",)
SPREADING_ZONES = ("moon-1", "moon-2", "moon-3")

Obj = dict[str, Any]
PodTemplate = Callable[[str, str], Obj]  # (namespace, name) -> pod
ChurnTemplate = Callable[[int], Obj]  # (round) -> the object that round creates


def bench_node(i: int, zones: tuple[str, ...] = ()) -> Obj:
    """templates/node-default.yaml, with the hostname label a kubelet sets and, when the
    workload's labelNodePrepareStrategy asks, a zone label."""
    name = f"node-{i:05d}"
    labels = {HOSTNAME: name}
    if zones:
        labels[ZONE] = zones[i % len(zones)]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"}},
    }


def _pod(namespace: str, name: str, *, cpu: str = "100m", priority: int | None = None) -> Obj:
    """A pause pod requesting `cpu` and 500Mi, with no labels (as the templates)."""
    pod = make_pod(name, namespace=namespace, cpu=cpu, memory="500Mi", priority=priority)
    pod["metadata"]["labels"] = {}
    return pod


def default_pod(namespace: str, name: str) -> Obj:
    """templates/pod-default.yaml: 100m / 500Mi."""
    return _pod(namespace, name)


def anti_affinity_pod(namespace: str, name: str) -> Obj:
    """templates/pod-with-pod-anti-affinity.yaml: `color: green`, required anti-affinity
    to `color: green` on hostname across both namespaces."""
    pod = _pod(namespace, name)
    pod["metadata"]["labels"] = {"color": "green"}
    term = {
        "labelSelector": {"matchLabels": {"color": "green"}},
        "topologyKey": HOSTNAME,
        "namespaces": [MEASURED_NAMESPACE, INIT_NAMESPACE],
    }
    pod["spec"]["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    }
    return pod


def spreading_pod(namespace: str, name: str) -> Obj:
    """templates/pod-with-topology-spreading.yaml: `color: blue`, maxSkew 5 over zones,
    DoNotSchedule."""
    pod = _pod(namespace, name)
    pod["metadata"]["labels"] = {"color": "blue"}
    return add_spread(pod, 5, ZONE, "color", "blue")


def node_affinity_pod(namespace: str, name: str) -> Obj:
    """templates/pod-with-node-affinity.yaml: zone In [zone1, zone2] (every node is in
    zone1: the affinity filters nothing out, it is its cost that is measured)."""
    pod = _pod(namespace, name)
    expr = {"key": ZONE, "operator": "In", "values": ["zone1", "zone2"]}
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expr]}]
            }
        }
    }
    return pod


def low_priority_pod(namespace: str, name: str) -> Obj:
    """templates/pod-low-priority.yaml: 900m at priority 0, so that four fill 3.6 of a
    node's 4 cpu."""
    return _pod(namespace, name, cpu="900m")


def high_priority_pod(namespace: str, name: str) -> Obj:
    """templates/pod-high-priority.yaml: 3 cpu at priority 10, which on a node holding
    four low-priority pods fits only by preempting three of them."""
    return _pod(namespace, name, cpu="3", priority=10)


def high_priority_large_cpu_pod(namespace: str, name: str) -> Obj:
    """templates/pod-high-priority-large-cpu.yaml: 9 cpu at priority 10, which fits no
    node even after preemption (the preemption plugin still looks at every pod)."""
    return _pod(namespace, name, cpu="9", priority=10)


def churn_node(round_: int) -> Obj:
    """templates/churn/node-default.yaml: a node of capacity pods 0, which takes no pod."""
    name = f"churn-node-{round_}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOSTNAME: name}},
        "status": {"capacity": {"pods": "0"}},
    }


def churn_large_cpu_pod(round_: int) -> Obj:
    return high_priority_large_cpu_pod(MEASURED_NAMESPACE, f"churn-pod-{round_}")


def preemptor(round_: int) -> Obj:
    return high_priority_pod(MEASURED_NAMESPACE, f"preemptor-{round_}")


@dataclass(frozen=True)
class Churn:
    """scheduler_perf's churn op, running while the measured pods are scheduled: every
    `interval` seconds one object per template. "create" keeps what it created;
    "recreate" deletes the previous round's objects first. (ksched has no Service, so
    SchedulingWithMixedChurn's service-default.yaml has no counterpart.)"""

    mode: Literal["create", "recreate"]
    templates: tuple[ChurnTemplate, ...]
    interval: float  # seconds (intervalMilliseconds / 1000)

    def objects(self, round_: int) -> list[Obj]:
        return [template(round_) for template in self.templates]


@dataclass(frozen=True)
class Size:
    nodes: int
    init_pods: int
    measured_pods: int


@dataclass(frozen=True)
class Workload:
    name: str
    threshold: float  # scheduler_perf's threshold at 5000 nodes, pods/s; 0: it has none
    full: Size
    short: Size
    measured: PodTemplate = default_pod
    init: PodTemplate = default_pod
    node_zones: tuple[str, ...] = ()  # labelNodePrepareStrategy's zone values, if any
    churn: Churn | None = None
    # Measured pods first fail (and preempt): wait for their bindings, not their verdicts.
    measured_bind_late: bool = False

    def size(self, full: bool) -> Size:
        return self.full if full else self.short

    def node_objects(self, size: Size) -> list[Obj]:
        return [bench_node(i, self.node_zones) for i in range(size.nodes)]

    def init_objects(self, size: Size) -> list[Obj]:
        return [self.init(INIT_NAMESPACE, f"init-{i}") for i in range(size.init_pods)]

    def measured_objects(self, size: Size, prefix: str = "pod") -> list[Obj]:
        return [
            self.measured(MEASURED_NAMESPACE, f"{prefix}-{i}") for i in range(size.measured_pods)
        ]


# The 500-node sizes measure more pods than scheduler_perf's 500Nodes workloads (1000
# or fewer) so that a run spans several one-second samples, and keep the init pods per
# node of the 5000-node shape where that shape depends on it (preemption: four per node).
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
            node_zones=SPREADING_ZONES,
        ),
        Workload(
            "SchedulingNodeAffinity",
            220,
            Size(5000, 5000, 10000),
            Size(500, 500, 3000),
            measured=node_affinity_pod,
            init=node_affinity_pod,
            node_zones=NODE_AFFINITY_ZONES,
        ),
        Workload(
            "Unschedulable",
            590,
            Size(5000, 100, 10000),
            Size(500, 100, 3000),
            churn=Churn("create", (churn_large_cpu_pod,), 0.2),
        ),
        Workload(
            "SchedulingWithMixedChurn",
            710,
            Size(5000, 0, 10000),
            Size(500, 0, 3000),
            churn=Churn("recreate", (churn_node, churn_large_cpu_pod), 1.0),
        ),
        Workload(
            "PreemptionBasic",
            0,  # upstream has no threshold (its 5000Nodes size is commented out)
            Size(1000, 4000, 1000),
            Size(500, 2000, 500),
            measured=high_priority_pod,
            init=low_priority_pod,
            measured_bind_late=True,
        ),
        Workload(
            "PreemptionAsync",
            570,
            Size(5000, 20000, 5000),
            Size(500, 2000, 1500),
            init=low_priority_pod,
            churn=Churn("create", (preemptor,), 0.2),
        ),
    )
}
