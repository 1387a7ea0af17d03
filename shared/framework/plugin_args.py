"""Reading a plugin's pluginConfig args (kube-scheduler's apis/config validation):
every error names the field, as `pluginConfig[<plugin>].args.<field>: <message>`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from shared.config import ConfigError


def arg_error(plugin: str, field: str, message: str) -> ConfigError:
    where = f"pluginConfig[{plugin}].args" + (f".{field}" if field else "")
    return ConfigError(f"{where}: {message}")


def reject_unknown(plugin: str, args: Mapping[str, Any], known: Iterable[str]) -> None:
    unknown = sorted(set(args) - set(known))
    if unknown:
        raise arg_error(plugin, unknown[0], "unknown field")


class ArgsParser:
    """Reads one plugin's v1 args field by field, raising ConfigError that names the field."""

    def __init__(self, plugin: str) -> None:
        self.plugin = plugin

    def error(self, path: str, message: str) -> ConfigError:
        return arg_error(self.plugin, path, message)

    def mapping(self, value: Any, path: str, known: Sequence[str]) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.error(path, "must be an object")
        for key in value:
            if key not in known:
                raise self.error(f"{path}.{key}" if path else str(key), "unknown field")
        return value

    def items(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(path, "must be a list")
        return value

    def integer(self, value: Any, path: str, default: int = 0) -> int:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(path, f"must be an integer, got {value!r}")
        return value

    def string(self, value: Any, path: str) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self.error(path, f"must be a string, got {value!r}")
        return value
