"""record_failure against a real nats-server: the status it writes survives a stream
that did not answer for a moment."""

from __future__ import annotations

import asyncio
import json

import nats

from shared.api.podstatus import pod_condition
from shared.runtime.connections import ensure_streams
from shared.runtime.failures import Failure, record_failure
from shared.subjects import CLUSTER_STREAM, pod_subject
from shared.tools.servers import Server


def _pod(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


async def test_a_status_write_no_stream_answered_is_sent_again(nats_server: Server) -> None:
    nc = await nats.connect(f"nats://127.0.0.1:{nats_server.port}")
    js = nc.jetstream()
    # No cluster stream for a moment (as while its leader is elected again): the first
    # sends find no stream to answer them.
    await ensure_streams(js)
    await js.delete_stream(CLUSTER_STREAM)

    async def stream_back() -> None:
        await asyncio.sleep(0.5)
        await ensure_streams(js)

    back = asyncio.create_task(stream_back())
    failure = Failure("default/p", 1, "0/3 nodes are available", ["X"], unschedulable=True)
    rep = await record_failure(nc, _pod("p"), 0, failure)
    await back
    assert rep.get("seq") == 1  # written, over the version it was given
    last = await js.get_last_msg(CLUSTER_STREAM, pod_subject("default", "p"))
    cond = pod_condition(json.loads(last.data)["object"]) or {}
    assert (cond.get("status"), cond.get("reason")) == ("False", "Unschedulable")
    await nc.close()
