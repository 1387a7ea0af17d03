"""`ksched ui` in a real headless Chromium against a running ksched: the page shows
the nodes' heat map, the pending pod with the reason ksched gave it, that pod's
per-node verdicts, a worker's what-if answer to the form, and the shadow report of a
candidate configuration over the recorded log."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from nats.aio.client import Client as NATS

from shared.tools.client import PodTracker, publish_all
from shared.tools.devstack import LocalStack
from shared.tools.synthetic import make_node, make_pod
from shared.tools.ui.browser import Browser, find_chromium
from tests.conftest import skip_without

pytestmark = [
    pytest.mark.e2e,
    skip_without(
        "" if find_chromium() else "no chromium on PATH: apt-get install chromium (.ci/run does it)"
    ),
]

NODES = ["small-a", "small-b", "big-c"]


def cluster() -> list[dict]:
    nodes = [make_node("small-a", cpu="2"), make_node("small-b", cpu="2"), make_node("big-c")]
    placed = [make_pod("busy", cpu="1500m", node="small-a")]  # small-a 75% busy
    pending = [make_pod("huge", cpu="8")]  # fits nowhere: Insufficient cpu everywhere
    # LeastAllocated (running) puts it on big-c, MostAllocated (the shadow) on small-a
    small = [make_pod("small", cpu="500m")]
    return nodes + placed + pending + small


@pytest.fixture
def ui(stack: LocalStack) -> Iterator[str]:
    """`ksched ui` on a free port; its URL (from the line it prints)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "shared.tools.cli.main", "ui", "--port", "0"],
        env={**os.environ, "KSCHED_NATS_URL": stack.nats_url},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "serving http://127.0.0.1:" in line, line
        yield line.rsplit(" ", 1)[-1].strip()
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def look(url: str) -> dict:
    """What the page shows, read from its DOM after the clicks a user would make."""
    with Browser() as browser:
        browser.open(url)
        tiles = browser.wait_for(
            "document.querySelectorAll('.tile').length === 3 && "
            "[...document.querySelectorAll('.tile')].map(t => [t.dataset.node, t.title])"
        )
        row = browser.wait_for(
            "(r => r && r.textContent.includes('Insufficient cpu') && r.innerText)"
            "(document.querySelector('#pending tr[data-pod=\"default/huge\"]'))"
        )
        browser.evaluate("document.querySelector('#pending tr[data-pod=\"default/huge\"]').click()")
        verdicts = browser.wait_for(
            "(t => t && t.innerText)(document.querySelector('#pod-result table.groups'))"
        )
        browser.evaluate("document.querySelector('#whatif-form button').click()")
        whatif = browser.wait_for(
            "(d => d && d.innerText)(document.querySelector('#whatif-result .decision'))"
        )
        browser.evaluate("document.querySelector('#shadow-form button').click()")
        shadow = browser.wait_for(
            "(d => d && d.innerText.includes('compared') && d.innerText)"
            "(document.querySelector('#shadow-result'))"
        )
        counts = browser.evaluate("document.querySelector('#counts').innerText")
        return {
            "tiles": tiles,
            "row": row,
            "verdicts": verdicts,
            "whatif": whatif,
            "shadow": shadow,
            "counts": counts,
        }


async def test_page_shows_the_cluster_its_pending_pod_and_a_whatif(
    stack: LocalStack, nc: NATS, tracker: PodTracker, ui: str
) -> None:
    await publish_all(nc.jetstream(), cluster())
    assert await tracker.wait_until(lambda t: "default/huge" in t.unschedulable(), 30)
    assert await tracker.wait_until(lambda t: "default/small" in t.bound(), 30)
    assert tracker.bound()["default/small"] == "big-c"

    seen = await asyncio.to_thread(look, ui)

    tiles = dict(seen["tiles"])
    assert sorted(tiles) == sorted(NODES)
    assert "cpu 1.5/2 (75%)" in tiles["small-a"], tiles  # requested vs allocatable, on hover
    assert "cpu 0.5/4 (13%)" in tiles["big-c"]
    assert "default/huge" in seen["row"] and "Unschedulable" in seen["row"]
    assert "0/3 nodes are available" in seen["row"]
    # the pod's verdicts: all three nodes rejected by NodeResourcesFit for cpu
    assert "NodeResourcesFit" in seen["verdicts"] and "Insufficient cpu" in seen["verdicts"]
    assert all(name in seen["verdicts"] for name in NODES)
    # the form's default pod (500m) fits; a worker answers with the node it would get
    assert seen["whatif"].startswith("Would go to "), seen["whatif"]
    assert seen["whatif"].split()[3] in NODES
    assert "(3 of 3 nodes feasible)" in seen["whatif"]
    assert seen["counts"].split() == ["3", "nodes", "3", "pods", "2", "bound", "1", "pending"]
    # the shadow (MostAllocated) would have packed small onto the busy small-a; huge fits
    # nowhere for it either (no difference)
    shadow = seen["shadow"]
    assert "2 decisions compared (1 elsewhere, 1 same): 1 differ" in shadow, shadow
    assert "default/small\telsewhere\tbig-c\tsmall-a\tNodeResourcesFit" in shadow, shadow
    # the running server refuses a DNS-rebinding page (its name in Host), answers curl
    assert status_of(ui, {"Host": "attacker.example"}) == 403
    assert status_of(ui, {}) == 200


def status_of(url: str, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url + "api/nodes", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return err.code
