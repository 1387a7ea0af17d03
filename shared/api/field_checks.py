"""Reading the fields of an object as published, for the validators.

The validators work on the object as its publisher sent it (camelCase JSON), before
the models parse it: a value of the wrong JSON type reads as absent here and is left
to the models, which refuse it in the decoder's words.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from shared.api.validation import (
    invalid,
    label_value_errors,
    not_supported,
    qualified_name_errors,
    show,
)

Errors = list[str]  # field.Error strings


def dicts(value: Any) -> list[Mapping[str, Any]]:
    """The objects of a list (other shapes are the models' to refuse)."""
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def as_int(value: Any, absent: int | None = None) -> int | None:
    """An integer field's value; `absent` for a missing or null one (Go's zero value
    where the field is not a pointer)."""
    if value is None:
        return absent
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def string_map(value: Any) -> dict[str, str] | None:
    """A map of strings (labels, a selector's matchLabels), or None for any other value."""
    if not isinstance(value, Mapping):
        return None
    if all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return dict(value)
    return None


def strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def enum_errors(obj: Mapping[str, Any], name: str, supported: Sequence[str], path: str) -> Errors:
    """An enum set to a value it does not have (empty: defaulted, not checked here)."""
    value = obj.get(name)
    if not isinstance(value, str) or value == "" or value in supported:
        return []
    return [not_supported(f"{path}.{name}", value, supported)]


def grammar_errors(value: Any, path: str, grammar: Callable[[str], list[str]]) -> Errors:
    """A name checked against its grammar when set."""
    if not isinstance(value, str) or not value:
        return []
    return [invalid(path, show(value), msg) for msg in grammar(value)]


def label_name_errors(key: str, path: str) -> Errors:
    """ValidateLabelName: a qualified name."""
    return [invalid(path, show(key), msg) for msg in qualified_name_errors(key)]


def label_values_errors(values: list[str], path: str) -> Errors:
    return [
        invalid(f"{path}[{i}]", show(v), m)
        for i, v in enumerate(values)
        for m in label_value_errors(v)
    ]
