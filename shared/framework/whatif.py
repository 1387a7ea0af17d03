"""What-if (pure): schedule a pod, or a workload's replicas, against a snapshot without
writing anything, and say why.

The report holds the node the scheduling cycle's own code (schedule_one.Scheduler)
would pick, every Filter plugin's verdict per node (explain.py; nodes with the same
verdicts grouped, as FailedScheduling's histogram counts them, so that 5000 nodes fit
in one NATS message), the raw and normalized scores of the best nodes, the preemption
PostFilter would cause (victims, the PodDisruptionBudgets they touch), and for a
workload how many replicas fit and where: each placed replica is assumed onto the
snapshot before the next one is scheduled, as the worker's batch does, and every
assumption is taken back before `what_if` returns. Permit is asked too, for the last
placed replica with all of them assumed: a pod of a gang short of its minCount would
wait there, not bind (the report's `permit`, with n of minCount placed).

The worker answers what-if requests with it (services/worker/whatif.py), against the
committed state; `ksched describe pod` runs it against the cluster stream.
"""

from __future__ import annotations

import copy
import random
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from shared.framework.cycle_state import CycleState
from shared.framework.diagnosis import FitError
from shared.framework.explain import PASSED, SKIPPED, Explanation, explain, verdict_of
from shared.framework.interface import PostFilterResult
from shared.framework.preemption import AllowedDisruptions
from shared.framework.runtime import Framework
from shared.framework.schedule_one import Scheduler, SchedulingError, num_feasible_nodes_to_find
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import Code, Status
from shared.framework.types import PodInfo
from shared.framework.waiting_pods import MAX_PERMIT_TIMEOUT

# GangScheduling's name and its PreEnqueue count message (the plugin imports the
# framework, not the other way round)
GANG_SCHEDULING = "GangScheduling"
GANG_WAITING_FOR_PODS = "waiting for minCount pods from a gang to appear in scheduling queue"


@runtime_checkable
class GangProgress(Protocol):
    """A Permit plugin that can say how far a pod's gang is: {"placed": n, "minCount": m}."""

    def progress(self, pod: PodInfo) -> dict[str, int]: ...


MAX_GROUPS = 20  # groups of nodes with the same verdicts listed; the rest are counted
NODES_PER_GROUP = 5  # node names listed per group
TOP_SCORES = 10  # best-scoring nodes listed with each plugin's scores
MAX_LISTED = 50  # names listed in `best` and victims; placements beyond are counted
MAX_REPLICAS = 5000


@dataclass(frozen=True)
class WhatIfLimits:
    """How much per-node detail a report carries (a reply must fit NATS's max payload)."""

    groups: int = MAX_GROUPS
    nodes_per_group: int = NODES_PER_GROUP
    top: int = TOP_SCORES
    listed: int = MAX_LISTED


def group_nodes(
    verdicts: Mapping[str, Mapping[str, str]],
    nodes: Sequence[str],
    limits: WhatIfLimits = WhatIfLimits(),
) -> tuple[list[dict[str, Any]], int]:
    """Nodes with the same failing verdicts counted together, largest group first (nodes
    absent from `verdicts` passed every plugin); and how many groups were left out."""
    groups: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for name in nodes:
        failed = verdicts.get(name, {})
        key = tuple((p, v) for p, v in failed.items() if v not in (PASSED, SKIPPED))
        groups.setdefault(key, []).append(name)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    shown = [
        {"count": len(names), "verdicts": dict(key), "nodes": names[: limits.nodes_per_group]}
        for key, names in ordered[: limits.groups]
    ]
    return shown, max(0, len(ordered) - limits.groups)


