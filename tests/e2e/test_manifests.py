"""Upstream manifests, unchanged, through `ksched apply` (and `ksched create` for
scheduler_perf's generateName templates), each with the outcome Kubernetes 1.34 and
its default scheduler profile give on the test cluster below (issue 19).

The files are in tests/data/manifests (README.md there names each one's upstream
path). The test cluster, as a Kubernetes user would have set it up for the docs'
walk-throughs:

- node1..node4, 4 cpu, 32Gi, 110 pods each; zones antarctica-east1 (node1, node2) and
  antarctica-west1 (node3, node4) under topology.kubernetes.io/zone, and zoneA/zoneB
  under `zone` with `node=<name>` as the topology-spread page labels them;
  kubernetes.io/os=linux; disktype=ssd on node1 (assign-pods-nodes), label-2=key-2
  on node2 and label-1=key-1 on node3 (assign-pod-node's weight example); node1
  advertises example.com/dongle: 4 (extended-resource). No taints.
- Kubelets run the pods; a default StorageClass provisions volumes when a pod is
  scheduled (WaitForFirstConsumer, as kind ships); none named my-storage-class.
- The namespaces the examples name exist; PriorityClasses high, medium and low exist
  (the resource-quotas page asks for them), no globalDefault class.
- Pods labelled foo=bar run on node1, node2 and node3 (the topology-spread page's
  starting point).

Set KSCHED_MANIFEST_TABLE=<path> to get the outcome table as markdown.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest
import yaml

from shared.tools.devstack import LocalStack, running
from shared.tools.outcomes import (
    BOUND,
    CREATED,
    GATED,
    PENDING,
    REFUSED,
    Expected,
    Row,
    judge,
    plan_waves,
    render_table,
)
from shared.tools.synthetic import make_node, make_pod
from tests.conftest import make_test_stack
from tests.e2e.manifest_runner import Observer, Runner, Step, all_settled, object_names
from tests.e2e.test_cli_e2e import ksched

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

MANIFESTS = Path(__file__).resolve().parents[1] / "data" / "manifests"
NODES = ("node1", "node2", "node3", "node4")
CLASSES = {"high": 1_000_000, "medium": 1000, "low": 100}

# A node too small for the pod even when empty is UnschedulableAndUnresolvable for
# NodeResourcesFit (kubernetes#131345, 1.34): preemption does not try it.
NOT_HELPFUL = "4 Preemption is not helpful for scheduling"


def on(*nodes: str) -> Expected:
    """Bound, on one of `nodes`."""
    return Expected(BOUND, nodes=frozenset(nodes))


def unschedulable(filters: str, preemption: str = NOT_HELPFUL) -> str:
    """kube-scheduler's FailedScheduling message on the 4-node test cluster."""
    return f"0/4 nodes are available: {filters}. preemption: 0/4 nodes are available: {preemption}."


def cluster_node(name: str) -> dict[str, Any]:
    index = NODES.index(name)
    node = make_node(name, cpu="4", memory="32Gi", pods=110)
    labels = node["metadata"]["labels"]
    labels["topology.kubernetes.io/zone"] = "antarctica-east1" if index < 2 else "antarctica-west1"
    labels |= {"zone": "zoneA" if index < 2 else "zoneB", "node": name}
    labels["kubernetes.io/os"] = "linux"
    labels |= [{"disktype": "ssd"}, {"label-2": "key-2"}, {"label-1": "key-1"}, {}][index]
    if name == "node1":
        node["status"]["capacity"]["example.com/dongle"] = "4"
    return node


def cluster() -> list[dict[str, Any]]:
    classes = [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        for name, value in CLASSES.items()
    ]
    spread = [make_pod(f"foo-{n}", labels={"foo": "bar"}, node=n) for n in NODES[:3]]
    for pod in spread:  # as the topology-spread page draws them: no requests
        del pod["spec"]["containers"][0]["resources"]
    return [*(cluster_node(n) for n in NODES), *classes, *spread]


# A cluster full of priority-0 pods: 30Gi of each node's 32Gi memory taken.
FULL = tuple(make_pod(f"filler-{n}", cpu="100m", memory="30Gi", node=n) for n in NODES)


@dataclass(frozen=True)
class Case:
    manifest: str  # under tests/data/manifests
    expected: Expected
    why: str  # why Kubernetes does this: the docs page or the upstream behaviour
    before: tuple[str, ...] = ()  # manifests the docs apply first
    setup: tuple[dict[str, Any], ...] = ()  # cluster state only this case needs
    verb: str = "apply"
    alone: bool = False  # in a wave of its own (it changes what others would see)
    pending: str = ""  # the feature another branch is building, while it fails for it


