"""Structured logs: one JSON object per line on stderr, so log shippers need no parsing rules."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

# Everything a bare LogRecord carries; any other attribute came in through `extra=`.
_STANDARD_ATTRS = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys()
    | {"message", "asctime", "taskName"}
)
_CORE_FIELDS = ("ts", "level", "service", "logger", "msg", "exc", "stack")


def format_ts(created: float) -> str:
    """RFC 3339 UTC with milliseconds, e.g. 2026-11-21T17:00:00.123Z."""
    dt = datetime.fromtimestamp(created, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + f".{dt.microsecond // 1000:03d}Z"


def extras_of(record: logging.LogRecord) -> dict[str, Any]:
    """Attributes added via `extra=`; names clashing with core fields get an `extra_` prefix."""
    found: dict[str, Any] = {}
    for key, value in vars(record).items():
        if key in _STANDARD_ATTRS or key.startswith("_"):
            continue
        found[f"extra_{key}" if key in _CORE_FIELDS else key] = value
    return found


def message_of(record: logging.LogRecord) -> str:
    # A bad format string must not cost us the log line.
    try:
        return record.getMessage()
    except Exception:
        return f"{record.msg!r} % {record.args!r} (formatting failed)"


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": format_ts(record.created),
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "msg": message_of(record),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exc"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        entry.update(extras_of(record))
        return dumps(entry)


def dumps(entry: dict[str, Any]) -> str:
    try:
        return json.dumps(entry, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        # Circular references or non-string keys defeat default=str: stringify just those.
        safe = {key: encodable(value) for key, value in entry.items()}
        return json.dumps(safe, default=str, ensure_ascii=False)


def encodable(value: Any) -> Any:
    try:
        json.dumps(value, default=str)
    except (TypeError, ValueError):
        return str(value)
    return value


def parse_level(level: str) -> int:
    try:
        return LEVELS[level.strip().lower()]
    except KeyError:
        accepted = "|".join(LEVELS)
        raise ValueError(f"invalid log level {level!r}; accepted: {accepted}") from None


def setup_logging(service: str, level: str = "info") -> None:
    """Send all logging to stderr as JSON lines; calling again replaces the handlers."""
    numeric = parse_level(level)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(name)
