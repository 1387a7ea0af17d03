"""The import contract between the library, the services and the tools.

- A service (`services/<name>/`) imports the library and its own package only:
  never `shared.tools`, never another service.
- A library module (`shared/` outside `shared/tools/`) imports neither
  `shared.tools` nor `services`.
- The framework (`shared/framework/`) imports no plugin: it is handed its registry,
  as kube-scheduler's NewFramework is, and asks plugins through its interfaces.
- The tools (`shared/tools/`) may import both.

Read from the source with `ast`; nothing is imported, so an import inside a
function or under TYPE_CHECKING counts like any other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOLS = "shared.tools"


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def module_name(path: Path) -> str:
    """`shared/tools/cli/main.py` -> `shared.tools.cli.main`; a package is its folder."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(source: str, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, imported name) for every import in `source`. `from a import b` gives
    `a.b` (b may be a module or a name in a); relative imports are resolved."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                yield node.lineno, base if alias.name == "*" else f"{base}.{alias.name}"


def violation(importer: str, imported: str) -> str | None:
    """Why `importer` may not import `imported`, or None when it may."""
    if _within(importer, TOOLS):
        return None
    if _within(imported, TOOLS):
        return "imports the tools"
    if _within(importer, "shared") and _within(imported, "services"):
        return "the library imports a service"
    if _within(importer, "shared.framework") and _within(imported, "shared.plugins"):
        return "the framework imports a plugin"
    if _within(importer, "services"):
        own = ".".join(importer.split(".")[:2])
        if _within(imported, "services") and not _within(imported, own):
            return "a service imports another service"
    return None


def violations(root: Path = ROOT) -> list[str]:
    found = []
    for top in ("services", "shared"):
        for path in sorted((root / top).rglob("*.py")):
            module = module_name(path)
            source = path.read_text(encoding="utf-8")
            for line, imported in imports(source, module, path.name == "__init__.py"):
                reason = violation(module, imported)
                if reason:
                    rel = path.relative_to(root)
                    found.append(f"{rel}:{line}: {module} -> {imported} ({reason})")
    return found


def test_no_forbidden_import() -> None:
    found = violations()
    assert not found, "imports that break the contract:\n" + "\n".join(found)


def test_the_walk_sees_every_part() -> None:
    modules = {module_name(p) for top in ("services", "shared") for p in (ROOT / top).rglob("*.py")}
    assert "services.worker.service" in modules
    assert "shared.framework.runtime" in modules
    assert "shared.tools.cli.main" in modules


@pytest.mark.parametrize(
    ("importer", "source", "expected"),
    [
        ("services.worker.service", "from shared.tools.client import publish_pod", "the tools"),
        ("services.worker.service", "from shared import tools", "the tools"),
        ("services.worker.service", "import shared.tools.devstack", "the tools"),
        ("services.worker.service", "from services.queue.queue import X", "another service"),
        ("shared.framework.runtime", "from services.queue import queue", "a service"),
        ("shared.framework.runtime", "from ..tools import observe", "the tools"),
        ("shared.snapshot", "def f():\n    from shared.tools.bench import perf", "the tools"),
        ("shared.framework.runtime", "from shared.plugins import REGISTRY", "a plugin"),
        ("shared.framework.batch", "from ..plugins.noderesources import fit", "a plugin"),
    ],
)
def test_a_forbidden_import_is_found(importer: str, source: str, expected: str) -> None:
    reasons = [violation(importer, name) for _, name in imports(source, importer, False)]
    assert any(r and expected in r for r in reasons), reasons


@pytest.mark.parametrize(
    ("importer", "source"),
    [
        ("services.worker.service", "from services.worker.preempt import Victims"),
        ("services.worker.service", "from shared.framework import runtime"),
        ("shared.plugins", "from . import args"),
        ("shared.tools.bench.baseline", "from services.queue.queue import SchedulingQueue"),
        ("shared.tools.cli.main", "from shared.tools.bench import suite"),
        ("shared.plugins.noderesources.fit", "from shared.framework.interface import Plugin"),
        ("services.queue.service", "from shared.plugins import REGISTRY"),
    ],
)
def test_an_allowed_import_passes(importer: str, source: str) -> None:
    assert [violation(importer, name) for _, name in imports(source, importer, False)] == [None]
