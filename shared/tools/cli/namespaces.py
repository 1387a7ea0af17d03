"""`-n NS` with `-f` (pure), as kubectl does it: an object without a namespace goes
to NS; an object naming another namespace is refused before anything is published.
Cluster-scoped kinds (Node, PriorityClass) have no namespace to fill or check."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace

from shared.tools.cli.apply import CLUSTER_SCOPED
from shared.tools.cli.manifests import Manifest, ManifestError


def mismatch(found: str, given: str) -> str:
    return (
        f'the namespace from the provided object "{found}" does not match the namespace '
        f"\"{given}\". You must pass '--namespace={found}' to perform this operation."
    )


def in_namespace(manifests: Sequence[Manifest], namespace: str | None) -> list[Manifest]:
    """The manifests with `namespace` (from -n; None: not given) filled in."""
    if namespace is None:
        return list(manifests)
    out = []
    for m in manifests:
        meta = m.obj.get("metadata")
        if m.obj.get("kind") in CLUSTER_SCOPED or not isinstance(meta, dict):
            out.append(m)
            continue
        found = meta.get("namespace")
        if found and found != namespace:
            raise ManifestError(mismatch(found, namespace))
        if not found:
            obj = copy.deepcopy(m.obj)
            obj["metadata"]["namespace"] = namespace
            m = replace(m, obj=obj)
        out.append(m)
    return out
