"""Publishing watch events and following pod states, as a ksched user does."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy, RawStreamMsg
from nats.js.errors import NotFoundError

from shared import stages
from shared.api.models import object_key
from shared.api.podstatus import pod_condition
from shared.runtime.connections import ensure_streams
from shared.runtime.consume import stream_sequence
from shared.runtime.timeouts import within
from shared.sharding import misplaced_partition, partitioned_pod_subject
from shared.subjects import (
    BOUND_BY_HEADER,
    CLUSTER_STREAM,
    PARTITIONED_PODS_PREFIX,
    PODS_PREFIX,
    STAGES_HEADER,
    node_subject,
    object_of_subject,
    pdb_subject,
    pod_group_subject,
    pod_subject,
    workload_pod_group_subject,
    workload_subject,
)
from shared.wire import dump_json


async def last_pod_msg(js: JetStreamContext, namespace: str, name: str) -> RawStreamMsg:
    """A pod's latest event in the cluster stream, wherever the server stored it: under
    its public subject, or with the partition mapping under its partition's (a tool
    does not know which). NotFoundError when neither holds one."""
    try:
        return await js.get_last_msg(CLUSTER_STREAM, pod_subject(namespace, name))
    except NotFoundError:
        return await js.get_last_msg(CLUSTER_STREAM, partitioned_pod_subject(namespace, name))


async def publish_node(js: JetStreamContext, node: dict[str, Any], etype: str = "ADDED") -> int:
    ack = await js.publish(node_subject(node["metadata"]["name"]), _event(etype, node))
    return int(ack.seq)


async def publish_pod(js: JetStreamContext, pod: dict[str, Any], etype: str = "ADDED") -> int:
    meta = pod["metadata"]
    subject = pod_subject(meta.get("namespace") or "default", meta["name"])
    ack = await js.publish(subject, _event(etype, pod))
    return int(ack.seq)


async def publish_pdb(js: JetStreamContext, pdb: dict[str, Any], etype: str = "ADDED") -> int:
    meta = pdb["metadata"]
    subject = pdb_subject(meta.get("namespace") or "default", meta["name"])
    ack = await js.publish(subject, _event(etype, pdb))
    return int(ack.seq)


async def publish_pod_group(
    js: JetStreamContext, group: dict[str, Any], etype: str = "ADDED"
) -> int:
    return await _publish_namespaced(js, pod_group_subject, group, etype)


async def publish_workload_pod_group(
    js: JetStreamContext, pod_group: dict[str, Any], etype: str = "ADDED"
) -> int:
    """A scheduling.k8s.io PodGroup (v1alpha2, v1beta1), on its own subject."""
    return await _publish_namespaced(js, workload_pod_group_subject, pod_group, etype)


async def publish_workload(
    js: JetStreamContext, workload: dict[str, Any], etype: str = "ADDED"
) -> int:
    return await _publish_namespaced(js, workload_subject, workload, etype)


async def _publish_namespaced(
    js: JetStreamContext, subject_of: Callable[[str, str], str], obj: dict[str, Any], etype: str
) -> int:
    meta = obj["metadata"]
    subject = subject_of(meta.get("namespace") or "default", meta["name"])
    ack = await js.publish(subject, _event(etype, obj))
    return int(ack.seq)


async def publish_all(
    js: JetStreamContext, objs: list[dict[str, Any]], etype: str = "ADDED"
) -> None:
    """Publish many objects with many acks in flight (one at a time is ~2k/s)."""
    window = 512
    for start in range(0, len(objs), window):
        chunk = objs[start : start + window]
        await asyncio.gather(
            *(
                publish_node(js, o, etype) if o.get("kind") == "Node" else publish_pod(js, o, etype)
                for o in chunk
            )
        )


def _event(etype: str, obj: dict[str, Any]) -> bytes:
    return dump_json({"type": etype, "object": obj})


@dataclass
class PodView:
    node: str = ""
    scheduled: str = ""  # PodScheduled status: "", "True", "False"
    reason: str = ""
    message: str = ""
    nominated: str = ""  # status.nominatedNodeName
    deleted: bool = False
    seq: int = 0
    bind_count: int = 0  # how many distinct bindings were seen (must stay <= 1)
    bound_at: float = 0.0  # time.perf_counter() when the first binding was seen
    bound_writes: int = 0  # versions published with spec.nodeName set (a rebind writes twice)
    bound_by: str = ""  # the binder that wrote the first binding (its Ksched-Bound-By)
    bound_stored: float = 0.0  # when the stream stored that binding (seconds since the epoch)
    stages: dict[str, float] = field(default_factory=dict)  # that binding's Ksched-Stages


@dataclass
class PodTracker:
    """Follows every pod subject of the cluster stream (replaying the current state first)."""

    pods: dict[str, PodView] = field(default_factory=dict)
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)  # each pod's latest
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self, nc: NATS) -> None:
        js = nc.jetstream()
        await ensure_streams(js)
        # where the stream stores a pod: its public subject, or with the server's
        # mapping its partition's (one or the other for a given pod)
        for prefix in (PODS_PREFIX, PARTITIONED_PODS_PREFIX):
            await js.subscribe(
                f"{prefix}.>",
                stream=CLUSTER_STREAM,
                cb=self._on_msg,
                ordered_consumer=True,
                deliver_policy=DeliverPolicy.ALL,
            )

    async def _on_msg(self, msg: Msg) -> None:
        try:
            event = json.loads(msg.data)
            obj = event["object"]
        except (ValueError, KeyError, TypeError):
            return
        # The subject names the pod, as the API server's URL does; an object naming
        # another pod is refused by ksched (and undone), never a pod of its own name.
        named = object_of_subject(msg.subject)
        if named is None or misplaced_partition(msg.subject):
            return
        _, namespace, name = named
        key = object_key(namespace, name)
        view = self.pods.setdefault(key, PodView())
        self.objects[key] = obj
        node = (obj.get("spec") or {}).get("nodeName") or ""
        if node and node != view.node:
            view.bind_count += 1
            if not view.bound_at:
                view.bound_at = time.perf_counter()
                view.bound_by = (msg.headers or {}).get(BOUND_BY_HEADER, "")
                view.bound_stored = msg.metadata.timestamp.timestamp()
                view.stages = stages.decode((msg.headers or {}).get(STAGES_HEADER, ""))
        if node and event.get("type") != "DELETED":
            view.bound_writes += 1
        view.node = node
        view.deleted = event.get("type") == "DELETED"
        view.seq = stream_sequence(msg)
        cond = pod_condition(obj) or {}
        view.scheduled = cond.get("status", "")
        view.reason = cond.get("reason", "")
        view.message = cond.get("message", "")
        view.nominated = (obj.get("status") or {}).get("nominatedNodeName") or ""
        self.changed.set()

    def bound(self) -> dict[str, str]:
        return {k: v.node for k, v in self.pods.items() if v.node and not v.deleted}

    def unschedulable(self) -> dict[str, str]:
        return {
            k: v.message
            for k, v in self.pods.items()
            if not v.node and not v.deleted and v.scheduled == "False"
        }

    def deleted(self) -> set[str]:
        return {k for k, v in self.pods.items() if v.deleted}

    def reasons(self) -> Counter[str]:
        return Counter(self.unschedulable().values())

    async def wait_until(self, predicate, timeout: float) -> bool:  # type: ignore[no-untyped-def]
        """Wait for `predicate(self)` to hold; checks on every change, never sleeps blindly."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate(self):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            self.changed.clear()
            try:
                await within(self.changed.wait(), min(remaining, 0.5))
            except TimeoutError:
                continue
        return True
