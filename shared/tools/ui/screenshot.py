"""`python -m shared.tools.ui.screenshot docs/ui.png`: the page's picture for the docs.

A local stack, a demo cluster (three zones of mixed nodes, GPU nodes tainted, running
pods spread unevenly, a few pods that fit nowhere, pods scheduled meanwhile), `ksched
ui`; then headless Chromium clicks a pending pod, asks the what-if form, runs the shadow
form, and saves the whole page."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
from typing import Any

import nats

from shared.tools.client import PodTracker, publish_all
from shared.tools.devstack import temporary_stack
from shared.tools.synthetic import make_node, make_pod
from shared.tools.ui.browser import Browser

ZONES = ("eu-west-1a", "eu-west-1b", "eu-west-1c")
SIZES = (("4", "16Gi"), ("8", "32Gi"), ("16", "64Gi"))
APPS = ("web", "api", "cache", "search", "batch", "ingest")
WIDTH = 1280


def demo_nodes(count: int, gpus: int) -> list[dict[str, Any]]:
    nodes = []
    for i in range(count):
        cpu, memory = SIZES[i % len(SIZES)]
        nodes.append(make_node(f"node-{i:02d}", cpu=cpu, memory=memory, zone=ZONES[i % 3]))
    for i in range(gpus):
        node = make_node(f"gpu-{i}", cpu="32", memory="128Gi", zone=ZONES[i % 3])
        node["metadata"]["labels"]["accelerator"] = "nvidia-t4"
        node["spec"] = {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}
        nodes.append(node)
    return nodes


def running_pods(nodes: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """Already-bound pods filling each plain node to a different level (0-95% cpu)."""
    pods: list[dict[str, Any]] = []
    for node in nodes:
        name = node["metadata"]["name"]
        if name.startswith("gpu"):
            continue
        millis = int(float(node["status"]["capacity"]["cpu"]) * 1000)
        target, used = rng.uniform(0, 0.95) * millis, 0
        while used + 500 <= target:
            cpu = rng.choice((250, 500, 1000))
            app = rng.choice(APPS)
            memory = f"{cpu * 2}Mi"
            pods.append(
                make_pod(f"{app}-{name}-{len(pods)}", cpu=f"{cpu}m", memory=memory, node=name)
            )
            used += cpu
    return pods


def pending_pods() -> list[dict[str, Any]]:
    """Pods ksched will find no node for, each for a different reason."""
    train = [make_pod(f"train-{i}", cpu="40", memory="64Gi") for i in range(2)]
    gpu = make_pod("render-0", cpu="2", memory="8Gi")
    gpu["spec"]["nodeSelector"] = {"accelerator": "nvidia-t4"}  # no toleration
    a100 = make_pod("llm-finetune", cpu="8", memory="32Gi")
    a100["spec"]["nodeSelector"] = {"accelerator": "nvidia-a100"}
    return [*train, gpu, a100]


def new_pods(count: int) -> list[dict[str, Any]]:
    """Pods ksched schedules while the log records it: the shadow's decisions."""
    return [make_pod(f"checkout-{i}", cpu="500m", memory="1Gi") for i in range(count)]


async def publish_scene(url: str) -> None:
    rng = random.Random(23)
    nodes = demo_nodes(45, 3)
    pending, placed = pending_pods(), new_pods(24)
    nc = await nats.connect(url)
    try:
        tracker = PodTracker()
        await tracker.start(nc)
        await publish_all(nc.jetstream(), nodes + running_pods(nodes, rng) + pending + placed)
        keys = {f"default/{p['metadata']['name']}" for p in pending}
        bound = {f"default/{p['metadata']['name']}" for p in placed}
        if not await tracker.wait_until(
            lambda t: keys <= set(t.unschedulable()) and bound <= set(t.bound()), 60
        ):
            raise SystemExit("the demo's pods never got placed or their reasons")
    finally:
        await nc.close()


def shoot(url: str, path: str) -> None:
    with Browser(WIDTH, 900) as browser:
        browser.open(url)
        browser.wait_for("document.querySelectorAll('#pending tr[data-pod]').length >= 4")
        browser.evaluate(
            "document.querySelector('#pending tr[data-pod=\"default/render-0\"]').click()"
        )
        browser.wait_for("!!document.querySelector('#pod-result table')")
        browser.evaluate("document.querySelector('#whatif-form button').click()")
        browser.wait_for("!!document.querySelector('#whatif-result table')")
        browser.evaluate("document.getElementById('shadow-diverge').checked = true")
        browser.evaluate("document.querySelector('#shadow-form button').click()")
        browser.wait_for("!!document.querySelector('#shadow-result table')")
        browser.evaluate(
            "document.querySelector('.tile[data-node=\"node-07\"]')"
            ".dispatchEvent(new MouseEvent('mouseenter'))"
        )
        browser.screenshot(path, WIDTH)


def shrink(path: str) -> None:
    """Re-encode with a 256-colour palette: flat UI colours lose nothing visible and the
    PNG stays small enough to keep in git (Pillow comes with the dev extras' matplotlib)."""
    from PIL import Image

    with Image.open(path) as img:
        small = img.convert("RGB").quantize(256, dither=Image.Dither.NONE)
    small.save(path, optimize=True)


def main(path: str) -> None:
    with temporary_stack("ksched-ui-shot-") as stack:
        asyncio.run(publish_scene(stack.nats_url))
        with subprocess.Popen(
            [sys.executable, "-m", "shared.tools.cli.main", "ui", "--port", "0"],
            env={**os.environ, "KSCHED_NATS_URL": stack.nats_url},
            stdout=subprocess.PIPE,
            text=True,
        ) as ui:
            assert ui.stdout is not None
            url = ui.stdout.readline().rsplit(" ", 1)[-1].strip()
            try:
                shoot(url, path)
            finally:
                ui.terminate()
    shrink(path)
    print(f"wrote {path} ({os.path.getsize(path) // 1024} KiB)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/ui.png")