SERVICES = "Services pending"  # live Services/StatefulSets, other kinds skipped


def perf(
    manifest: str, expected: Expected, why: str, pending: str = "", alone: bool = False
) -> Case:
    """A scheduler_perf template: generateName, so `kubectl create`, not apply."""
    return Case(
        f"scheduler_perf/{manifest}", expected, why, verb="create", alone=alone, pending=pending
    )


CASES = [
    Case(
        "pod-nginx.yaml",
        on("node1"),
        "nodeSelector disktype=ssd: only node1 has it (tasks: assign-pods-nodes)",
    ),
    Case(
        "pod-nginx-specific-node.yaml",
        on("foo-node"),
        "spec.nodeName bypasses the scheduler: the pod is foo-node's as written, though no "
        "such node exists (assign-pod-node#nodename)",
        alone=True,
    ),
    Case(
        "pod-nginx-required-affinity.yaml",
        on("node1"),
        "required node affinity disktype In [ssd]: node1 only",
    ),
    Case(
        "pod-nginx-preferred-affinity.yaml",
        on("node1"),
        "NodeAffinity scores node1 100 (weight 2) and the others 0; the resource scores "
        "differ by a few points",
    ),
    Case(
        "pod-with-node-affinity.yaml",
        Expected(BOUND),
        "every node is in antarctica-east1 or antarctica-west1 (assign-pod-node#node-affinity)",
    ),
    Case(
        "pod-with-affinity-preferred-weight.yaml",
        on("node2"),
        "all nodes are linux; label-2 (weight 50) on node2 beats label-1 (weight 1) on node3 "
        "(assign-pod-node#node-affinity-weight)",
    ),
    Case(
        "pod-with-pod-affinity.yaml",
        Expected(PENDING, message=unschedulable("4 node(s) didn't match pod affinity rules")),
        "no pod labelled security=S1 runs, and the pod does not match its own term "
        "(InterPodAffinity Filter, UnschedulableAndUnresolvable)",
    ),
    Case(
        "pod-with-toleration.yaml",
        Expected(BOUND),
        "a toleration only permits; no node is tainted (taint-and-toleration)",
    ),
    Case(
        "pod-with-numeric-toleration.yaml",
        Expected(
            REFUSED,
            message='The Pod "nginx-numeric-toleration" is invalid: '
            'spec.tolerations[0].operator: Unsupported value: "Gt": supported values: '
            '"Equal", "Exists"',
        ),
        "Gt/Lt toleration operators came after 1.34 (today's docs); 1.34's validation "
        "knows Equal and Exists",
    ),
    Case(
        "pod-with-scheduling-gates.yaml",
        Expected(GATED),
        "gates hold the pod: PodScheduled=False SchedulingGated, never attempted "
        "(pod-scheduling-readiness)",
    ),
    Case(
        "pod-without-scheduling-gates.yaml",
        Expected(BOUND),
        "re-applying without schedulingGates removes them; the pod is scheduled "
        "(pod-scheduling-readiness)",
        before=("pod-with-scheduling-gates.yaml",),
    ),
    Case(
        "one-constraint.yaml",
        on("node3", "node4"),
        "foo=bar pods: 2 in zoneA, 1 in zoneB; maxSkew 1 on zone leaves zoneB "
        "(topology-spread-constraints, one constraint)",
    ),
    Case(
        "two-constraints.yaml",
        on("node4"),
        "zone leaves zoneB, node leaves node4, the only node without a foo=bar pod "
        "(topology-spread-constraints, multiple constraints)",
    ),
    Case(
        "one-constraint-with-nodeaffinity.yaml",
        on("node3", "node4"),
        "NotIn zoneC excludes no node here; the zone constraint leaves zoneB",
    ),
    Case("cpu-request-limit.yaml", Expected(BOUND), "0.5 cpu fits any node (assign-cpu-resource)"),
    Case(
        "cpu-request-limit-2.yaml",
        Expected(PENDING, message=unschedulable("4 Insufficient cpu")),
        "100 cpu exceeds every node's allocatable: preemption cannot help "
        "(assign-cpu-resource; kubernetes#131345)",
    ),
    Case(
        "memory-request-limit.yaml", Expected(BOUND), "100Mi fits any node (assign-memory-resource)"
    ),
    Case(
        "memory-request-limit-3.yaml",
        Expected(PENDING, message=unschedulable("4 Insufficient memory")),
        "1000Gi exceeds every node's allocatable (assign-memory-resource)",
    ),
    Case(
        "extended-resource-pod.yaml",
        on("node1"),
        "3 example.com/dongle: only node1 advertises them (extended-resource)",
    ),
    Case(
        "extended-resource-pod-2.yaml",
        Expected(
            PENDING,
            message=unschedulable(
                "4 Insufficient example.com/dongle",
                "1 No preemption victims found for incoming pod, "
                "3 Preemption is not helpful for scheduling",
            ),
        ),
        "the first demo pod holds 3 of node1's 4 dongles and has the same priority; the "
        "other nodes have none (extended-resource)",
        before=("extended-resource-pod.yaml",),
    ),
    Case("init-containers.yaml", Expected(BOUND), "no requests: any node"),
    Case("qos-pod.yaml", Expected(BOUND), "700m cpu, 200Mi fit any node"),
    Case("low-priority-class.yaml", Expected(CREATED), "a PriorityClass, no pod"),
    Case(
        "deployment-with-capacity-reservation.yaml",
        Expected(BOUND, priority=-1000),
        "the docs create class placeholder first; admission gives the pod -1000 "
        "(node-overprovisioning)",
        before=("low-priority-class.yaml",),
        alone=True,
    ),
    Case(
        "deployment-with-low-priorityclass.yaml",
        Expected(
            REFUSED,
            message='pods "placeholder-deployment-<hash>-" is forbidden: '
            "no PriorityClass with name low-priority was found",
        ),
        "the Deployment is created; Priority admission refuses its pods (FailedCreate)",
    ),
    Case(
        "high-priority-pod.yaml",
        Expected(BOUND, priority=CLASSES["high"], victims=1),
        "class high exists as resource-quotas asks; on a full cluster it preempts one "
        "priority-0 pod and binds (pod-priority-preemption)",
        setup=FULL,
        alone=True,
    ),
    Case(
        "zookeeper-pod-disruption-budget-minavailable.yaml",
        Expected(CREATED),
        "a PodDisruptionBudget, no pod (configure-pdb)",
    ),
    Case(
        "zookeeper-pod-disruption-budget-maxunavailable.yaml",
        Expected(CREATED),
        "a PodDisruptionBudget, no pod (configure-pdb)",
    ),
    Case("nginx-deployment.yaml", Expected(BOUND, pods=3), "3 replicas, no requests"),
    Case("deployment.yaml", Expected(BOUND, pods=2), "2 replicas, no requests"),
    Case(
        "daemonset.yaml",
        Expected(BOUND, pods=4, nodes=frozenset(NODES), distinct=True),
        "one pod per node, pinned by the DaemonSet controller's node affinity",
    ),
    Case("job.yaml", Expected(BOUND), "one pod (parallelism 1)"),
    Case("indexed-job.yaml", Expected(BOUND, pods=3), "parallelism 3 of 5 completions"),
    Case("frontend.yaml", Expected(BOUND, pods=3), "a ReplicaSet of 3"),
    Case(
        "statefulset.yaml",
        Expected(
            PENDING,
            message="0/4 nodes are available: pod has unbound immediate "
            f"PersistentVolumeClaims. preemption: 0/4 nodes are available: {NOT_HELPFUL}.",
        ),
        "no StorageClass my-storage-class: www-web-0 stays unbound (immediate binding); "
        "OrderedReady makes web-1 only once web-0 is Ready",
        pending="ksched has no PersistentVolumeClaims, nor OrderedReady",
    ),
    Case(
        "zookeeper.yaml",
        Expected(BOUND, pods=3),
        "the default StorageClass provisions each datadir when its pod is scheduled; "
        "OrderedReady brings up zk-0..2; the anti-affinity selects label app, which they "
        "lack (zookeeper tutorial)",
    ),
    perf("pod-default.yaml", Expected(BOUND), "100m, 500Mi fit any node"),
    perf(
        "pod-with-node-affinity.yaml",
        Expected(
            PENDING, message=unschedulable("4 node(s) didn't match Pod's node affinity/selector")
        ),
        "no node is in zone1 or zone2",
    ),
    perf(
        "pod-with-pod-affinity.yaml",
        Expected(PENDING, message=unschedulable("4 node(s) didn't match pod affinity rules")),
        "no color=blue pod in namespaces sched-0/sched-1, and the pod (in default) cannot "
        "match its own term",
    ),
    perf("pod-with-pod-anti-affinity.yaml", Expected(BOUND), "no color=green pod anywhere"),
    perf("pod-with-topology-spreading.yaml", Expected(BOUND), "the first color=blue pod"),
    perf(
        "pod-high-priority.yaml",
        Expected(
            REFUSED,
            message='pods "pod-" is forbidden: the integer value of priority '
            "(10) must not be provided in pod spec; priority admission controller "
            "computed 0 from the given PriorityClass name",
        ),
        "Priority admission (on by default) computes 0: no class, no globalDefault; a "
        "stated other value is refused",
    ),
    perf("pod-low-priority.yaml", Expected(BOUND), "900m fits any node"),
    perf(
        "pod-large-cpu.yaml",
        Expected(PENDING, message=unschedulable("4 Insufficient cpu")),
        "9 cpu exceeds every node's allocatable",
    ),
    perf("gated-pod.yaml", Expected(GATED), "held by its scheduling gate"),
    perf("pod-hostport-80.yaml", Expected(BOUND), "host port 80 is free everywhere"),
    perf(
        "unschedulable-pod-node-resourcesfit.yaml",
        Expected(PENDING, message=unschedulable("4 Insufficient cpu, 4 Insufficient memory")),
        "pod-level requests (PodLevelResources, beta, on in 1.34): 1000 cpu, 500Gi",
    ),
    perf("light-pod.yaml", Expected(BOUND), "no requests"),
    # last, alone: it adds a fifth node
    perf("node-default.yaml", Expected(CREATED), "a Node, no pod", alone=True),
]


