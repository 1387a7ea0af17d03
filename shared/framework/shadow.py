"""Shadow scheduling (pure): the recorded cluster history replayed through a candidate
configuration, each real decision set beside the one the candidate would have taken.

The replay reads the KSCHED_CLUSTER log in stream order. Every event updates the
replay's cluster (nodes, pods on their nodes, Services and controllers) as it updated
the real one. A pod's real decision is what the log shows: the event that writes its
`spec.nodeName` (the binder's binding), or a new `PodScheduled=False` condition with
reason Unschedulable (a FailedScheduling). For each one the candidate schedules the pod
against the replay's cluster just before that event, i.e. as the real scheduler saw it,
and then the real event is applied: the replay stays on the real history and reports
per-decision differences, not a divergent alternative history.

The comparison rule, which makes the report deterministic: the candidate scores every
feasible node (kube samples numFeasibleNodesToFind nodes from a rotating index, then
draws at random among the best-scored); a real node that is feasible and among the
candidate's best-scored nodes is no difference. Otherwise the pod went elsewhere (the
per-plugin weighted score deltas between the candidate's node, the first of its best by
name, and the real one; or the Filter plugins that reject the real node), would become
unschedulable (the plugins rejecting the real node), or schedulable.

The log keeps two versions per subject: an object whose first retained event is a
MODIFIED existed before, and is taken as that version from the start (`backfilled`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.config import SchedulerConfiguration
from shared.framework.explain import PASSED, SKIPPED, Explanation, explain
from shared.framework.interface import ClusterObjects
from shared.framework.profile import PluginFactory
from shared.framework.runtime import Framework
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.types import NodeInfo, PodInfo

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"
# Stream kinds (subjects.CLUSTER_KINDS) that plugins read as ClusterObjects, by API kind.
OWNER_KINDS = {
    "service": "Service",
    "replicaset": "ReplicaSet",
    "statefulset": "StatefulSet",
    "replicationcontroller": "ReplicationController",
}

LISTED_BEST = 10  # of the candidate's tied best nodes, listed per decision (all counted)

# What a decision is, compared with reality.
SAME = "same"
ELSEWHERE = "elsewhere"  # placed on another node
UNSCHEDULABLE = "unschedulable"  # placed in reality, fits nowhere for the candidate
SCHEDULABLE = "schedulable"  # unschedulable in reality, fits for the candidate
UNSERVED = "unserved"  # no candidate profile serves the pod's schedulerName


@dataclass(frozen=True)
class LogEvent:
    """One message of the cluster stream: a watch event on the object its subject names."""

    seq: int
    kind: str  # subjects.CLUSTER_KINDS key: pod, node, service, ...
    key: str  # namespace/name, or name for a cluster-scoped kind
    type: str  # ADDED | MODIFIED | DELETED
    obj: dict[str, Any]
    at: dt.datetime | None = None


@dataclass
class Decision:
    """One real decision and the candidate's."""

    seq: int
    pod: str
    verdict: str  # SAME, ELSEWHERE, UNSCHEDULABLE, SCHEDULABLE, UNSERVED
    real: str | None  # the node reality chose; None: unschedulable
    shadow: list[str]  # the candidate's best-scored nodes (sorted); [] fits nowhere
    feasible: int = 0  # nodes feasible for the candidate
    # ELSEWHERE by score: plugin -> candidate's node minus real node (weighted score)
    score_deltas: dict[str, int] = field(default_factory=dict)
    # the real node rejected: plugin -> verdict
    rejected_by: dict[str, str] = field(default_factory=dict)
    at: dt.datetime | None = None

    @property
    def differs(self) -> bool:
        return self.verdict != SAME

    @property
    def shadow_node(self) -> str | None:
        """Where the candidate would have put the pod: reality's node when tied with its
        best, else the first of its best by name."""
        if not self.shadow:
            return None
        return self.real if self.real in self.shadow else self.shadow[0]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "seq": self.seq,
            "pod": self.pod,
            "verdict": self.verdict,
            "real": self.real,
            "shadow": self.shadow_node,
            "shadowBest": self.shadow[:LISTED_BEST],
            "shadowBestCount": len(self.shadow),
            "feasible": self.feasible,
        }
        if self.score_deltas:
            out["scoreDeltas"] = self.score_deltas
        if self.rejected_by:
            out["rejectedBy"] = self.rejected_by
        if self.at is not None:
            out["at"] = self.at.isoformat()
        return out


