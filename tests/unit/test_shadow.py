"""Shadow scheduling's replay core over synthetic cluster logs: the running
configuration finds no difference; a changed scoring strategy finds exactly the
differences a direct computation of the scores predicts; a changed Filter set turns
placements into unschedulable pods and back; the report is the same twice."""

from __future__ import annotations

import copy
import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import pytest

from shared.config import SchedulerConfiguration, parse_config
from shared.framework.shadow import (
    ADDED,
    DELETED,
    MODIFIED,
    SAME,
    SCHEDULABLE,
    UNSCHEDULABLE,
    LogEvent,
    Shadow,
    backfilled,
)
from shared.framework.shadow_report import report
from shared.framework.snapshot import ClusterSnapshot
from shared.plugins import REGISTRY
from shared.tools.cli.live import CliError
from shared.tools.cli.shadow import parse_since
from shared.tools.synthetic import make_node, make_pod
from tests.shadow_scores import GI, Cluster, fit_score, fit_weight_config, prefer_zone

# Nodes of different sizes; every pod asks cpu and memory in the nodes' proportion
# (1 cpu : 4Gi), so that BalancedAllocation scores every node alike and only
# NodeResourcesFit's strategy tells them apart.
NODES = [("n1", 4, "zone-a"), ("n2", 8, "zone-a"), ("n3", 4, "zone-b"), ("n4", 6, "zone-b")]
NODE_ZONES = {n: z for n, _, z in NODES}
POD_CPUS = [1, 2, 1, 1, 3, 1, 2, 1, 1, 2]


def config_of(doc: dict[str, Any] | None = None) -> SchedulerConfiguration:
    base = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
    return parse_config({**base, **(doc or {})})


MOST_ALLOCATED = config_of(
    {
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "pluginConfig": [
                    {
                        "name": "NodeResourcesFit",
                        "args": {"scoringStrategy": {"type": "MostAllocated"}},
                    }
                ],
            }
        ]
    }
)
NO_TAINTS = config_of(
    {
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "plugins": {"multiPoint": {"disabled": [{"name": "TaintToleration"}]}},
            }
        ]
    }
)


@dataclass
class Log:
    """A cluster stream being written: each event gets the next sequence."""

    events: list[LogEvent] = field(default_factory=list)

    def put(self, kind: str, key: str, obj: dict[str, Any], type_: str = MODIFIED) -> None:
        self.events.append(LogEvent(len(self.events) + 1, kind, key, type_, copy.deepcopy(obj)))


def scheduled_log(zone: str = "") -> tuple[Log, list[tuple[str, list[str], list[str], str]]]:
    """A log of a LeastAllocated scheduler's work, by hand: nodes, then per pod its
    creation and its binding to the first of the best nodes; a 9-cpu pod fits nowhere
    and gets PodScheduled=False. Also, per bound pod: (pod, the best by LeastAllocated,
    the best by MostAllocated, the real node), each against the cluster before it.
    With `zone`, the pods prefer it (NodeAffinity)."""
    log, cluster = Log(), Cluster.of(NODES)
    for name, cpu, node_zone in NODES:
        node = make_node(name, cpu=str(cpu), memory=f"{cpu * 4}Gi", zone=node_zone)
        log.put("node", name, node, ADDED)
    expected = []
    for i, cpu in enumerate(POD_CPUS):
        pod = make_pod(f"web-{i}", cpu=str(cpu), memory=f"{cpu * 4}Gi")
        if zone:
            prefer_zone(pod, zone)
        key = f"default/web-{i}"
        log.put("pod", key, pod, ADDED)
        least = cluster.best(cpu, most=False, zone=zone)
        most = cluster.best(cpu, most=True, zone=zone)
        real = least[0]
        expected.append((key, least, most, real))
        cluster.place(real, cpu)
        pod["spec"]["nodeName"] = real
        pod["status"] = {"conditions": [{"type": "PodScheduled", "status": "True"}]}
        log.put("pod", key, pod)
    big = make_pod("big", cpu="9", memory="36Gi")
    log.put("pod", "default/big", big, ADDED)
    big["status"] = {
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    }
    log.put("pod", "default/big", big)
    return log, expected