def replica_pods(template: dict[str, Any], replicas: int) -> list[PodInfo]:
    """`replicas` pods from one template: the first is the template itself, the others
    copies named and uid'd apart (<name>-whatif-<i>), so that assuming one never
    replaces a pod the snapshot holds."""
    first = PodInfo.of(template)
    pods = [first]
    meta = template.get("metadata") or {}
    name, uid = meta.get("name", "pod"), meta.get("uid") or first.pod.metadata.uid
    for i in range(1, min(replicas, MAX_REPLICAS)):
        raw = copy.deepcopy(template)
        raw["metadata"]["name"] = f"{name}-whatif-{i}"
        raw["metadata"]["uid"] = f"{uid}-whatif-{i}"
        pods.append(PodInfo.of(raw))
    return pods


@contextmanager
def assumed(snapshot: ClusterSnapshot) -> Iterator[list[tuple[PodInfo, str]]]:
    """Pods added to the snapshot in the block (the caller appends (pod, node) after
    `snapshot.add_pod`) are removed again when it ends, whatever happens."""
    added: list[tuple[PodInfo, str]] = []
    try:
        yield added
    finally:
        for pod, node in reversed(added):
            info = snapshot.get(node)
            if info is not None and info.remove_pod(pod.key):
                snapshot.node_changed(node)


def what_if(
    fw: Framework,
    pods: Sequence[PodInfo],
    snapshot: ClusterSnapshot,
    *,
    percentage: int | None = None,
    node: str | None = None,
    limits: WhatIfLimits = WhatIfLimits(),
    seed: int = 0,
) -> dict[str, Any]:
    """The report for `pods` (one pod, or a workload's replicas from replica_pods);
    `node` asks for that node's full detail. The snapshot is left as it was."""
    pod = pods[0]
    report: dict[str, Any] = {
        "pod": pod.key,
        "profile": fw.profile,
        "nodes": len(snapshot.nodes),
        "sampled": num_feasible_nodes_to_find(percentage, len(snapshot.nodes)),
    }
    fw.set_snapshot(snapshot)  # PreEnqueue reads the objects the snapshot carries
    gate = fw.run_pre_enqueue_plugins(pod)
    if not gate.ok and not _unknowable(gate):  # never popped: no cycle until the gate opens
        report["gated"] = {"plugin": gate.plugin, "message": gate.message()}
        report["chosen"] = None
        return report
    if not gate.ok:
        report["preEnqueue"] = {"plugin": gate.plugin, "message": gate.message()}
    ex = explain(fw, pod, snapshot)
    report.update(_explanation(ex, limits, node))
    rng = random.Random(seed)
    with assumed(snapshot) as added:
        placements, failure = _place(fw, pods, snapshot, percentage, rng, added)
        if added:  # the last placed, with every placed one assumed
            report["permit"] = _permit(fw, *added[-1])
    report["chosen"] = placements[0] if placements else None
    if failure is not None:
        report["message"] = failure[0]
        report["preemption"] = _preemption(fw, failure[1], snapshot, limits)
    if len(pods) > 1:
        counts = Counter(placements)
        report["replicas"] = {
            "requested": len(pods),
            "fit": len(placements),
            "nodes": len(counts),
            "placements": dict(counts.most_common(limits.listed * 10)),
        }
    return report


def _unknowable(gate: Status) -> bool:
    """A gate the what-if cannot judge: GangScheduling's count of a gang's pods takes
    the pending ones, which only the queue knows (a worker sees the placed ones). The
    what-if goes on and says what Permit would do with the pods it sees placed."""
    return gate.plugin == GANG_SCHEDULING and gate.message() == GANG_WAITING_FOR_PODS


def _permit(fw: Framework, pod: PodInfo, node: str) -> dict[str, Any] | None:
    """What Permit would say to `pod` on `node`: None when every plugin allows it, else
    the plugins that would make it wait (with their timeouts and, for a gang, how many
    of its minCount pods are placed) or the one that would reject it. Signals a plugin
    sends (allowing a gang's waiting pods) are dropped: a what-if writes nothing."""
    state = CycleState()
    waits: list[dict[str, Any]] = []
    try:
        for plugin in fw.permits:
            status, timeout = plugin.permit(state, pod, node)
            if status.code == Code.WAIT:
                wait: dict[str, Any] = {"plugin": plugin.name, "message": status.message()}
                wait["timeoutSeconds"] = min(max(timeout, 0.0), MAX_PERMIT_TIMEOUT)
                if isinstance(plugin, GangProgress):
                    wait.update(plugin.progress(pod))
                waits.append(wait)
            elif not status.ok:
                return {"rejected": {"plugin": plugin.name, "message": status.message()}}
    finally:
        fw.handle.take_permit_signals()
    return {"wait": waits} if waits else None


