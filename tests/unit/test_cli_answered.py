"""The CLI's JetStream requests while a Raft group elects its leader."""

from __future__ import annotations

import nats.errors
import pytest
from nats.js.errors import NotFoundError, ServiceUnavailableError

from shared.tools.cli.live import CliError, answered


def unavailable() -> ServiceUnavailableError:
    return ServiceUnavailableError(
        code=503, err_code=10008, description="JetStream system temporarily unavailable"
    )


class Refusing:
    """A request refused `times` times with `error`, then answered."""

    def __init__(self, times: int, error: Exception) -> None:
        self.times, self.error, self.asked = times, error, 0

    async def __call__(self) -> str:
        self.asked += 1
        if self.asked <= self.times:
            raise self.error
        return "answer"


@pytest.mark.parametrize(
    "error", [unavailable(), nats.errors.TimeoutError(), nats.errors.NoRespondersError()]
)
async def test_a_request_refused_while_jetstream_elects_is_asked_again(error: Exception) -> None:
    request = Refusing(3, error)
    assert await answered(request, patience=5) == "answer"
    assert request.asked == 4


async def test_a_request_refused_past_the_patience_fails_with_one_clear_line() -> None:
    request = Refusing(1_000, unavailable())
    with pytest.raises(CliError, match="temporarily unavailable"):
        await answered(request, patience=1)
    assert 1 < request.asked < 10


async def test_an_answer_that_is_an_error_is_not_asked_again() -> None:
    request = Refusing(1, NotFoundError(code=404, description="stream not found"))
    with pytest.raises(NotFoundError):
        await answered(request)
    assert request.asked == 1