def replay(config: SchedulerConfiguration, events: list[LogEvent], **kw: Any) -> Shadow:
    shadow = Shadow(config, REGISTRY, **kw)
    for ev in backfilled(events):
        shadow.feed(ev)
    return shadow


def test_the_running_configuration_reports_no_difference() -> None:
    log, expected = scheduled_log()
    shadow = replay(config_of(), log.events)
    out = report(shadow)
    assert out["decisions"] == len(POD_CPUS) + 1  # every binding, and the FailedScheduling
    assert out["differences"] == 0
    assert out["counts"] == {SAME: len(POD_CPUS) + 1}
    # the candidate's best is the hand-computed LeastAllocated best, pod by pod
    bound = [d for d in shadow.decisions if d.real is not None]
    assert [(d.pod, d.shadow) for d in bound] == [(k, least) for k, least, _, _ in expected]
    real, shadowed = out["utilisation"]["real"], out["utilisation"]["shadow"]
    assert real == shadowed


def test_most_allocated_reports_the_differences_the_scores_predict() -> None:
    log, expected = scheduled_log()
    shadow = replay(MOST_ALLOCATED, log.events)
    out = report(shadow)
    predicted = [(key, most, real) for key, _, most, real in expected if real not in most]
    assert predicted, "the example must move some pods"
    assert [(d["pod"], d["shadowBest"], d["real"]) for d in out["differing"]] == predicted
    assert all(d["verdict"] == "elsewhere" for d in out["differing"])
    # the cause: NodeResourcesFit alone (weight 1), by the hand-computed score difference
    cluster = Cluster.of(NODES)
    cpus = dict(zip((k for k, *_ in expected), POD_CPUS, strict=True))
    by_pod = {d["pod"]: d for d in out["differing"]}
    for key, _, most, real in expected:
        cpu = cpus[key]
        if key in by_pod:
            ask = {"cpu": cpu * 1000, "memory": cpu * 4 * GI}

            def score(n: str, ask: dict[str, int] = ask) -> int:
                free = {r: cluster.free[n][r] - ask[r] for r in ask}
                return fit_score(free, cluster.alloc[n], most=True)

            assert by_pod[key]["scoreDeltas"] == {"NodeResourcesFit": score(most[0]) - score(real)}
        cluster.place(real, cpu)
    # utilisation under the candidate: each differing pod on the candidate's node
    moved = {d["pod"]: d["shadow"] for d in out["differing"]}
    shadow_cpu = {n: 0 for n, _, _ in NODES}
    for key, *_, real in expected:
        shadow_cpu[moved.get(key, real)] += cpus[key] * 1000
    nodes = out["utilisation"]["shadow"]["nodes"]
    assert {n: v["cpu"]["requested"] for n, v in nodes.items()} == shadow_cpu


def test_a_changed_weight_reports_the_differences_the_scores_predict() -> None:
    """The pods prefer zone-b (NodeAffinity, weight 2: +200 there); with
    NodeResourcesFit's weight 10 instead of 1, room outweighs the preference."""
    log, expected = scheduled_log(zone="zone-b")
    assert report(replay(config_of(), log.events))["differences"] == 0
    out = report(replay(config_of(fit_weight_config(10)), log.events))
    cluster, predicted = Cluster.of(NODES), []
    for (key, *_, real), cpu in zip(expected, POD_CPUS, strict=True):
        best = cluster.best(cpu, most=False, fit_weight=10, zone="zone-b")
        if real not in best:
            fit = cluster.scores(cpu, most=False)  # NodeResourcesFit alone, weight 1
            deltas = {
                "NodeResourcesFit": 10 * (fit[best[0]] - fit[real]),
                "NodeAffinity": 200 * (NODE_ZONES[best[0]] == "zone-b")
                - 200 * (NODE_ZONES[real] == "zone-b"),
            }
            predicted.append((key, real, best, {p: d for p, d in deltas.items() if d}))
        cluster.place(real, cpu)
    assert predicted, "the example must move some pods"
    got = [(d["pod"], d["real"], d["shadowBest"], d["scoreDeltas"]) for d in out["differing"]]
    assert got == predicted


