"""`ksched shadow` against a real stack's log: ksched schedules pods one after another;
the running configuration then finds no difference, a changed weight and MostAllocated
find the ones the scores computed by hand predict, the report is the same twice, and
nothing is written."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import pytest
import yaml
from nats.aio.client import Client as NATS

from shared.subjects import CLUSTER_STREAM
from shared.tools.client import PodTracker, publish_all
from shared.tools.synthetic import make_node, make_pod
from tests.e2e.test_cli_e2e import ksched
from tests.shadow_scores import Cluster, fit_weight_config, prefer_zone

pytestmark = pytest.mark.e2e

NODES = [("n1", 4, "zone-a"), ("n2", 8, "zone-a"), ("n3", 4, "zone-b"), ("n4", 6, "zone-b")]
POD_CPUS = [1, 2, 1, 1, 3, 1, 2, 1]
CLI = (sys.executable, "-m", "shared.tools.cli.main")
HEADER = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
MOST_ALLOCATED = {
    **HEADER,
    "profiles": [
        {
            "schedulerName": "default-scheduler",
            "pluginConfig": [
                {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}
            ],
        }
    ],
}


async def test_shadow_of_a_real_log(nc: NATS, tracker: PodTracker, tmp_path: Path) -> None:
    js = nc.jetstream()
    nodes = [make_node(n, cpu=str(c), memory=f"{c * 4}Gi", zone=z) for n, c, z in NODES]
    await publish_all(js, nodes)
    # one pod at a time, each bound before the next: the log is the real scheduler's
    # view at each decision (see docs/shadow.md on in-flight pods)
    keys = []
    for i, cpu in enumerate(POD_CPUS):
        key = f"default/web-{i}"
        pod = prefer_zone(make_pod(f"web-{i}", cpu=str(cpu), memory=f"{cpu * 4}Gi"), "zone-b")
        await publish_all(js, [pod])
        assert await tracker.wait_until(lambda t, k=key: k in t.bound(), timeout=30)
        keys.append(key)
    await publish_all(js, [make_pod("big", cpu="9", memory="36Gi")])
    assert await tracker.wait_until(lambda t: "default/big" in t.unschedulable(), timeout=30)
    real = tracker.bound()

    running, candidate = tmp_path / "running.yaml", tmp_path / "most.yaml"
    running.write_text(yaml.safe_dump(HEADER))
    candidate.write_text(yaml.safe_dump(MOST_ALLOCATED))
    weighted = tmp_path / "weighted.yaml"
    weighted.write_text(yaml.safe_dump(fit_weight_config(10)))
    before = (await js.stream_info(CLUSTER_STREAM)).state.last_seq

    code, out, err = await ksched(nc_url(nc), "shadow", "--config", str(running), "-o", "json")
    assert code == 0, err
    same = json.loads(out)
    assert same["differences"] == 0, same["differing"]
    assert same["counts"] == {"same": len(POD_CPUS) + 1}

    # the differences NodeResourcesFit's weight 10 (it then outweighs the pods'
    # preference for zone-b) and MostAllocated predict, against the cluster each pod met
    cluster, predicted, by_weight = Cluster.of(NODES), [], []
    for key, cpu in zip(keys, POD_CPUS, strict=True):
        most = cluster.best(cpu, most=True, zone="zone-b")
        if real[key] not in most:
            predicted.append((key, real[key], most))
        best = cluster.best(cpu, most=False, fit_weight=10, zone="zone-b")
        if real[key] not in best:
            by_weight.append((key, real[key], best))
        cluster.place(real[key], cpu)
    assert predicted and by_weight
    code, out, err = await ksched(nc_url(nc), "shadow", "--config", str(weighted), "-o", "json")
    assert code == 0, err
    differing = json.loads(out)["differing"]
    assert [(d["pod"], d["real"], d["shadowBest"]) for d in differing] == by_weight

    code, out, err = await ksched(nc_url(nc), "shadow", "--config", str(candidate), "-o", "json")
    assert code == 0, err
    moved = json.loads(out)
    assert [(d["pod"], d["real"], d["shadowBest"]) for d in moved["differing"]] == predicted
    assert all("NodeResourcesFit" in d["scoreDeltas"] for d in moved["differing"])

    # deterministic, and read-only
    code, again, err = await ksched(nc_url(nc), "shadow", "--config", str(candidate), "-o", "json")
    assert code == 0, err
    assert json.loads(again) == moved
    assert (await js.stream_info(CLUSTER_STREAM)).state.last_seq == before
    code, table, err = await ksched(nc_url(nc), "shadow", "--config", str(candidate))
    assert code == 0, err
    assert f"{len(predicted)} differ" in table and "NodeResourcesFit +" in table

    # --follow: the report, then each new differing decision as it is recorded
    follow = await asyncio.create_subprocess_exec(
        *CLI,
        "shadow",
        "--config",
        str(candidate),
        "--follow",
        "-o",
        "json",
        "--nats",
        nc_url(nc),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert follow.stdout is not None
        first = json.loads(await asyncio.wait_for(follow.stdout.readline(), 60))
        assert first == moved
        least = cluster.best(1, most=False, zone="zone-b")
        most = cluster.best(1, most=True, zone="zone-b")
        assert not set(least) & set(most)  # wherever ksched puts it, MostAllocated differs
        await publish_all(js, [prefer_zone(make_pod("late", cpu="1", memory="4Gi"), "zone-b")])
        line = json.loads(await asyncio.wait_for(follow.stdout.readline(), 60))
        assert line["pod"] == "default/late" and line["shadowBest"] == most
        assert line["real"] in least
    finally:
        follow.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(follow.wait(), 30) == 0


def nc_url(nc: NATS) -> str:
    server = nc.connected_url
    assert server is not None
    return f"nats://{server.hostname}:{server.port}"
