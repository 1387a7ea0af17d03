"""PriorityClasses through the public subjects: a pod's priorityClassName resolved at
admission, preemption by class, the globalDefault class, an unknown class refused,
and classes known to a watcher that took over after they were published."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from shared.subjects import pod_subject, priority_class_subject
from shared.tools.client import PodTracker, last_pod_msg, publish_node, publish_pod
from shared.tools.devstack import LocalStack
from shared.tools.synthetic import make_node, make_pod
from shared.wire import dump_json
from tests.e2e.test_cli_e2e import ksched
from tests.e2e.test_real_input import error_reason

pytestmark = pytest.mark.e2e


async def publish_class(js: JetStreamContext, name: str, value: int, **extra: Any) -> None:
    obj = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **extra,
    }
    await js.publish(priority_class_subject(name), dump_json({"type": "ADDED", "object": obj}))


def with_class(name: str, cls: str, cpu: str = "1") -> dict[str, Any]:
    pod = make_pod(name, cpu=cpu)
    pod["spec"]["priorityClassName"] = cls
    return pod


async def latest_spec(js: JetStreamContext, name: str) -> dict[str, Any]:
    msg = await last_pod_msg(js, "default", name)
    spec: dict[str, Any] = json.loads(msg.data)["object"]["spec"]
    return spec


async def test_a_pod_of_a_higher_class_preempts_and_the_default_class_applies(
    nc: NATS, tracker: PodTracker
) -> None:
    js = nc.jetstream()
    await publish_class(js, "high-priority", 1_000_000, description="kubernetes docs")
    await publish_class(js, "standard", 10, globalDefault=True)
    await publish_node(js, make_node("only", cpu="1"))
    await publish_pod(js, make_pod("filler", cpu="1"))
    assert await tracker.wait_until(lambda t: "default/filler" in t.bound(), 30)
    filler = await latest_spec(js, "filler")  # the binding carries what admission set
    assert (filler["priority"], filler["priorityClassName"]) == (10, "standard")

    await publish_pod(js, with_class("urgent", "high-priority"))
    assert await tracker.wait_until(lambda t: t.bound().get("default/urgent") == "only", 60)
    assert "default/filler" in tracker.deleted()  # preempted
    assert (await latest_spec(js, "urgent"))["priority"] == 1_000_000

    await publish_pod(js, with_class("typo", "hihg-priority"))
    reason = await error_reason(js, pod_subject("default", "typo"))
    assert reason == 'pods "typo" is forbidden: no PriorityClass with name hihg-priority was found'
    assert "default/typo" not in tracker.bound()


async def test_a_watcher_that_takes_over_knows_the_classes_published_before(
    stack: LocalStack, nc: NATS, tracker: PodTracker
) -> None:
    js = nc.jetstream()
    await publish_class(js, "critical", 500)
    await publish_node(js, make_node("n1", cpu="4"))
    await publish_pod(js, with_class("before", "critical"))
    assert await tracker.wait_until(lambda t: "default/before" in t.bound(), 30)
    watcher = next(s for s in stack.services if s.name == "watcher")
    watcher.proc.send_signal(signal.SIGKILL)
    watcher.proc.wait()
    stack.start_service("watcher")  # leads once the killed one's lease lapses
    await publish_pod(js, with_class("after", "critical"))
    assert await tracker.wait_until(lambda t: "default/after" in t.bound(), 60)
    assert (await latest_spec(js, "after"))["priority"] == 500


# The Kubernetes documentation's example (concepts/scheduling-eviction/pod-priority-
# preemption: high-priority PriorityClass and the nginx pod that uses it), unchanged.
DOCS_MANIFEST = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: high-priority
value: 1000000
globalDefault: false
description: "This priority class should be used for XYZ service pods only."
---
apiVersion: v1
kind: Pod
metadata:
  name: nginx
  labels:
    env: test
spec:
  containers:
  - name: nginx
    image: nginx
    imagePullPolicy: IfNotPresent
  priorityClassName: high-priority
"""


async def test_ksched_apply_takes_the_docs_priority_class_and_its_pod(
    stack: LocalStack, tmp_path: Path
) -> None:
    path = tmp_path / "high-priority.yaml"
    path.write_text(DOCS_MANIFEST)
    await publish_node_over(stack, make_node("n1"))
    code, out, err = await ksched(stack.nats_url, "apply", "-f", str(path))
    assert code == 0, err
    assert out.splitlines() == [
        "priorityclass.scheduling.k8s.io/high-priority created",
        "pod/nginx created",
    ]
    nc = await nats.connect(stack.nats_url)
    tracker = PodTracker()
    await tracker.start(nc)
    try:
        assert await tracker.wait_until(lambda t: "default/nginx" in t.bound(), 30)
        assert (await latest_spec(nc.jetstream(), "nginx"))["priority"] == 1_000_000
    finally:
        await nc.close()
    code, out, _ = await ksched(stack.nats_url, "apply", "-f", str(path))
    assert "priorityclass.scheduling.k8s.io/high-priority unchanged" in out


async def publish_node_over(stack: LocalStack, node: dict[str, Any]) -> None:
    nc = await nats.connect(stack.nats_url)
    try:
        await publish_node(nc.jetstream(), node)
    finally:
        await nc.close()
