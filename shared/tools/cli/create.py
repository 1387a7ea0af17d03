"""What `ksched create` publishes (pure): kubectl create's semantics over apply's
planner (apply.plan).

- An object with `metadata.generateName` and no name is named as the API server's
  names.SimpleNameGenerator does: the prefix (cut to 58 characters) and 5 random
  characters of apimachinery's alphabet; a name already taken is drawn again.
- An object that exists already is refused with the API server's AlreadyExists (as
  kubectl prints it: `Error from server (AlreadyExists): error when creating "FILE":
  pods "x" already exists`); the others are still created.

So scheduler_perf's templates (`generateName: pod-`) run unchanged, once per create.
"""

from __future__ import annotations

import copy
import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from shared.tools.cli.apply import CLUSTER_SCOPED, RESOURCE_NAMES, Applied, Current, plan
from shared.tools.cli.manifests import Manifest
from shared.tools.cli.workloads import ALPHABET

MAX_NAME_LENGTH = 63  # a DNS-1123 label
RANDOM_LENGTH = 5
MAX_GENERATED_NAME_LENGTH = MAX_NAME_LENGTH - RANDOM_LENGTH
STDIN = "-"


def generate_name(base: str, rand: random.Random) -> str:
    """names.SimpleNameGenerator.GenerateName."""
    suffix = "".join(rand.choice(ALPHABET) for _ in range(RANDOM_LENGTH))
    return base[:MAX_GENERATED_NAME_LENGTH] + suffix


def plural(resource: str) -> str:
    """kubectl's `pods`, `deployments.apps`, `priorityclasses.scheduling.k8s.io`."""
    name, dot, group = resource.partition(".")
    return f"{name}{'es' if name.endswith('s') else 's'}{dot}{group}"


def resource_of(kind: str) -> str:
    return RESOURCE_NAMES.get(kind, kind.lower())


def source_name(source: str) -> str:
    return "STDIN" if source == STDIN else source


def table_of(kind: str, current: Current) -> Mapping[str, tuple[dict[str, Any], int]] | None:
    """The current objects of `kind` (None: a kind the cluster stream does not hold)."""
    try:
        return current.table(kind)
    except KeyError:
        return None


def key_for(kind: str, meta: Mapping[str, Any], name: str) -> str:
    """The object's key in its table: `namespace/name`, or the name (cluster-scoped)."""
    return name if kind in CLUSTER_SCOPED else f"{meta.get('namespace') or 'default'}/{name}"


def with_generated_names(
    manifests: Sequence[Manifest], current: Current, rand: random.Random
) -> list[Manifest]:
    """Each generateName object named (a copy; the others as they are)."""
    out = []
    chosen: set[tuple[str, str]] = set()
    for m in manifests:
        meta = m.obj.get("metadata") if isinstance(m.obj.get("metadata"), dict) else None
        base = (meta or {}).get("generateName")
        if meta is None or meta.get("name") or not isinstance(base, str) or not base:
            out.append(m)
            continue
        kind = str(m.obj.get("kind", ""))
        table = table_of(kind, current) or {}
        name = generate_name(base, rand)
        while key_for(kind, meta, name) in table or (kind, key_for(kind, meta, name)) in chosen:
            name = generate_name(base, rand)
        chosen.add((kind, key_for(kind, meta, name)))
        obj = copy.deepcopy(m.obj)
        obj["metadata"]["name"] = name
        out.append(replace(m, obj=obj))
    return out


@dataclass(frozen=True)
class Outcome:
    """One object: created (what apply would print and publish), or refused (the
    error line for stderr)."""

    created: Applied | None = None
    error: str = ""


def plan_create(
    manifests: Sequence[Manifest],
    current: Current,
    now: str,
    rand: random.Random,
    new_uid: Callable[[], str] = lambda: str(uuid.uuid4()),
) -> list[Outcome]:
    named = with_generated_names(manifests, current, rand)
    sources = {
        f"{resource_of(str(m.obj.get('kind')))}/{(m.obj.get('metadata') or {}).get('name')}": (
            m.source
        )
        for m in named
    }
    applied = plan(named, current, now, new_uid)
    created: set[tuple[str, str]] = set()
    outcomes = []
    for item in applied:
        ref = item.line.split(" ", 1)[0]  # "resource/name", as apply prints it
        keys = {(a.kind, _key(a.obj)) for a in item.actions}
        if any(a.verb != "created" for a in item.actions) or keys & created:
            resource, _, name = ref.partition("/")
            where = source_name(sources.get(ref, STDIN))
            outcomes.append(
                Outcome(
                    error=f"Error from server (AlreadyExists): error when creating "
                    f'"{where}": {plural(resource)} "{name}" already exists'
                )
            )
            continue
        created |= keys
        outcomes.append(Outcome(created=item))
    return outcomes


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name')}"
