"""JSON log lines: fields, extras, exceptions, level handling."""

from __future__ import annotations

import io
import json
import logging
import re
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from shared.runtime.logs import JsonFormatter, format_ts, get_logger, setup_logging

TS_PATTERN = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


@pytest.fixture
def capture() -> tuple[logging.Logger, io.StringIO]:
    """A private logger writing JSON into a buffer, isolated from the root logger."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter("scheduler"))
    # Not registered with the logging manager, so pytest's capture handlers never attach to it.
    logger = logging.Logger("ksched.test.logs", logging.DEBUG)
    logger.addHandler(handler)
    return logger, stream


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_core_fields(capture: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = capture
    logger.warning("bound %s to %s", "ns/pod", "node-1")
    [entry] = lines(stream)
    assert entry["level"] == "warning"
    assert entry["service"] == "scheduler"
    assert entry["logger"] == "ksched.test.logs"
    assert entry["msg"] == "bound ns/pod to node-1"
    assert TS_PATTERN.match(entry["ts"])
    assert "exc" not in entry


def test_extras_are_fields(capture: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = capture
    logger.info("cycle", extra={"pod": "ns/name", "cycle": 3, "nodes": ["a", "b"]})
    [entry] = lines(stream)
    assert entry["pod"] == "ns/name"
    assert entry["cycle"] == 3
    assert entry["nodes"] == ["a", "b"]


def test_odd_extra_values_do_not_raise(capture: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = capture

    class Opaque:
        def __str__(self) -> str:
            return "opaque!"

    loop: list[object] = []
    loop.append(loop)
    logger.info("odd", extra={"thing": Opaque(), "raw": b"\x00", "loop": loop})
    [entry] = lines(stream)
    assert entry["msg"] == "odd"
    assert entry["thing"] == "opaque!"
    assert entry["raw"] == "b'\\x00'"
    assert entry["loop"] == "[[...]]"


def test_extra_cannot_shadow_core_fields(capture: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = capture
    logger.info("real", extra={"service": "impostor", "level": "fatal"})
    [entry] = lines(stream)
    assert (entry["service"], entry["level"]) == ("scheduler", "info")
    assert (entry["extra_service"], entry["extra_level"]) == ("impostor", "fatal")


def test_exception_is_formatted(capture: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = capture
    try:
        raise ValueError("bad pod spec")
    except ValueError:
        logger.exception("bind failed", extra={"pod": "ns/x"})
    [entry] = lines(stream)
    assert entry["level"] == "error"
    assert entry["msg"] == "bind failed"
    assert entry["exc"].startswith("Traceback (most recent call last):")
    assert "ValueError: bad pod spec" in entry["exc"]
    assert entry["pod"] == "ns/x"


def test_bad_format_args_still_log(capture: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = capture
    logger.info("%d pods", "not-a-number")
    [entry] = lines(stream)
    assert "formatting failed" in entry["msg"]


def test_format_ts_is_rfc3339_utc_millis() -> None:
    # 2026-11-21T17:00:00.123Z as a Unix timestamp.
    assert format_ts(1795280400.123456) == "2026-11-21T17:00:00.123Z"
    assert format_ts(0) == "1970-01-01T00:00:00.000Z"


def test_setup_logging_writes_json_to_stderr(
    monkeypatch: pytest.MonkeyPatch, restore_root: None
) -> None:
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    setup_logging("binder", "DEBUG")
    get_logger("ksched.binder").debug("hello", extra={"node": "n1"})
    [entry] = lines(stderr)
    assert (entry["service"], entry["level"], entry["msg"]) == ("binder", "debug", "hello")
    assert entry["node"] == "n1"


def test_setup_logging_is_idempotent(monkeypatch: pytest.MonkeyPatch, restore_root: None) -> None:
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    setup_logging("binder")
    setup_logging("binder", "Warning")
    root = logging.getLogger()
    assert len(root.handlers) == 1
    assert root.level == logging.WARNING
    get_logger("ksched.binder").info("filtered out")
    get_logger("ksched.binder").error("kept")
    assert [entry["msg"] for entry in lines(stderr)] == ["kept"]


def test_setup_logging_rejects_bad_level(restore_root: None) -> None:
    with pytest.raises(ValueError, match=r"debug\|info\|warning\|error"):
        setup_logging("binder", "verbose")