def paths(case: Case) -> list[Path]:
    return [MANIFESTS / m for m in (*case.before, case.manifest)]


@pytest.fixture(scope="module")
def manifest_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with running(make_test_stack(tmp_path_factory.mktemp("manifests") / "stack")) as st:
        yield st


@pytest.fixture(scope="module")
async def rows(
    manifest_stack: LocalStack, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[dict[str, Row]]:
    """Every case run once on one stack; the outcome table written if asked."""
    workdir = tmp_path_factory.mktemp("manifest-runs")
    nc = await nats.connect(manifest_stack.nats_url)
    observer = Observer()
    await observer.start(nc)
    runner = Runner(ksched, manifest_stack.nats_url, observer, MANIFESTS)
    try:
        setup = await runner.step("apply", write(workdir / "cluster.yaml", cluster()))
        assert setup.code == 0, setup.err
        present = [c for c in CASES if (MANIFESTS / c.manifest).exists()]
        results: dict[str, Row] = {}
        plan = plan_waves([(object_names(paths(c)), c.alone) for c in present])
        for number, wave in enumerate(plan):
            cases = [present[i] for i in wave]
            results |= await run_wave(runner, cases, workdir / f"wave-{number}")
        if table := os.environ.get("KSCHED_MANIFEST_TABLE"):
            Path(table).write_text(render_table([results[c.manifest] for c in present]))
        yield results
    finally:
        await nc.close()


def write(path: Path, objs: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(list(objs)))
    return path


async def run_wave(runner: Runner, cases: list[Case], workdir: Path) -> dict[str, Row]:
    async def run(case: Case) -> tuple[Step, list[str], list[str]]:
        made: list[str] = []
        victims: list[str] = []
        if case.setup:
            step = await runner.step("apply", write(workdir / f"setup-{id(case)}.yaml", case.setup))
            victims = step.pods
        for before in case.before:
            made += (await runner.step("apply", MANIFESTS / before)).pods
        step = await runner.verb(case.verb, MANIFESTS / case.manifest)
        return step, [*victims, *made, *step.pods], victims

    done = await asyncio.gather(*(run(c) for c in cases))
    pairs = [(c.expected, step, victims) for c, (step, _, victims) in zip(cases, done, strict=True)]
    await runner.observer.wait(lambda: all_settled(runner.observer, pairs))
    rows = {
        c.manifest: Row(c.manifest, c.expected, runner.observer.run(step, victims), c.why)
        for c, (step, _, victims) in zip(cases, done, strict=True)
    }
    await runner.delete([key for _, made, _ in done for key in made])
    return rows


def params() -> list[Any]:
    return [
        pytest.param(c, id=c.manifest, marks=[pytest.mark.xfail(strict=True, reason=c.pending)])
        if c.pending
        else pytest.param(c, id=c.manifest)
        for c in CASES
    ]


@pytest.mark.parametrize("case", params())
async def test_manifest_gets_the_outcome_kubernetes_gives(case: Case, rows: dict[str, Row]) -> None:
    if case.manifest not in rows:
        pytest.skip(f"{case.manifest} is not in tests/data/manifests yet")
    row = rows[case.manifest]
    assert judge(row.expected, row.run) == "", (
        f"Kubernetes: {row.expected.describe()} ({case.why}); ksched: {row.run.describe()}"
    )