def _explanation(ex: Explanation, limits: WhatIfLimits, node: str | None) -> dict[str, Any]:
    pre = ex.pre_filter
    groups, omitted = group_nodes(
        {n: ex.verdicts(n) for n in (*ex.failed, *ex.not_candidates)}, ex.nodes, limits
    )
    if not pre.ok:  # every node rejected alike, by the PreFilter plugin
        verdicts = {pre.plugin or "PreFilter": verdict_of(pre)}
        groups = [{"count": len(ex.nodes), "verdicts": verdicts, "nodes": ex.nodes[:1]}]
    best = ex.best
    top = sorted(ex.totals.items(), key=lambda kv: (-kv[1], kv[0]))[: limits.top]
    out: dict[str, Any] = {
        "preFilter": None if pre.ok else {"plugin": pre.plugin, "message": pre.message()},
        "feasible": len(ex.feasible),
        "groups": groups,
        "groupsOmitted": omitted,
        "best": best[: limits.listed],
        "bestCount": len(best),
        "scores": [
            {"node": name, "total": total, "plugins": ex.node_scores(name)} for name, total in top
        ],
    }
    if node is not None:
        out["node"] = {"name": node, **ex.node_report(node)} if node in ex.nodes else None
    return out


def _place(
    fw: Framework,
    pods: Sequence[PodInfo],
    snapshot: ClusterSnapshot,
    percentage: int | None,
    rng: random.Random,
    added: list[tuple[PodInfo, str]],
) -> tuple[list[str], tuple[str, PostFilterResult | None] | None]:
    """The scheduling cycle's own code per replica, each placed one assumed before the
    next; stops at the first that fits nowhere: its FailedScheduling message and what
    PostFilter (preemption) decided for it."""
    placements: list[str] = []
    for pod in pods:
        scheduler = Scheduler(fw, percentage_of_nodes_to_score=percentage, rng=rng)
        state = CycleState()
        try:
            host = scheduler.schedule_pod(state, pod, snapshot).suggested_host
        except FitError as err:
            result = scheduler.run_post_filter(state, pod, err)
            return placements, (err.message(), result)
        except SchedulingError as err:
            return placements, (str(err), None)
        snapshot.add_pod(pod, host)
        added.append((pod, host))
        placements.append(host)
    return placements, None


def _preemption(
    fw: Framework,
    result: PostFilterResult | None,
    snapshot: ClusterSnapshot,
    limits: WhatIfLimits,
) -> dict[str, Any] | None:
    """What the act phase would do: the nominated node, the victims, and the PDBs they
    touch (violated: more of its pods would go than it allows now)."""
    if result is None or not result.nominated_node_name:
        return None
    pdbs = fw.handle.pdbs
    allowed = AllowedDisruptions().of(snapshot, pdbs) if pdbs else []
    touched = []
    for pdb, n in zip(pdbs, allowed, strict=True):
        hit = [v.key for v in result.victims if pdb.matches(v.pod)]
        if hit:
            touched.append(
                {"name": pdb.key, "allowed": n, "victims": hit, "violated": len(hit) > n}
            )
    return {
        "node": result.nominated_node_name,
        "victims": [
            {"pod": v.key, "priority": v.pod.spec.priority} for v in result.victims[: limits.listed]
        ],
        "victimCount": len(result.victims),
        "pdbs": touched,
        "lowerNominated": [p.key for p in result.lower_nominated[: limits.listed]],
    }
