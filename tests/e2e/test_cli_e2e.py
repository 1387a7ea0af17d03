"""`ksched` verbs against real NATS and the five services: apply -> bound, get,
describe with per-node reasons, delete, get -w, status and top."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from nats.aio.client import Client as NATS

from shared.tools.cli.live import discover, scrape
from shared.tools.cli.top import parse_metrics
from shared.tools.client import PodTracker
from shared.tools.devstack import LocalStack
from shared.tools.servers import start_nats
from shared.tools.synthetic import make_node, make_pod

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


def workload_doc(
    api: str, kind: str, name: str, counts: dict[str, int], cpu: str
) -> dict[str, Any]:
    """A workload of pods with one container asking for `cpu`."""
    container = {"name": "app", "image": "nginx", "resources": {"requests": {"cpu": cpu}}}
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"name": name},
        "spec": {**counts, "template": {"spec": {"containers": [container]}}},
    }


def manifests(tmp_path: Path) -> str:
    tainted = make_node("gpu-node", cpu="8")
    tainted["spec"] = {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}
    deployment = workload_doc("apps/v1", "Deployment", "web", {"replicas": 3}, "500m")
    deployment["spec"]["template"]["metadata"] = {"labels": {"app": "web"}}
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
    rows = [line.split() for line in out.splitlines()]
    assert ["1", "NodeResourcesFit:", "Insufficient", "cpu", "small"] in rows
    assert any(r[:3] == ["1", "TaintToleration:", "node(s)"] and r[-1] == "gpu-node" for r in rows)
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


# --- kubectl's habits: create, delete, selectors, events, output --------------------

TEMPLATES = Path(__file__).parent.parent / "unit" / "data" / "scheduler_perf"


def pod_doc(name: str, cpu: str = "100m", **extra: object) -> dict[str, object]:
    """A pod manifest as a user writes it: no uid, no creationTimestamp."""
    container = {"name": "app", "image": "nginx", "resources": {"requests": {"cpu": cpu}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **extra},
        "spec": {"containers": [container]},
    }


def names_in(table: str) -> list[str]:
    return [line.split()[0] for line in table.splitlines()[1:]]


async def test_create_selectors_and_delete(stack: LocalStack, tracker: PodTracker) -> None:
    url = stack.nats_url
    pod_template, node_template = (
        str(TEMPLATES / "pod-default.yaml"),
        str(TEMPLATES / "node-default.yaml"),
    )
    # scheduler_perf's templates, unchanged: generateName, several -f in order
    code, out, err = await ksched(
        url, "create", "-f", node_template, "-f", pod_template, "-f", pod_template
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("node/scheduler-perf-") and lines[0].endswith(" created")
    generated = [line.split()[0].removeprefix("pod/") for line in lines[1:]]
    assert len(set(generated)) == 2 and all(g.startswith("pod-") for g in generated)
    assert await tracker.wait_until(
        lambda t: {f"default/{g}" for g in generated} <= set(t.bound()), timeout=30
    )
    # an object that exists is AlreadyExists; the others are still created; exit 1
    named = yaml.safe_dump_all([pod_doc("web-1", labels={"app": "web"}), pod_doc("db-1")])
    assert (await ksched(url, "create", "-f", "-", stdin=named))[0] == 0
    again = yaml.safe_dump_all([pod_doc("web-1"), pod_doc("web-2", labels={"app": "web"})])
    code, out, err = await ksched(url, "create", "-f", "-", stdin=again)
    assert code == 1 and out.splitlines() == ["pod/web-2 created"]
    assert err == (
        'Error from server (AlreadyExists): error when creating "STDIN": '
        'pods "web-1" already exists\n'
    )
    assert await tracker.wait_until(lambda t: "default/web-2" in t.bound(), timeout=30)

    code, out, _ = await ksched(url, "get", "pods", "-l", "app=web", "--show-labels")
    assert out.splitlines()[0].split()[-1] == "LABELS"
    assert [line.split()[0::5] for line in out.splitlines()[1:]] == [
        ["web-1", "app=web"],
        ["web-2", "app=web"],
    ]
    code, out, _ = await ksched(url, "get", "-l", "app notin (web)", "pods", "-o", "name")
    assert sorted(out.split()) == sorted(["pod/db-1"] + [f"pod/{g}" for g in generated])
    code, out, _ = await ksched(url, "get", "pods", "--field-selector", "metadata.name=db-1")
    assert names_in(out) == ["db-1"]
    code, out, err = await ksched(url, "get", "pods", "--field-selector", "spec.host=x")
    assert code == 1 and "field label not supported: spec.host" in err
    code, out, _ = await ksched(
        url, "get", "pods", "-o", "jsonpath={.items[*].metadata.name}", "-l", "app=web"
    )
    assert out == "web-1 web-2"

    code, out, _ = await ksched(url, "delete", "pods", "-l", "app=web")
    assert (code, out.splitlines()) == (0, ['pod "web-1" deleted', 'pod "web-2" deleted'])
    code, out, err = await ksched(url, "delete", "-f", "-", stdin=named)
    assert out.splitlines() == ['pod "db-1" deleted']
    assert code == 1 and 'pods "web-1" not found' in err
    code, out, _ = await ksched(url, "delete", "--all", "pods")
    assert sorted(out.splitlines()) == sorted(f'pod "{g}" deleted' for g in generated)
    assert await tracker.wait_until(lambda t: not t.bound(), timeout=15)
    code, _, err = await ksched(url, "get", "pods")
    assert (code, err.strip()) == (0, "No resources found in default namespace.")


async def test_events_by_uid_age_and_a_missing_node(
    stack: LocalStack, tracker: PodTracker, nc: NATS
) -> None:
    url = stack.nats_url
    first = yaml.safe_dump_all([make_node("n1", cpu="2"), pod_doc("p")])
    assert (await ksched(url, "apply", "-f", "-", stdin=first))[0] == 0
    assert await tracker.wait_until(lambda t: "default/p" in t.bound(), timeout=30)
    assert (await ksched(url, "delete", "pod", "p"))[0] == 0
    assert await tracker.wait_until(lambda t: "default/p" in t.deleted(), timeout=15)
    # a new pod of the same name that fits nowhere
    code, _, err = await ksched(url, "apply", "-f", "-", stdin=json.dumps(pod_doc("p", cpu="3")))
    assert code == 0, err
    assert await tracker.wait_until(lambda t: "default/p" in t.unschedulable(), timeout=30)

    code, out, _ = await ksched(url, "describe", "pod", "p")
    assert "FailedScheduling" in out and "0/1 nodes are available" in out
    assert "Successfully assigned" not in out  # the deleted pod's event is not this pod's
    code, out, _ = await ksched(url, "get", "events")
    assert out.splitlines()[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    reasons = [line.split()[2] for line in out.splitlines()[1:]]
    assert reasons[0] == "Scheduled" and "FailedScheduling" in reasons, out
    code, out, _ = await ksched(url, "get", "events", "-A")
    assert out.splitlines()[1].split()[0] == "default"
    code, _, err = await ksched(url, "get", "events", "-n", "nowhere")
    assert err.strip() == "No resources found in nowhere namespace."

    # published straight on NATS: no creationTimestamp, AGE from the stream
    js = nc.jetstream()
    bare = make_pod("bare", node="ghost")  # bound to a node that does not exist
    await js.publish(
        "ksched.cluster.pods.default.bare", json.dumps({"type": "ADDED", "object": bare}).encode()
    )
    code, out, _ = await ksched(url, "get", "pods", "bare")
    row = out.splitlines()[1].split()
    assert row[2] == "Pending" and row[4] != "<unknown>" and row[4].endswith("s"), out
    code, out, _ = await ksched(url, "describe", "pod", "bare")
    assert "ghost (not found: no such node in the cluster)" in out


async def test_broken_pipe_namespace_flag_and_configuration_in_status(
    stack: LocalStack, tracker: PodTracker, tmp_path: Path
) -> None:
    url = stack.nats_url
    many = tmp_path / "many.yaml"
    many.write_text(
        yaml.safe_dump_all(
            # more lines than a pipe's buffer holds: the writer meets the closed pipe
            [make_node("n1", cpu="200", pods=1100)] + [pod_doc(f"p-{i:04d}") for i in range(1000)]
        )
    )
    # the reader goes away after one line: no traceback, and every object is published
    proc = await asyncio.create_subprocess_shell(
        f"{sys.executable} -m shared.tools.cli.main apply -f {many} --nats {url} | head -1",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert out.decode() == "node/n1 created\n" and err.decode() == ""
    assert await tracker.wait_until(lambda t: len(t.bound()) == 1000, timeout=90)

    other = pod_doc("elsewhere", namespace="a")
    code, out, err = await ksched(
        url, "apply", "-n", "team", "-f", "-", stdin=json.dumps(pod_doc("x"))
    )
    assert (code, out.strip()) == (0, "pod/x created")
    code, out, _ = await ksched(
        url, "get", "pods", "-n", "team", "x", "-o", "jsonpath={.metadata.namespace}"
    )
    assert out == "team"
    code, out, err = await ksched(url, "apply", "-f", "-", "-n", "b", stdin=json.dumps(other))
    assert (code, out) == (1, "")
    assert err == (
        'error: the namespace from the provided object "a" does not match the namespace "b". '
        "You must pass '--namespace=a' to perform this operation.\n"
    )

    code, out, err = await ksched(url, "status")
    assert code == 0, err
    header, *rows = (line.split() for line in out.splitlines())
    assert header[7:9] == ["CONFIG", "PROFILES"]
    assert {(r[7], r[8]) for r in rows} == {("defaults", "default-scheduler")}
    for service in stack.services:  # and each logged it at start
        lines = service.log_path.read_text().splitlines()
        logged = [json.loads(line) for line in lines if line.startswith("{")]
        assert {"config": "defaults", "profiles": "default-scheduler"}.items() <= next(
            e for e in logged if e.get("logger") == "ksched.discovery"
        ).items()
    code, out, err = await ksched(url, "top", "--once")
    assert code == 0 and "- pods/s bound" in out, err


def test_demo_refuses_a_bad_configuration_before_starting_anything(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    workdir = tmp_path / "run"
    for text, reason in (
        ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: Nope\n", "kind must be"),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            "profiles:\n- plugins:\n    filter:\n      enabled: [{name: NoSuchPlugin}]\n",
            "unknown plugin 'NoSuchPlugin'",
        ),
    ):
        config.write_text(text)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "shared.tools.cli.main",
                "demo",
                "--exit",
                "--workdir",
                str(workdir),
            ],
            env={**os.environ, "KSCHED_CONFIG": str(config)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.startswith(f"error: KSCHED_CONFIG={config}: ") and reason in done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert not workdir.exists()  # no server, no service started


async def test_whatif_names_the_node_the_groups_and_a_workloads_fit(
    stack: LocalStack, tracker: PodTracker, tmp_path: Path
) -> None:
    url = stack.nats_url
    nodes = yaml.safe_dump_all([make_node(f"n{i}", cpu="2") for i in range(3)])
    assert (await ksched(url, "apply", "-f", "-", stdin=nodes))[0] == 0
    job = workload_doc("batch/v1", "Job", "batch", {"parallelism": 8}, "1")
    job["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    for _ in range(100):  # the workers' snapshot has the nodes once the cache has them
        code, out, err = await ksched(url, "whatif", "-f", str(path), "-o", "json")
        assert code == 0, err
        if json.loads(out)["nodes"] == 3:
            break
    report = json.loads(out)
    assert report["replicas"] == {
        "requested": 8,
        "fit": 6,
        "nodes": 3,
        "placements": {"n0": 2, "n1": 2, "n2": 2},
    }
    code, out, err = await ksched(url, "whatif", "-f", str(path), "--node", "n1")
    assert code == 0, err
    assert "Workload: 6 of 8 replicas fit, on 3 nodes" in out
    assert "Node n1:" in out and out.startswith("Pod default/batch-")
    assert tracker.pods == {}  # asking wrote nothing