def test_a_filter_change_makes_pods_unschedulable_or_schedulable() -> None:
    """Reality ran without TaintToleration: a pod went to the tainted node, another
    found no node; the default configuration keeps the first off it and the other
    still fits nowhere, while a log of the default scheduler, shadowed without the
    plugin, shows the pending pod fitting."""
    log = Log()
    tainted = make_node("t1", cpu="2", memory="8Gi")
    tainted["spec"] = {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}
    log.put("node", "t1", tainted, ADDED)
    pod = make_pod("a", cpu="1", memory="1Gi")
    log.put("pod", "default/a", pod, ADDED)
    pod["spec"]["nodeName"] = "t1"
    log.put("pod", "default/a", pod)
    out = report(replay(config_of(), log.events))
    (d,) = out["differing"]
    assert d["verdict"] == UNSCHEDULABLE and d["real"] == "t1" and d["shadow"] is None
    assert list(d["rejectedBy"]) == ["TaintToleration"]
    assert "untolerated taint" in d["rejectedBy"]["TaintToleration"]

    log = Log()
    log.put("node", "t1", tainted, ADDED)
    pod = make_pod("b", cpu="1", memory="1Gi")
    log.put("pod", "default/b", pod, ADDED)
    pod["status"] = {
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    }
    log.put("pod", "default/b", pod)
    assert report(replay(config_of(), log.events))["differences"] == 0
    out = report(replay(NO_TAINTS, log.events))
    (d,) = out["differing"]
    assert d["verdict"] == SCHEDULABLE and d["shadow"] == "t1"
    assert out["utilisation"]["shadow"]["nodes"]["t1"]["cpu"]["requested"] == 1000
    assert out["utilisation"]["real"]["nodes"]["t1"]["cpu"]["requested"] == 0


def test_since_compares_later_decisions_only_on_the_state_before() -> None:
    log, expected = scheduled_log()
    since = log.events[len(NODES) + 2 * 4].seq  # the fifth pod's creation
    shadow = replay(MOST_ALLOCATED, log.events, since_seq=since)
    compared = [d.pod for d in shadow.decisions]
    assert compared == [k for k, *_ in expected[4:]] + ["default/big"]
    full = replay(MOST_ALLOCATED, log.events)
    assert [d.to_dict() for d in full.decisions if d.seq >= since] == [
        d.to_dict() for d in shadow.decisions
    ]


def test_objects_known_before_the_log_start_are_backfilled() -> None:
    """The stream keeps two versions per subject: a node whose first retained event is
    a MODIFIED after the pods were bound to it counts from the start."""
    log, expected = scheduled_log()
    node = next(e for e in log.events if e.key == "n2")
    events = [e for e in log.events if e is not node]
    events.append(LogEvent(len(log.events) + 1, "node", "n2", MODIFIED, node.obj))
    out = report(replay(config_of(), events))
    assert out["differences"] == 0
    # a deleted pod leaves its node: n2 holds the other pods reality put there
    last = next(e for e in reversed(events) if e.key == "default/web-0")
    deleted = LogEvent(len(events) + 1, "pod", "default/web-0", DELETED, last.obj)
    out = report(replay(config_of(), [*events, deleted]))
    cpus = dict(zip((k for k, *_ in expected), POD_CPUS, strict=True))
    on_n2 = [k for k, *_, real in expected if real == "n2" and k != "default/web-0"]
    requested = out["utilisation"]["real"]["nodes"]["n2"]["cpu"]["requested"]
    assert requested == sum(cpus[k] * 1000 for k in on_n2)


