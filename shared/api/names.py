"""How ksched keys API objects: `namespace/name`, the default namespace filled in as
the API server does. Plain functions on raw objects, kept apart from the pydantic
models so that light callers (the CLI) can use them without importing the models."""

from __future__ import annotations

from typing import Any

DEFAULT_NAMESPACE = "default"


def object_key(namespace: str, name: str) -> str:
    """namespace/name: how ksched names a namespaced object everywhere (pods, groups)."""
    return f"{namespace or DEFAULT_NAMESPACE}/{name}"


def namespace_and_name(raw: dict[str, Any]) -> tuple[str, str]:
    """A raw object's namespace (the default one when absent, as the API server
    defaults it) and name."""
    meta = raw.get("metadata") or {}
    return meta.get("namespace") or DEFAULT_NAMESPACE, str(meta.get("name") or "")


def key_of(raw: dict[str, Any]) -> str:
    return object_key(*namespace_and_name(raw))
