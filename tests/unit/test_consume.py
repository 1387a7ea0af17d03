"""Reading a JetStream message's stream sequence off its ack subject (the pull feed
itself is tested against a real server in tests/e2e/test_pull_feed.py)."""

from __future__ import annotations

import pytest
from nats.aio.msg import Msg

from shared.runtime.consume import stream_sequence


@pytest.mark.parametrize(
    "reply",
    [
        "$JS.ACK.KSCHED_CLUSTER.watcher-1.1.4711.42.1700000000000000000.3",
        "$JS.ACK._.ACCHASH.KSCHED_CLUSTER.watcher-1.2.987654.42.1700000000000000000.0.tok",
    ],
)
def test_stream_sequence_reads_what_the_library_reads(reply: str) -> None:
    msg = Msg(None, subject="s", reply=reply)  # type: ignore[arg-type]
    assert stream_sequence(msg) == msg.metadata.sequence.stream
    assert stream_sequence(msg) in (4711, 987654)