def test_the_report_is_the_same_twice() -> None:
    log, _ = scheduled_log()
    assert report(replay(MOST_ALLOCATED, log.events)) == report(replay(MOST_ALLOCATED, log.events))


def test_diverge_follows_the_candidates_own_placements() -> None:
    """--diverge: each pod goes where the candidate put it, so that later decisions
    meet the candidate's cluster (computed here by hand) and no node is overcommitted."""
    log, expected = scheduled_log()
    shadow = replay(MOST_ALLOCATED, log.events, diverge=True)
    out = report(shadow)
    assert out["mode"] == "diverge"
    mine, predicted, where = Cluster.of(NODES), [], {}
    for (key, *_, real), cpu in zip(expected, POD_CPUS, strict=True):
        most = mine.best(cpu, most=True)
        node = real if real in most else most[0]
        if node != real:
            predicted.append((key, real, most))
        mine.place(node, cpu)
        where[key] = node
    assert [(d["pod"], d["real"], d["shadowBest"]) for d in out["differing"]] == predicted
    assert {k: n for k, n in shadow.placed.items() if k in where} == where
    nodes = out["utilisation"]["shadow"]["nodes"]
    assert all(n[r]["fraction"] <= 1 for n in nodes.values() for r in ("cpu", "memory"))
    # the per-decision model, on the same log, differs from it
    assert report(replay(MOST_ALLOCATED, log.events))["differing"] != out["differing"]


def test_since_reads_a_sequence_or_a_time() -> None:
    assert parse_since("42") == (42, None)
    assert parse_since("2026-11-24T09:00:00Z") == (0, dt.datetime(2026, 11, 24, 9, tzinfo=dt.UTC))
    assert parse_since("2026-11-24T09:00:00") == (0, dt.datetime(2026, 11, 24, 9, tzinfo=dt.UTC))
    with pytest.raises(CliError):
        parse_since("yesterday")


def test_a_time_since_compares_the_decisions_recorded_from_then() -> None:
    log, _ = scheduled_log()
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    timed = [
        LogEvent(e.seq, e.kind, e.key, e.type, e.obj, start + dt.timedelta(seconds=e.seq))
        for e in log.events
    ]
    since = start + dt.timedelta(seconds=timed[-4].seq)
    shadow = replay(MOST_ALLOCATED, timed, since_time=since)
    assert [d.seq for d in shadow.decisions] == [e.seq for e in timed[-3:] if e.type == MODIFIED]


class Rebuilding(Shadow):
    """The replay with a snapshot built afresh for every decision."""

    def snapshot(self) -> ClusterSnapshot:
        self._snap = None
        return super().snapshot()


def test_the_kept_snapshot_decides_as_a_fresh_one() -> None:
    """Nodes changed, added and removed, pods deleted, in the middle of the log: the
    snapshot refreshed in place gives the decisions a rebuilt one gives."""
    log, _ = scheduled_log()
    events = list(log.events)
    pods_from = len(NODES)
    shrunk = make_node("n2", cpu="5", memory="20Gi", zone="zone-a")
    changes = [
        LogEvent(0, "node", "n2", MODIFIED, shrunk),
        LogEvent(0, "node", "n5", ADDED, make_node("n5", cpu="6", memory="24Gi", zone="zone-c")),
        LogEvent(0, "pod", "default/web-0", DELETED, events[pods_from + 1].obj),
        LogEvent(0, "node", "n3", DELETED, events[2].obj),
    ]
    mixed = events[: pods_from + 8] + changes + events[pods_from + 8 :]
    mixed = [LogEvent(i + 1, e.kind, e.key, e.type, e.obj) for i, e in enumerate(mixed)]
    for config in (config_of(), MOST_ALLOCATED):
        kept, fresh = Shadow(config, REGISTRY), Rebuilding(config, REGISTRY)
        for ev in mixed:
            kept.feed(ev)
            fresh.feed(ev)
        assert [d.to_dict() for d in kept.decisions] == [d.to_dict() for d in fresh.decisions]
        assert report(kept) == report(fresh)
