"""Running manifest files through `ksched apply` / `ksched create` on one live stack,
and reading back what became of each pod (see tests/e2e/test_manifests.py).

Cases run in waves (shared/tools/outcomes.plan_waves): the cases of a wave are
applied side by side, their pods are judged once every case has settled, and then
deleted, so that the next wave starts from the test cluster alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy

from shared.api.models import object_key
from shared.subjects import ERROR_HEADER, ERRORS_PREFIX, pod_subject
from shared.tools.client import PodTracker
from shared.tools.outcomes import (
    FINAL,
    GATED,
    PENDING,
    REFUSED,
    Expected,
    PodOutcome,
    Run,
    pod_outcome,
    settled,
)

Cli = Callable[..., Awaitable[tuple[int, str, str]]]
SETTLE_SECONDS = 30.0


def manifest_docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def object_names(paths: Sequence[Path]) -> frozenset[str]:
    """kind/namespace/name of everything the files name (generateName names nothing)."""
    names = set()
    for path in paths:
        for doc in manifest_docs(path):
            meta = doc.get("metadata") or {}
            if meta.get("name"):
                names.add(f"{doc.get('kind')}/{meta.get('namespace') or ''}/{meta['name']}")
    return frozenset(names)


def namespace_of(path: Path) -> str:
    docs = manifest_docs(path)
    return ((docs[0].get("metadata") or {}).get("namespace") if docs else None) or "default"


def pods_in(output: str, namespace: str) -> list[str]:
    """ns/name of the pods a verb's output lists (`pod/x created`, `  pod/x created`)."""
    words = (line.split()[0] for line in output.splitlines() if line.strip())
    return [object_key(namespace, w.removeprefix("pod/")) for w in words if w.startswith("pod/")]


@dataclass
class Step:
    """One verb on one file, and the pods it listed."""

    code: int
    out: str
    err: str
    pods: list[str]


@dataclass
class Observer:
    """The pods (PodTracker) and the reasons ksched gave on ksched.errors.<subject>."""

    tracker: PodTracker = field(default_factory=PodTracker)
    refusals: dict[str, str] = field(default_factory=dict)  # original subject -> reason

    async def start(self, nc: NATS) -> None:
        await self.tracker.start(nc)
        await nc.jetstream().subscribe(
            f"{ERRORS_PREFIX}.>",
            cb=self._on_error,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.ALL,
        )

    async def _on_error(self, msg: Msg) -> None:
        original = msg.subject.removeprefix(ERRORS_PREFIX + ".")
        self.refusals[original] = str((msg.headers or {}).get(ERROR_HEADER, ""))
        self.tracker.changed.set()

    def pod(self, key: str) -> PodOutcome:
        namespace, name = key.split("/", 1)
        refusal = self.refusals.get(pod_subject(namespace, name), "")
        view = self.tracker.pods.get(key)
        deleted = bool(view and view.deleted)
        return pod_outcome(self.tracker.objects.get(key), deleted, refusal)

    def run(self, step: Step, victims: Sequence[str] = ()) -> Run:
        gone = sum(1 for key in victims if key in self.tracker.deleted())
        return Run(step.code, step.err, tuple(self.pod(k) for k in step.pods), gone)

    async def wait(self, done: Callable[[], bool], timeout: float = SETTLE_SECONDS) -> bool:
        return await self.tracker.wait_until(lambda _: done(), timeout)


@dataclass
class Runner:
    """Verbs on files against one stack, a few at a time (each is a process)."""

    cli: Cli
    url: str
    observer: Observer
    root: Path  # file names in messages are shown from here
    parallel: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(3))

    async def verb(self, verb: str, path: Path) -> Step:
        async with self.parallel:
            code, out, err = await self.cli(self.url, verb, "-f", str(path))
        err = err.replace(f"{self.root}/", "")
        return Step(code, out, err, pods_in(out, namespace_of(path)) if code == 0 else [])

    async def step(self, verb: str, path: Path) -> Step:
        """A verb whose pods must be decided before the next step, as the docs'
        walk-throughs wait for each command."""
        step = await self.verb(verb, path)
        decided = (*FINAL, PENDING, GATED)
        await self.observer.wait(
            lambda: all(self.observer.pod(k).kind in decided for k in step.pods)
        )
        return step

    async def delete(self, keys: Sequence[str]) -> None:
        """Delete the pods ksched took in (a refused one never became a pod)."""
        keep = [k for k in keys if self.observer.pod(k).kind != REFUSED]
        by_namespace: dict[str, list[str]] = {}
        for key in keep:
            namespace, name = key.split("/", 1)
            by_namespace.setdefault(namespace, []).append(name)
        for namespace, names in sorted(by_namespace.items()):
            async with self.parallel:
                await self.cli(self.url, "delete", "pod", *names, "-n", namespace)
        await self.observer.wait(lambda: set(keep) <= self.observer.tracker.deleted())


def all_settled(observer: Observer, pairs: Sequence[tuple[Expected, Step, Sequence[str]]]) -> bool:
    return all(settled(exp, observer.run(step, victims)) for exp, step, victims in pairs)
