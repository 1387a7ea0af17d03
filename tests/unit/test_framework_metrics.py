"""The framework's durations (instrument.py): which extension points it records on
every cycle, which plugin calls it records in a sampled cycle only, with kube's label
values, and how the Prometheus recorder exports them (kube's buckets)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

import pytest
from prometheus_client import CollectorRegistry

from shared.config import Profile
from shared.framework.diagnosis import FitError
from shared.framework.instrument import PLUGIN_METRICS_SAMPLE_PERCENT, status_label
from shared.framework.runtime import Framework
from shared.framework.schedule_one import Scheduler
from shared.framework.snapshot import ClusterSnapshot
from shared.framework.status import Code, Status
from shared.framework.types import NodeInfo, PodInfo
from shared.plugins import REGISTRY
from shared.runtime.framework_metrics import PrometheusRecorder, record_frameworks
from shared.tools.synthetic import make_node, make_pod

PROFILE = "default-scheduler"


@dataclass
class Recorded:
    """A MetricsRecorder that keeps what it is told."""

    points: list[tuple[str, str, str]] = field(default_factory=list)
    plugins: list[tuple[str, str, str]] = field(default_factory=list)

    def extension_point(self, point: str, status: str, profile: str, seconds: float) -> None:
        assert seconds >= 0
        self.points.append((point, status, profile))

    def plugin(self, point: str, plugin: str, status: str, seconds: float) -> None:
        assert seconds >= 0
        self.plugins.append((point, plugin, status))


def nodes(n: int, cpu: str = "4") -> list[NodeInfo]:
    infos = []
    for i in range(n):
        info = NodeInfo(f"n{i}")
        info.set_node(make_node(info.name, cpu=cpu))
        infos.append(info)
    return infos


def framework(recorded: Recorded) -> Framework:
    fw = Framework.from_profile(Profile(), REGISTRY)
    fw.recorder = recorded
    return fw


@pytest.mark.parametrize("batch", [True, False], ids=["batch path", "per-node path"])
def test_a_sampled_cycle_records_extension_points_and_each_plugin(batch: bool) -> None:
    recorded = Recorded()
    fw = framework(recorded)
    state = fw.new_cycle_state()
    state.record_plugin_metrics = True  # this cycle is one of the sampled ones
    pod = PodInfo.of(make_pod("p"))
    result = Scheduler(fw, rng=random.Random(1), batch=batch).schedule_pod(
        state, pod, ClusterSnapshot(nodes(3))
    )
    fw.run_reserve_plugins_reserve(state, pod, result.suggested_host)

    # kube records Filter per plugin only (its extension point runs once per node).
    assert recorded.points == [
        ("PreFilter", "Success", PROFILE),
        ("PreScore", "Success", PROFILE),
        ("Score", "Success", PROFILE),
        ("Reserve", "Success", PROFILE),
    ]
    by_point: dict[str, set[str]] = {}
    for point, plugin, status in recorded.plugins:
        assert status in ("Success", "Skip")
        by_point.setdefault(point, set()).add(plugin)
    assert by_point["PreFilter"] == {p.name for p in fw.pre_filters}
    filters = {p.name for p in fw.active_filters(state)}  # not skipped by their PreFilter
    assert filters and by_point["Filter"] == filters
    assert by_point["PreScore"] == {p.name for p in fw.pre_scores}
    assert by_point["Score"] == {p.name for p in fw.scores} - state.skip_score_plugins
    assert "ScoreExtensionNormalize" in by_point
    assert by_point.get("Reserve", set()) == {p.name for p in fw.reserves}
    filter_calls = sum(1 for point, _, _ in recorded.plugins if point == "Filter")
    assert filter_calls == (len(filters) if batch else 3 * len(filters))


def test_a_cycle_not_sampled_records_extension_points_only() -> None:
    recorded = Recorded()
    fw = framework(recorded)
    state = fw.new_cycle_state()
    state.record_plugin_metrics = False
    Scheduler(fw, rng=random.Random(1)).schedule_pod(
        state, PodInfo.of(make_pod("p")), ClusterSnapshot(nodes(3))
    )
    assert [p for p, _, _ in recorded.points] == ["PreFilter", "PreScore", "Score"]
    assert recorded.plugins == []


def test_statuses_are_labelled_with_kubes_code_names() -> None:
    assert [status_label(Status(code)) for code in Code] == [
        "Success",
        "Error",
        "Unschedulable",
        "UnschedulableAndUnresolvable",
        "Wait",
        "Skip",
        "Pending",
    ]
    assert status_label(None) == "Success"  # a nil status

    recorded = Recorded()
    fw = framework(recorded)
    gated = make_pod("gated")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    fw.run_pre_enqueue_plugins(PodInfo.lazy(gated))
    assert recorded.points == [("PreEnqueue", "UnschedulableAndUnresolvable", PROFILE)]


def test_a_pod_that_fits_nowhere_records_post_filter_and_unreserve_reports_success() -> None:
    recorded = Recorded()
    fw = framework(recorded)
    state = fw.new_cycle_state()
    pod = PodInfo.of(make_pod("big", cpu="64"))
    scheduler = Scheduler(fw, rng=random.Random(1))
    with pytest.raises(FitError) as err:
        scheduler.schedule_pod(state, pod, ClusterSnapshot(nodes(2)))
    scheduler.run_post_filter(state, pod, err.value)
    fw.run_reserve_plugins_unreserve(state, pod, "n0")
    assert recorded.points == [
        ("PreFilter", "Success", PROFILE),
        ("PostFilter", "Unschedulable", PROFILE),
        ("Unreserve", "Success", PROFILE),
    ]


def test_binding_cycle_points_are_recorded() -> None:
    recorded = Recorded()
    fw = framework(recorded)
    state = fw.new_cycle_state()
    state.record_plugin_metrics = True
    pod = PodInfo.of(make_pod("p"))

    async def bind_points() -> None:
        await fw.run_pre_bind_plugins(state, pod, "n0")
        await fw.run_post_bind_plugins(state, pod, "n0")

    asyncio.run(bind_points())
    assert recorded.points == [("PreBind", "Success", PROFILE), ("PostBind", "Success", PROFILE)]


def test_about_one_cycle_in_ten_is_sampled_and_none_without_a_recorder() -> None:
    fw = framework(Recorded())
    fw._rng = random.Random(7)
    draws = 20_000
    sampled = sum(fw.new_cycle_state().record_plugin_metrics for _ in range(draws))
    assert abs(sampled / draws * 100 - PLUGIN_METRICS_SAMPLE_PERCENT) < 1.0
    unrecorded = Framework.from_profile(Profile(), REGISTRY)
    assert not any(unrecorded.new_cycle_state().record_plugin_metrics for _ in range(1000))


def test_prometheus_recorder_exports_kubes_names_labels_and_buckets() -> None:
    registry = CollectorRegistry()
    recorder = PrometheusRecorder(registry)
    recorder.extension_point("PreFilter", "Success", PROFILE, 0.00015)
    recorder.plugin("Filter", "NodeResourcesFit", "Success", 0.000012)
    recorder.plugin("Filter", "NodeResourcesFit", "Success", 0.000012)

    point = {"extension_point": "PreFilter", "status": "Success", "profile": PROFILE}
    name = "scheduler_framework_extension_point_duration_seconds"
    assert registry.get_sample_value(f"{name}_count", point) == 1
    assert registry.get_sample_value(f"{name}_bucket", {**point, "le": "0.0001"}) == 0
    assert registry.get_sample_value(f"{name}_bucket", {**point, "le": "0.0002"}) == 1
    plugin = {"plugin": "NodeResourcesFit", "extension_point": "Filter", "status": "Success"}
    name = "scheduler_plugin_execution_duration_seconds"
    assert registry.get_sample_value(f"{name}_bucket", {**plugin, "le": "1e-05"}) == 0
    # Go's 1e-05*1.5, printed as Go prints it
    le = "1.5000000000000002e-05"
    assert registry.get_sample_value(f"{name}_bucket", {**plugin, "le": le}) == 2

    bounds = {
        m.name: sorted({float(s.labels["le"]) for s in m.samples if s.name.endswith("_bucket")})
        for m in registry.collect()
    }
    # kube: ExponentialBuckets(0.0001, 2, 12) and ExponentialBuckets(0.00001, 1.5, 20)
    points = bounds["scheduler_framework_extension_point_duration_seconds"]
    assert len(points) == 13 and points[0] == 0.0001 and points[-2] == pytest.approx(0.2048)
    plugins = bounds["scheduler_plugin_execution_duration_seconds"]
    assert len(plugins) == 21 and plugins[0] == 0.00001
    assert plugins[-2] == pytest.approx(0.00001 * 1.5**19)


def test_record_frameworks_shares_one_recorder() -> None:
    frameworks = [Framework.from_profile(Profile(), REGISTRY) for _ in range(2)]
    record_frameworks(frameworks, CollectorRegistry())
    assert frameworks[0].recorder is not None
    assert frameworks[0].recorder is frameworks[1].recorder


def test_a_value_on_a_bucket_bound_counts_in_that_bucket_as_prometheus_counts_it() -> None:
    registry = CollectorRegistry()
    recorder = PrometheusRecorder(registry)
    recorder.extension_point("Score", "Success", PROFILE, 0.0001)  # le is inclusive
    recorder.extension_point("Score", "Success", PROFILE, 10.0)  # beyond the last bound
    labels = {"extension_point": "Score", "status": "Success", "profile": PROFILE}
    name = "scheduler_framework_extension_point_duration_seconds"
    assert registry.get_sample_value(f"{name}_bucket", {**labels, "le": "0.0001"}) == 1
    assert registry.get_sample_value(f"{name}_bucket", {**labels, "le": "0.2048"}) == 1
    assert registry.get_sample_value(f"{name}_bucket", {**labels, "le": "+Inf"}) == 2
    assert registry.get_sample_value(f"{name}_sum", labels) == pytest.approx(10.0001)