def real_decision(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> str | None:
    """What a pod event records of the real scheduler: "bind" (spec.nodeName written),
    "unschedulable" (a new PodScheduled=False, Unschedulable), or None."""
    if node_of(after):
        return "bind" if before is not None and not node_of(before) else None
    cond = _unschedulable(after)
    if cond is not None and (before is None or _unschedulable(before) != cond):
        return "unschedulable"
    return None


def node_of(pod: Mapping[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def _unschedulable(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if (
            isinstance(cond, dict)
            and cond.get("type") == "PodScheduled"
            and cond.get("status") == "False"
            and cond.get("reason") == "Unschedulable"
        ):
            return cond
    return None


def _bound(pod: dict[str, Any], node: str) -> dict[str, Any]:
    """The pod as the candidate would have bound it (--diverge)."""
    return {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": node}}


def backfilled(events: Iterable[LogEvent]) -> list[LogEvent]:
    """The events, preceded (at seq 0) by the objects whose first retained event is a
    MODIFIED: they existed before the log's start. A pending pod is left out (it weighs
    on no node, and its first event may itself be a decision)."""
    events = list(events)
    first: dict[tuple[str, str], LogEvent] = {}
    for ev in events:
        first.setdefault((ev.kind, ev.key), ev)
    earlier = [
        LogEvent(0, ev.kind, ev.key, ADDED, ev.obj)
        for ev in first.values()
        if ev.type == MODIFIED and (ev.kind != "pod" or node_of(ev.obj))
    ]
    return earlier + events


class Shadow:
    """The replay: `feed` each event in stream order; it returns the decision compared,
    if the event recorded one at or after `since` (a sequence or a time)."""

    def __init__(
        self,
        config: SchedulerConfiguration,
        registry: Mapping[str, PluginFactory],
        since_seq: int = 0,
        since_time: dt.datetime | None = None,
        diverge: bool = False,
    ) -> None:
        self.profiles = {p.scheduler_name: p for p in config.profiles}
        self.registry = registry  # the plugins (the framework imports none: see runtime)
        self.frameworks: dict[str, Framework] = {}
        self.since_seq, self.since_time = since_seq, since_time
        self.nodes: dict[str, NodeInfo] = {}
        self.pods: dict[str, dict[str, Any]] = {}  # every pod, bound or pending
        self.placed: dict[str, str] = {}  # pod -> the node the replay holds it on
        # --diverge: the candidate's own placements (None: fits nowhere) replace the
        # real ones in the replay, which then follows the candidate's history
        self.diverge = diverge
        self.diverged: dict[str, str | None] = {}
        # The snapshot is kept from one decision to the next, as the worker keeps its
        # own: nodes whose pods or object changed are refreshed in place (columns
        # included); a change to the set of nodes rebuilds it.
        self._snap: ClusterSnapshot | None = None
        self._dirty: set[str] = set()
        self._images_dirty = False
        self.objects = ClusterObjects()
        self.decisions: list[Decision] = []

    # --- the replay's cluster -------------------------------------------------------

    def feed(self, ev: LogEvent) -> Decision | None:
        decision = None
        if ev.kind == "pod":
            before = self.pods.get(ev.key)
            self._unplace(ev.key)  # a pod being scheduled is on no node
            if ev.type != DELETED and self._compared(ev):
                decision = self._decide(ev, before)
            if decision is not None and self.diverge and decision.verdict != UNSERVED:
                self.diverged[ev.key] = decision.shadow_node
            self._apply_pod(ev)
        elif ev.kind == "node":
            self._apply_node(ev)
        elif ev.kind in OWNER_KINDS:
            self._apply_owner(ev)
        if decision is not None:
            self.decisions.append(decision)
        return decision

    def _compared(self, ev: LogEvent) -> bool:
        if ev.seq < self.since_seq or ev.seq == 0:
            return False
        return self.since_time is None or (ev.at is not None and ev.at >= self.since_time)

    def _unplace(self, key: str) -> None:
        node = self.placed.pop(key, None)
        info = self.nodes.get(node) if node else None
        if info is not None:
            info.remove_pod(key)
            self._dirty.add(info.name)

    def _apply_pod(self, ev: LogEvent) -> None:
        if ev.type == DELETED:
            self.pods.pop(ev.key, None)
            self.diverged.pop(ev.key, None)
            return
        self.pods[ev.key] = ev.obj
        node = self.diverged[ev.key] if ev.key in self.diverged else node_of(ev.obj)
        if node:
            pod = ev.obj if node == node_of(ev.obj) else _bound(ev.obj, node)
            self._node_info(node).add_pod(PodInfo.lazy(pod))
            self.placed[ev.key] = node
            self._dirty.add(node)

    def _node_info(self, name: str) -> NodeInfo:
        info = self.nodes.get(name)
        if info is None:
            info = self.nodes[name] = NodeInfo(name)
            self._snap = None
        return info

    def _apply_node(self, ev: LogEvent) -> None:
        info = self.nodes.get(ev.key)
        if ev.type == DELETED:
            self._snap = None
            if info is not None and info.pods:
                info.set_node(None)  # its pods stay until they go (kube's cache does too)
            else:
                self.nodes.pop(ev.key, None)
            return
        if info is None or info.raw_node is None:
            self._snap = None  # a node that was not one is
        info = self._node_info(ev.key)
        info.set_node(ev.obj)
        self._dirty.add(ev.key)
        self._images_dirty = True

    def _apply_owner(self, ev: LogEvent) -> None:
        kind = OWNER_KINDS[ev.kind]
        namespace, _, name = ev.key.partition("/")
        if ev.type == DELETED:
            self.objects.remove(kind, namespace, name)
            return
        with contextlib.suppress(ValueError):  # the watcher refused it too (and undid it)
            self.objects.add({**ev.obj, "kind": kind})

    def snapshot(self) -> ClusterSnapshot:
        """The replay's cluster now (nodes in name order)."""
        snap = self._snap
        if snap is None:
            snap = ClusterSnapshot(sorted(self.nodes.values(), key=lambda n: n.name), self.objects)
            snap.fill_image_states()
        else:
            for name in sorted(self._dirty):
                snap.node_changed(name)
            if self._images_dirty:
                snap.fill_image_states()
        self._snap, self._dirty, self._images_dirty = snap, set(), False
        return snap

    # --- the comparison -------------------------------------------------------------

    def _framework(self, scheduler_name: str) -> Framework | None:
        if scheduler_name not in self.profiles:
            return None
        if scheduler_name not in self.frameworks:
            self.frameworks[scheduler_name] = Framework.from_profile(
                self.profiles[scheduler_name], self.registry
            )
        return self.frameworks[scheduler_name]

    def _decide(self, ev: LogEvent, before: dict[str, Any] | None) -> Decision | None:
        what = real_decision(before, ev.obj)
        if what is None:
            return None
        real = node_of(ev.obj) if what == "bind" else None
        # the pod as it was scheduled: the version before its binding
        pending = before if what == "bind" and before is not None else ev.obj
        pod = PodInfo.of(pending)
        fw = self._framework(pod.pod.spec.scheduler_name)
        if fw is None:
            return Decision(ev.seq, ev.key, UNSERVED, real, [], at=ev.at)
        ex = explain(fw, pod, self.snapshot())
        return compare(ex, ev.seq, ev.key, real, ev.at)


def compare(
    ex: Explanation, seq: int, pod: str, real: str | None, at: dt.datetime | None = None
) -> Decision:
    """The rule of the module docstring, on the candidate's explanation of the pod."""
    best = sorted(ex.best) if ex.feasible else []
    d = Decision(seq, pod, SAME, real, best, len(ex.feasible), at=at)
    if real is None:
        d.verdict = SCHEDULABLE if best else SAME
        return d
    if real in best:
        return d
    if real not in ex.totals:  # the candidate's Filter (or PreFilter) rejects it
        d.rejected_by = {
            p: v for p, v in ex.verdicts(real).items() if v not in (PASSED, SKIPPED)
        } or {"": "not a node of the cluster"}
    d.verdict = ELSEWHERE if best else UNSCHEDULABLE
    if best and real in ex.totals:
        mine, theirs = ex.node_scores(best[0]), ex.node_scores(real)
        d.score_deltas = {
            p: s["weighted"] - theirs[p]["weighted"]
            for p, s in mine.items()
            if s["weighted"] != theirs[p]["weighted"]
        }
    return d
