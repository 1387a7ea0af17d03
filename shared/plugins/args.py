"""Helpers for validating pluginConfig args (errors name the field)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from shared.config import ConfigError


def arg_error(plugin: str, field: str, message: str) -> ConfigError:
    return ConfigError(f"pluginConfig[{plugin}].args.{field}: {message}")


def reject_unknown(plugin: str, args: Mapping[str, Any], known: Iterable[str]) -> None:
    unknown = sorted(set(args) - set(known))
    if unknown:
        raise arg_error(plugin, unknown[0], "unknown field")
