"""Reading a JetStream message's sequences off its ack subject, and noticing
deliveries an ack-all consumer's reader never got (the pull feed itself is tested
against a real server in tests/e2e/test_pull_feed.py)."""

from __future__ import annotations

import pytest
from nats.aio.msg import Msg

from shared.runtime.consume import Deliveries, delivery_sequence, stream_sequence


@pytest.mark.parametrize(
    "reply",
    [
        "$JS.ACK.KSCHED_CLUSTER.watcher-1.1.4711.42.1700000000000000000.3",
        "$JS.ACK._.ACCHASH.KSCHED_CLUSTER.watcher-1.2.987654.42.1700000000000000000.0.tok",
    ],
)
def test_sequences_read_what_the_library_reads(reply: str) -> None:
    msg = Msg(None, subject="s", reply=reply)  # type: ignore[arg-type]
    assert stream_sequence(msg) == msg.metadata.sequence.stream
    assert stream_sequence(msg) in (4711, 987654)
    assert delivery_sequence(msg) == msg.metadata.sequence.consumer == 42


def delivered(cseq: int, sseq: int) -> Msg:
    reply = f"$JS.ACK.KSCHED_CLUSTER.watcher-1.1.{sseq}.{cseq}.1700000000000000000.0"
    return Msg(None, subject="s", reply=reply)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("batches", "handed", "jumped", "handled"),
    [
        pytest.param([[(1, 10), (2, 12), (3, 13)]], [[10, 12, 13]], [False], 13, id="in order"),
        pytest.param(
            [[(1, 10), (2, 12)], [(5, 20), (6, 21)]],
            [[10, 12], []],
            [False, True],
            12,
            id="a batch after lost deliveries",
        ),
        pytest.param(
            [[(1, 10), (2, 11), (4, 13)]], [[10, 11]], [True], 11, id="a jump inside a batch"
        ),
        pytest.param([[(3, 30)]], [[]], [True], 0, id="a new consumer's first ones lost"),
        pytest.param(
            [[(1, 10), (2, 11)], [(2, 11), (3, 12)]],
            [[10, 11], [11, 12]],
            [False, False],
            12,
            id="a new consumer leader sends again what was received",
        ),
    ],
)
def test_deliveries_notice_a_jump_in_the_delivery_sequence(
    batches: list[list[tuple[int, int]]],
    handed: list[list[int]],
    jumped: list[bool],
    handled: int,
) -> None:
    deliveries = Deliveries()
    for batch, want, jump in zip(batches, handed, jumped, strict=True):
        msgs, skipped = deliveries.take([delivered(c, s) for c, s in batch])
        assert [stream_sequence(m) for m in msgs] == want
        assert skipped is jump
    assert deliveries.handled == handled


def test_a_restarted_consumer_counts_its_deliveries_from_one() -> None:
    deliveries = Deliveries()
    deliveries.take([delivered(1, 10), delivered(2, 11)])
    assert deliveries.take([delivered(7, 20)])[1]
    deliveries.restart()
    msgs, skipped = deliveries.take([delivered(1, 12), delivered(2, 20)])
    assert len(msgs) == 2 and not skipped and deliveries.handled == 20
