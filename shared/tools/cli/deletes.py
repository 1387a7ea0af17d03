"""What `ksched delete` publishes (pure): a DELETED watch event per object, on the
subject's current sequence, with kubectl's lines.

- `delete -f FILE`: every object of the files, in order. A workload has no object
  of its own in ksched: deleting it deletes the pods it owns (matched by owner uid),
  as the garbage collector would; with none left it is NotFound. A kind ksched
  keeps nothing of is skipped with a warning.
- `delete pods NAME...`, `--all`, `-l`: the pods (or nodes) selected.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shared.tools.cli.apply import Action, Current
from shared.tools.cli.create import key_for, plural, resource_of, source_name, table_of
from shared.tools.cli.manifests import Manifest
from shared.tools.cli.workloads import WORKLOAD_KINDS, owner_reference


@dataclass(frozen=True)
class Deletion:
    line: str = ""  # `pod "x" deleted`
    error: str = ""  # NotFound, for stderr (exit code 1)
    warning: str = ""  # a kind ksched keeps nothing of (stderr, exit code unchanged)
    actions: tuple[Action, ...] = ()


def deleted(
    kind: str, name: str, objs: Sequence[tuple[dict[str, Any], int]], objs_kind: str = ""
) -> Deletion:
    """`kind` `name` goes: DELETED for each of `objs` (the object itself, or the pods
    of a workload: `objs_kind` Pod)."""
    return Deletion(
        line=f'{resource_of(kind)} "{name}" deleted',
        actions=tuple(
            Action(objs_kind or kind, obj, "DELETED", seq, "deleted") for obj, seq in objs
        ),
    )


def not_found(kind: str, name: str, source: str | None = None) -> str:
    where = f'error when deleting "{source_name(source)}": ' if source is not None else ""
    return f'Error from server (NotFound): {where}{plural(resource_of(kind))} "{name}" not found'


def owned_pods(obj: dict[str, Any], current: Current) -> list[tuple[dict[str, Any], int]]:
    uid = owner_reference(obj)["uid"]
    return [
        (pod, seq)
        for _, (pod, seq) in sorted(current.pods.items())
        if any(
            r.get("uid") == uid for r in (pod.get("metadata") or {}).get("ownerReferences") or []
        )
    ]


def plan_delete(manifests: Sequence[Manifest], current: Current) -> list[Deletion]:
    out = []
    for m in manifests:
        kind = str(m.obj.get("kind") or "")
        meta: dict[str, Any] = m.obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        if not name:
            raise m.error("metadata.name: Required value")
        missing = Deletion(error=not_found(kind, name, m.source))
        if kind in WORKLOAD_KINDS:
            pods = owned_pods(m.obj, current)
            out.append(deleted(kind, name, pods, "Pod") if pods else missing)
            continue
        table = table_of(kind, current)
        if table is None:
            skipped = f"Warning: ksched keeps no {kind} objects: {kind}/{name} skipped"
            out.append(Deletion(warning=skipped))
            continue
        entry = table.get(key_for(kind, meta, name))
        out.append(deleted(kind, name, [entry]) if entry else missing)
    return out
