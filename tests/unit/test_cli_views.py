"""`ksched get`, `describe`, `top` and `status` rendering (pure), and CLI errors."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from shared.config import Profile
from shared.framework.runtime import Framework
from shared.framework.types import PodInfo
from shared.framework.whatif import what_if
from shared.plugins import REGISTRY
from shared.tools.cli.describe import amount, describe_node, describe_pod
from shared.tools.cli.live import Instance
from shared.tools.cli.main import main
from shared.tools.cli.simulate import build_cluster
from shared.tools.cli.tables import human_duration, node_row, pod_row, pod_status, render_table
from shared.tools.cli.top import (
    Sample,
    histogram_quantile,
    node_usage,
    parse_metrics,
    render_frame,
    render_status,
)
from shared.tools.servers import free_port
from shared.tools.synthetic import make_node, make_pod

NOW = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def created(obj: dict[str, Any], seconds_ago: int) -> dict[str, Any]:
    stamp = (NOW - dt.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    obj["metadata"]["creationTimestamp"] = stamp
    return obj


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (5, "5s"),
        (119, "119s"),
        (150, "2m30s"),
        (600, "10m"),
        (3 * 3600 + 60, "3h1m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 3600, "3d1h"),
        (40 * 86400, "40d"),
        (-5, "<invalid>"),
    ],
)
def test_ages_as_kubectl_prints_them(seconds: int, shown: str) -> None:
    assert human_duration(seconds) == shown


def test_pod_status_and_rows() -> None:
    pending = created(make_pod("p"), 65)
    bound = created(make_pod("b", node="n1"), 5)
    gated = make_pod("g")
    gated["spec"]["schedulingGates"] = [{"name": "wait"}]
    assert [pod_status(p) for p in (pending, bound, gated)] == [
        "Pending",
        "Scheduled",
        "SchedulingGated",
    ]
    assert pod_row(pending, NOW) == ["p", "0/1", "Pending", "0", "65s"]
    assert pod_row(bound, NOW, wide=True)[5:] == ["<none>", "n1", "<none>", "<none>"]
    node = make_node("n1")
    node["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] = ""
    node["spec"] = {"unschedulable": True}
    assert node_row(node, NOW)[:3] == ["n1", "Ready,SchedulingDisabled", "control-plane"]
    assert render_table(["NAME", "AGE"], [["a-long-name", "1s"]]) == (
        "NAME          AGE\na-long-name   1s"
    )


def what_if_report(objects: list[dict[str, Any]], pod: dict[str, Any]) -> dict[str, Any]:
    fw = Framework.from_profile(Profile(), REGISTRY)
    return what_if(fw, [PodInfo.of(pod)], build_cluster(objects))


def test_describe_pod_groups_nodes_with_the_same_verdicts() -> None:
    pod = make_pod("web", cpu="3")
    pod["status"] = {
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    }
    event = {
        "type": "Warning",
        "reason": "FailedScheduling",
        "lastTimestamp": "2024-01-01T11:59:50Z",
        "source": {"component": "default-scheduler"},
        "message": "0/4 nodes are available",
    }
    nodes = [make_node(f"small-{i}", cpu="1") for i in range(3)] + [make_node("big", cpu="8")]
    text = describe_pod(pod, [event], NOW, what_if_report(nodes, pod))
    assert "Status:         Pending" in text
    assert "  PodScheduled   False" in text
    rows = [line.split() for line in text.splitlines()]
    assert ["3", "NodeResourcesFit:", "Insufficient", "cpu", "small-0,", "small-1,", "small-2"] in (
        rows
    )
    assert ["1", "fits", "big"] in rows
    assert any(line.startswith("  It would go to big now (score ") for line in text.splitlines())
    assert text.splitlines()[-1].split() == [
        "Warning",
        "FailedScheduling",
        "10s",
        "default-scheduler",
        "0/4",
        "nodes",
        "are",
        "available",
    ]


def test_describe_pod_says_when_a_preenqueue_plugin_holds_it() -> None:
    pod = make_pod("gated")
    pod["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    text = describe_pod(pod, [], NOW, what_if_report([make_node("n1")], pod))
    assert "  Held by PreEnqueue plugin SchedulingGates: " in text
    assert "example.com/quota" in text and "NODES" not in text


def test_describe_node_requests_against_allocatable() -> None:
    node = make_node("n1", cpu="4", memory="16Gi")
    pods = [
        make_pod("a", cpu="1", memory="4Gi", node="n1"),
        make_pod("b", cpu="500m", memory="4Gi", node="n1"),
    ]
    text = describe_node(node, pods, NOW)
    assert "Non-terminated Pods:  (2 in total)" in text
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()[-5:]}
    assert rows["cpu"][:2] == ["1500m", "(37%)"]
    assert rows["memory"][:2] == ["8Gi", "(50%)"]
    assert rows["pods"] == ["2", "(1%)"]
    assert (amount("cpu", 2000), amount("memory", 3 * 2**20), amount("pods", 7)) == (
        "2",
        "3Mi",
        "7",
    )


def test_histogram_quantile_interpolates_like_prometheus() -> None:
    buckets = {"0.001": 0, "0.002": 50, "0.004": 99, "0.008": 100, "+Inf": 100}
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.002)
    assert histogram_quantile(0.99, buckets) == pytest.approx(0.004)
    assert histogram_quantile(0.995, buckets) == pytest.approx(0.006)
    assert histogram_quantile(0.99, {"+Inf": 0}) is None


METRICS = """# TYPE scheduler_schedule_attempts_total counter
scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 90.0
scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"} 10.0
# TYPE ksched_assume_conflicts_total counter
ksched_assume_conflicts_total 3.0
"""


def test_top_frame_sums_instances_and_shows_busiest_nodes_first() -> None:
    nodes = [make_node("idle", cpu="4"), make_node("busy", cpu="2")]
    pods = [make_pod("a", cpu="1", node="busy"), make_pod("p")]
    usage = node_usage(nodes, pods)
    assert [(n.name, n.cpu, n.pods[0]) for n in usage] == [
        ("busy", (1000, 2000), 1),
        ("idle", (0, 4000), 0),
    ]
    workers = [Instance("worker", str(i), "0.1.0", "h", "1", ready=True) for i in range(2)]
    prev = Sample(at=0.0, pods=2, bound=0)
    cur = Sample(
        at=2.0,
        instances=workers,
        metrics={"worker": parse_metrics([METRICS, METRICS])},
        queue={"active": 4, "unschedulable": 1},
        pods=2,
        bound=1,
        nodes=usage,
    )
    frame = render_frame(cur, prev, "title", max_nodes=1)
    assert "worker 2/2" in frame and "watcher 0/0 !" in frame
    assert "activeQ 4   backoffQ 0   unschedulablePods 1" in frame
    assert "0.5 pods/s bound" in frame
    assert "attempts scheduled 180, unschedulable 20" in frame
    assert "assume conflicts 6" in frame
    assert frame.splitlines()[-2].startswith("busy   [##########..........]  50%")
    assert frame.splitlines()[-1] == "... 1 more nodes (busiest shown first)"


def test_status_lists_instances_and_flags_a_missing_service() -> None:
    up = [
        Instance(
            s,
            f"id-{s}",
            "0.1.0",
            "host",
            "7",
            started="2024-01-01T11:59:00.000Z",
            ready=True,
            reason="ok",
        )
        for s in ("watcher", "queue", "cache", "worker")
    ]
    down = Instance(
        "binder", "id-b", "0.1.0", "host", "8", ready=False, reason="redis: connection refused"
    )
    text, healthy = render_status([*up, down], NOW)
    assert not healthy
    assert text.splitlines()[0].startswith("SERVICE   INSTANCE     VERSION   HOST   PID   READY")
    assert "binder    id-b" in text and "redis: connection refused" in text
    assert "cache     id-cache     0.1.0     host   7     True    60s " in text
    assert text.splitlines()[-1] == "not ready: binder (no ready instance)"
    assert render_status([*up, Instance("binder", "x", "0.1.0", "h", "1", ready=True)], NOW)[1]


def test_unreachable_nats_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    assert main(["get", "pods", "--nats", url]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot reach NATS at {url}") and "Traceback" not in err
    assert main(["status", "--nats", url]) == 1
    capsys.readouterr()
    every = f"{url},nats://127.0.0.1:{free_port()}"  # a cluster with no server up
    assert main(["get", "pods", "--nats", every]) == 1
    assert capsys.readouterr().err.startswith(f"error: cannot reach NATS at {every}")
    assert main(["apply", "-f", "/nonexistent/file.yaml", "--nats", url]) == 1
    assert 'error: the path "/nonexistent/file.yaml" does not exist' in capsys.readouterr().err
