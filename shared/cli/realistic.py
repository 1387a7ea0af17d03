"""Pods as real clusters carry them: several KB each, from a Kubernetes docs-style
manifest (tests/data/docs-pod.yaml), grown to a chosen size the way real pods grow,
with the last-applied-configuration annotation kubectl writes."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from shared.wire import dump_json

_MANIFEST = Path(__file__).parent / "data" / "docs-pod.yaml"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@cache
def _template() -> dict[str, Any]:
    pod: dict[str, Any] = yaml.safe_load(_MANIFEST.read_text())
    return pod


def docs_pod(name: str, *, size: int = 3000, cpu: str = "100m") -> dict[str, Any]:
    """The docs pod named `name`, `size` bytes as a watch event's JSON (at least its
    natural size, about 3 KB), requesting `cpu`."""
    pod = copy.deepcopy(_template())
    meta = pod["metadata"]
    meta["name"] = name
    meta["uid"] = f"uid-{name}"
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    applied = json.dumps({k: pod[k] for k in ("apiVersion", "kind", "spec")})
    meta["annotations"][LAST_APPLIED] = applied
    missing = size - len(dump_json({"type": "ADDED", "object": pod}))
    if missing > 0:  # a longer last-applied configuration, as a bigger manifest gives
        meta["annotations"][LAST_APPLIED] = applied + " " * missing
    return pod
