"""Pods as real clusters carry them: several KB each, from a Kubernetes docs-style
manifest (docs_pod.yaml beside this file), grown to a chosen size the way real pods
grow, with the last-applied-configuration annotation kubectl writes."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from shared.wire import dump_json

_MANIFEST = Path(__file__).with_name("docs_pod.yaml")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@cache
def _template() -> dict[str, Any]:
    pod: dict[str, Any] = yaml.safe_load(_MANIFEST.read_text())
    return pod


def docs_pod(name: str, *, size: int = 0, cpu: str = "100m") -> dict[str, Any]:
    """The docs pod named `name`, requesting `cpu`: about 3 KB as a watch event's JSON,
    or `size` bytes when that is more (a last-applied configuration that long)."""
    pod = copy.deepcopy(_template())
    meta = pod["metadata"]
    meta["name"] = name
    meta["uid"] = f"uid-{name}"
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    meta["annotations"][LAST_APPLIED] = ""
    room = size - len(dump_json({"type": "ADDED", "object": pod}))
    if room > 0:  # kubectl's copy of the manifest, as long as it takes
        applied = json.dumps({k: pod[k] for k in ("apiVersion", "kind", "spec")})
        applied = applied.replace('"', "'")  # escaped quotes would count twice
        meta["annotations"][LAST_APPLIED] = (applied + " " * room)[:room]
    else:
        del meta["annotations"][LAST_APPLIED]
    return pod
