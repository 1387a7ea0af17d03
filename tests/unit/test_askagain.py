"""runtime/askagain.py: a new leader's JetStream reads asked again until answered,
writes sent once."""

from __future__ import annotations

import asyncio

import pytest
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.errors import ServiceUnavailableError

from shared.runtime.askagain import first_answer, is_read

PREFIX = "$JS.API"


@pytest.mark.parametrize(
    ("api", "read"),
    [
        ("STREAM.INFO.KSCHED_CLUSTER", True),
        ("STREAM.NAMES", True),
        ("STREAM.MSG.GET.KSCHED_BIND", True),
        ("CONSUMER.INFO.KSCHED_CLUSTER.watcher-2", True),
        ("CONSUMER.NAMES.KSCHED_CLUSTER", True),
        ("DIRECT.GET.KV_KSCHED_LEASES", True),
        ("CONSUMER.CREATE.KSCHED_CLUSTER", False),  # an ephemeral consumer: twice is two
        ("CONSUMER.CREATE.KSCHED_CLUSTER.watcher-2", False),
        ("CONSUMER.DELETE.KSCHED_CLUSTER.watcher-1", False),
        ("STREAM.CREATE.KSCHED_CLUSTER", False),
        ("STREAM.UPDATE.KSCHED_CLUSTER", False),
    ],
)
def test_only_reads_are_asked_again(api: str, read: bool) -> None:
    assert is_read(f"{PREFIX}.{api}", PREFIX) is read


def test_a_subject_outside_the_api_is_no_read() -> None:
    assert not is_read("ksched.cluster.pods.default.STREAM.INFO.x", PREFIX)


class Server:
    """Leaves the first `silent` asks unanswered until their timeout, answers the rest."""

    def __init__(self, silent: int, answer: object = "info") -> None:
        self.silent, self.answer, self.asks = silent, answer, 0

    async def ask(self, left: float) -> object:
        self.asks += 1
        if self.asks <= self.silent:
            await asyncio.sleep(left)
            raise NatsTimeoutError
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


async def test_a_read_unanswered_is_asked_again_and_the_first_answer_wins() -> None:
    server = Server(silent=2)
    assert await first_answer(server.ask, timeout=30, again=0.01) == "info"
    assert server.asks == 3


async def test_an_answered_read_is_asked_once() -> None:
    server = Server(silent=0)
    assert await first_answer(server.ask, timeout=30, again=0.01) == "info"
    assert server.asks == 1


async def test_an_error_the_server_answered_ends_the_read() -> None:
    server = Server(silent=1, answer=ServiceUnavailableError())
    with pytest.raises(ServiceUnavailableError):
        await first_answer(server.ask, timeout=30, again=0.01)
    assert server.asks == 2


async def test_a_read_never_answered_times_out() -> None:
    server = Server(silent=10**6)
    with pytest.raises(NatsTimeoutError):
        await first_answer(server.ask, timeout=0.05, again=0.01)
    assert server.asks > 1
