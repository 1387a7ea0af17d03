"""Reading Kubernetes manifests the way kubectl does: YAML or JSON, multi-document,
`kind: List`, files, directories or stdin; errors name the file, the document and
the field, on one line (a YAML error as kubectl words it: `error parsing FILE: error
converting YAML to JSON: yaml: line N: <problem>`)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"
# PyYAML's wording of the common mistakes -> go-yaml's, which kubectl prints
GO_YAML_PROBLEMS = (
    (
        re.compile(r"mapping values are not allowed here"),
        "mapping values are not allowed in this context",
    ),
    (
        re.compile(r"found character .* that cannot start any token"),
        "found character that cannot start any token",
    ),
    (re.compile(r"expected <block end>, but found"), "did not find expected key"),
    (re.compile(r"expected ',' or '\}', but got"), "did not find expected ',' or '}'"),
    (re.compile(r"expected ',' or '\]', but got"), "did not find expected ',' or ']'"),
)


# The workloads `apply` expands into the pods their controllers would create (workloads.py).
WORKLOAD_KINDS = (
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "ReplicationController",
    "Job",
    "DaemonSet",
)


class ManifestError(ValueError):
    pass


@dataclass(frozen=True)
class Manifest:
    """One object and where it came from, for error messages."""

    obj: dict[str, Any]
    source: str  # the file name, or "-" for stdin
    where: str  # "document 2" or "document 0, items[3]"

    def error(self, detail: str) -> ManifestError:
        return ManifestError(f"{self.source}: {self.where}: {detail}")


def load_objects(path: str) -> list[dict[str, Any]]:
    """Every object in the file, `List` items flattened, in order."""
    return [m.obj for m in read_manifests(path)]


def read_all(paths: Sequence[str]) -> list[Manifest]:
    """Every object of every `-f`, in the order given (kubectl's repeated -f)."""
    return [m for path in paths for m in read_manifests(path)]


def read_manifests(path: str) -> list[Manifest]:
    """The objects of a file, of every manifest file in a directory (sorted, as kubectl
    reads them), or of stdin ("-")."""
    if path != STDIN and Path(path).is_dir():
        files = sorted(p for p in Path(path).iterdir() if p.suffix in MANIFEST_SUFFIXES)
        return [m for f in files for m in parse_manifests(_read(str(f)), str(f))]
    return parse_manifests(_read(path), path)


def _read(path: str) -> str:
    if path != STDIN and not Path(path).exists():
        raise ManifestError(f'the path "{path}" does not exist')
    try:
        return Path(path).read_text() if path != STDIN else sys.stdin.read()
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
        raise ManifestError(f"{path}: cannot read: {reason}") from None


def parse_manifests(text: str, source: str) -> list[Manifest]:
    docs = _documents(text, "STDIN" if source == STDIN else source)
    manifests: list[Manifest] = []
    for index, doc in enumerate(docs):
        if doc is None:
            continue
        where = f"document {index}"
        if not isinstance(doc, dict):
            raise ManifestError(f"{source}: {where}: must be an object")
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
            for i, item in enumerate(doc["items"]):
                if not isinstance(item, dict):
                    raise ManifestError(f"{source}: {where}, items[{i}]: must be an object")
                manifests.append(Manifest(item, source, f"{where}, items[{i}]"))
        else:
            manifests.append(Manifest(doc, source, where))
    return manifests


def _documents(text: str, source: str) -> list[Any]:
    if text.lstrip().startswith("{"):
        try:
            return [json.loads(text)]
        except json.JSONDecodeError as err:
            raise ManifestError(
                f"error parsing {source}: {err.msg} at line {err.lineno} column {err.colno}"
            ) from None
    import yaml  # only for files: the CLI starts faster without it

    try:
        return list(yaml.safe_load_all(text))
    except yaml.MarkedYAMLError as err:
        line = err.problem_mark.line + 1 if err.problem_mark is not None else 0
        raise ManifestError(
            f"error parsing {source}: error converting YAML to JSON: yaml: line {line}: "
            + go_yaml_problem(err.problem or str(err))
        ) from None
    except yaml.YAMLError as err:
        raise ManifestError(
            f"error parsing {source}: error converting YAML to JSON: {err}"
        ) from None


def go_yaml_problem(problem: str) -> str:
    for pattern, words in GO_YAML_PROBLEMS:
        if pattern.match(problem):
            return words
    return problem
