"""An informer's start that fails part way (a request unanswered while a stream elects
its leader, a refused consumer, consumers that deliver nothing) takes back what it
subscribed: the services retry the start (with the takeover's short timeout,
Runtime.takeover_js), and each retry would otherwise leave one more ordered consumer
following the same objects for the process's life."""

from __future__ import annotations

from typing import Any

import pytest
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.errors import APIError

from shared.api.events import ClusterObject, SubjectRef
from shared.runtime.informer import Informer
from shared.runtime.watermark import consumer_names
from shared.subjects import CLUSTER_STREAM, SERVICES_PREFIX
from tests.e2e.state import eventually

# A subject with an empty token: the server refuses a consumer filtered on it, after the
# informer has subscribed to the first prefix.
REFUSED_PREFIX = "ksched.cluster..refused"


async def test_a_start_that_fails_part_way_leaves_no_consumer_behind(
    js: JetStreamContext,
) -> None:
    seen: list[SubjectRef] = []

    def handler(ref: SubjectRef, obj: ClusterObject | None) -> None:
        seen.append(ref)

    informer = Informer(js, (SERVICES_PREFIX, REFUSED_PREFIX), handler, "test objects")
    with pytest.raises(APIError):
        await informer.start()

    # With no subscriber left, the server drops the first prefix's ephemeral consumer;
    # one still subscribed would keep it (and its deliveries) for good.
    async def none_left() -> bool:
        return not await consumer_names(js, CLUSTER_STREAM)

    assert await eventually(none_left, 30), await consumer_names(js, CLUSTER_STREAM)


class SilentJetStream(JetStreamContext):
    """Consumers made as asked, whose deliveries never reach the informer: as when the
    server a consumer was made through goes silent (a host cut off) right after."""

    async def subscribe(self, *args: Any, **kwargs: Any) -> JetStreamContext.PushSubscription:
        async def dropped(msg: Msg) -> None:
            pass

        return await super().subscribe(*args, **{**kwargs, "cb": dropped})


async def test_consumers_that_deliver_nothing_fail_the_start(js: JetStreamContext) -> None:
    await js.publish(f"{SERVICES_PREFIX}.default.web", b"{}")  # one object to read
    silent = SilentJetStream(js._nc, timeout=js._timeout)
    informer = Informer(silent, (SERVICES_PREFIX,), lambda ref, obj: None, "test objects")
    # the caller retries a failed start; one that waited out the sync timeout would serve
    # without the objects
    with pytest.raises(TimeoutError):
        await informer.start()

    async def none_left() -> bool:
        return not await consumer_names(js, CLUSTER_STREAM)

    assert await eventually(none_left, 30), await consumer_names(js, CLUSTER_STREAM)
