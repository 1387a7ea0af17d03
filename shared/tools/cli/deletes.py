"""What `ksched delete` publishes (pure): a DELETED watch event per object, on the
subject's current sequence, with kubectl's lines.

- `delete -f FILE`: every object of the files, in order. Deleting a workload
  deletes what it owns, as the garbage collector would (foreground, matched by owner
  uid): a Deployment's ReplicaSets and their pods, a ReplicaSet's or StatefulSet's
  own object (ksched keeps those) and its pods; with nothing left it is NotFound. A
  kind ksched keeps nothing of is skipped with a warning.
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


Owned = tuple[str, dict[str, Any], int]  # (kind, object, stream sequence)


def deleted(kind: str, name: str, objs: Sequence[Owned]) -> Deletion:
    """`kind` `name` goes: DELETED for each of `objs` (the object itself, or what a
    workload owns)."""
    return Deletion(
        line=f'{resource_of(kind)} "{name}" deleted',
        actions=tuple(Action(k, obj, "DELETED", seq, "deleted") for k, obj, seq in objs),
    )


def not_found(kind: str, name: str, source: str | None = None) -> str:
    where = f'error when deleting "{source_name(source)}": ' if source is not None else ""
    return f'Error from server (NotFound): {where}{plural(resource_of(kind))} "{name}" not found'


# What a workload may own in ksched's cluster stream, dependents first.
_DEPENDENT_KINDS = ("ReplicaSet", "StatefulSet", "ReplicationController", "Pod")


def owned(obj: dict[str, Any], current: Current, kind: str) -> list[Owned]:
    """The workload's own object, if ksched keeps one, and everything it owns,
    transitively (a Deployment's ReplicaSets and their pods), pods first."""
    uids = {owner_reference(obj)["uid"]}
    found: list[Owned] = []
    own = table_of(kind, current)
    meta = obj.get("metadata") or {}
    entry = own.get(key_for(kind, meta, str(meta.get("name")))) if own is not None else None
    for dependent in _DEPENDENT_KINDS:
        for _, (child, seq) in sorted((table_of(dependent, current) or {}).items()):
            refs = (child.get("metadata") or {}).get("ownerReferences") or []
            if any(r.get("uid") in uids for r in refs):
                found.append((dependent, child, seq))
                if dependent != "Pod":
                    uids.add(owner_reference(child)["uid"])
    pods = [o for o in found if o[0] == "Pod"]
    rest = [o for o in found if o[0] != "Pod"]
    return pods + rest + ([(kind, entry[0], entry[1])] if entry else [])


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
            objs = owned(m.obj, current, kind)
            out.append(deleted(kind, name, objs) if objs else missing)
            continue
        table = table_of(kind, current)
        if table is None:
            skipped = f"Warning: ksched keeps no {kind} objects: {kind}/{name} skipped"
            out.append(Deletion(warning=skipped))
            continue
        entry = table.get(key_for(kind, meta, name))
        out.append(deleted(kind, name, [(kind, *entry)]) if entry else missing)
    return out
