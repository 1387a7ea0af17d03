"""An informer's start that fails part way (a request unanswered while a stream elects
its leader, a refused consumer) takes back what it subscribed: the services retry the
start with a short timeout (Runtime.takeover_js), and each retry would otherwise leave
one more ordered consumer following the same objects for the process's life."""

from __future__ import annotations

import pytest
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
