"""`ksched` verbs against real NATS and the five services: apply -> bound, get,
describe with per-node reasons, delete, get -w, status and top."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
import yaml
from nats.aio.client import Client as NATS

from shared.tools.cli.live import discover, scrape
from shared.tools.cli.top import parse_metrics
from shared.tools.client import PodTracker
from shared.tools.devstack import LocalStack
from shared.tools.servers import start_nats
from shared.tools.synthetic import make_node

pytestmark = pytest.mark.e2e


async def ksched(url: str, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "shared.tools.cli.main",
        *args,
        "--nats",
        url,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def manifests(tmp_path: Path) -> str:
    tainted = make_node("gpu-node", cpu="8")
    tainted["spec"] = {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3,
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "nginx",
                            "resources": {"requests": {"cpu": "500m"}},
                        }
                    ]
                },
            },
        },
    }
    huge = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "huge"},
        "spec": {
            "containers": [{"name": "app", "image": "x", "resources": {"requests": {"cpu": "3"}}}]
        },
    }
    docs = [
        {"apiVersion": "v1", "kind": "List", "items": [make_node("small", cpu="2"), tainted]},
        deployment,
        huge,
    ]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


async def test_apply_get_describe_delete(
    stack: LocalStack, tracker: PodTracker, tmp_path: Path
) -> None:
    url = stack.nats_url
    code, out, err = await ksched(url, "apply", "-f", manifests(tmp_path))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:3] == [
        "node/small created",
        "node/gpu-node created",
        "deployment.apps/web created",
    ]
    web = [line.split()[0].removeprefix("pod/") for line in lines[3:6]]
    assert lines[6] == "pod/huge created"
    keys = {f"default/{name}" for name in web}
    assert await tracker.wait_until(
        lambda t: keys <= set(t.bound()) and "default/huge" in t.unschedulable(), timeout=30
    )
    assert set(tracker.bound()[k] for k in keys) == {"small"}  # the taint keeps them off gpu-node

    code, out, _ = await ksched(url, "get", "pods", "-o", "wide")
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert out.splitlines()[0].split()[:6] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP"]
    assert rows["huge"][2] == "Pending" and rows["huge"][6] == "<none>"
    assert all(rows[n][2] == "Scheduled" and rows[n][6] == "small" for n in web)
    code, out, _ = await ksched(url, "get", "nodes")
    assert [line.split()[:2] for line in out.splitlines()] == [
        ["NAME", "STATUS"],
        ["gpu-node", "Ready"],
        ["small", "Ready"],
    ]
    code, out, _ = await ksched(url, "get", "pod", "huge", "-o", "json")
    assert json.loads(out)["status"]["conditions"][0]["reason"] == "Unschedulable"

    code, out, err = await ksched(url, "describe", "pod", "huge")
    assert code == 0, err
    assert "  small      NodeResourcesFit: Insufficient cpu" in out
    assert "  gpu-node   TaintToleration: node(s) had untolerated taint" in out
    assert "Warning   FailedScheduling" in out and "0/2 nodes are available" in out
    code, out, _ = await ksched(url, "describe", "node", "small")
    assert "  cpu                 1500m (75%)" in out and "(3 in total)" in out

    code, out, _ = await ksched(url, "delete", "pod", web[0])
    assert (code, out.strip()) == (0, f'pod "{web[0]}" deleted')
    assert await tracker.wait_until(lambda t: f"default/{web[0]}" in t.deleted(), timeout=10)
    code, out, err = await ksched(url, "get", "pod", web[0])
    assert code == 1 and f'pods "{web[0]}" not found' in err
    # re-applying recreates the deleted replica under the same name, and only that one
    code, out, _ = await ksched(url, "apply", "-f", manifests(tmp_path))
    assert f"  pod/{web[0]} created" in out.splitlines()
    assert "pod/huge unchanged" in out.splitlines()


async def test_get_watch_prints_each_change(stack: LocalStack, tmp_path: Path) -> None:
    url = stack.nats_url
    assert (await ksched(url, "apply", "-f", "-", stdin=yaml.safe_dump(make_node("n1"))))[0] == 0
    watching = asyncio.create_task(ksched(url, "get", "pods", "-w", "--request-timeout", "8"))
    await asyncio.sleep(1.5)  # let the watch list first; the pod below is then a change
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "late"},
        "spec": {"containers": [{"name": "a", "image": "b"}]},
    }
    assert (await ksched(url, "apply", "-f", "-", stdin=json.dumps(pod)))[0] == 0
    _, out, _ = await watching
    statuses = [line.split()[2] for line in out.splitlines() if line.startswith("late ")]
    assert statuses[0] == "Pending" and statuses[-1] == "Scheduled", out


async def test_status_and_top_find_every_instance(stack: LocalStack) -> None:
    code, out, err = await ksched(stack.nats_url, "status")
    assert code == 0, err
    rows = [line.split() for line in out.splitlines()[1:]]
    assert sorted(r[0] for r in rows) == sorted(
        ["watcher", "queue", "cache", "worker", "worker", "binder", "binder"]
    )
    assert all(r[2] == "0.1.0" and r[5] == "True" for r in rows), out
    code, out, err = await ksched(stack.nats_url, "top", "--once", "--interval", "0.2")
    assert code == 0, err
    assert "watcher 1/1   queue 1/1   cache 1/1   worker 2/2   binder 2/2" in out
    assert "activeQ 0   backoffQ 0   unschedulablePods 0" in out


async def test_metrics_have_kube_scheduler_names_over_nats(
    stack: LocalStack, tracker: PodTracker, nc: NATS
) -> None:
    code, _, err = await ksched(
        stack.nats_url,
        "apply",
        "-f",
        "-",
        stdin=yaml.safe_dump_all(
            [
                make_node("n1"),
                {
                    "kind": "Pod",
                    "metadata": {"name": "p"},
                    "spec": {"containers": [{"name": "a", "image": "b"}]},
                },
            ]
        ),
    )
    assert code == 0, err
    assert await tracker.wait_until(lambda t: "default/p" in t.bound(), timeout=15)
    workers = [i for i in await discover(nc) if i.service == "worker"]
    metrics = parse_metrics([await scrape(nc, i) for i in workers])
    names = {name for name, _ in metrics}
    scheduled = [
        v
        for (n, labels), v in metrics.items()
        if n == "scheduler_schedule_attempts_total"
        and dict(labels) == {"result": "scheduled", "profile": "default-scheduler"}
    ]
    assert scheduled == [1.0]
    assert "scheduler_pod_scheduling_sli_duration_seconds_count" in names
    assert "scheduler_pod_scheduling_attempts_count" in names
    assert any(
        n == "scheduler_scheduling_attempt_duration_seconds_bucket"
        and dict(labels).get("result") == "scheduled"
        for (n, labels) in metrics
    )


async def test_missing_stream_is_a_clear_error(tmp_path: Path) -> None:
    server = start_nats(tmp_path)  # a NATS no ksched has used
    try:
        code, _, err = await ksched(f"nats://127.0.0.1:{server.port}", "get", "pods")
    finally:
        server.stop()
    assert code == 1 and "Traceback" not in err
    assert err.startswith("error: stream KSCHED_CLUSTER not found")
