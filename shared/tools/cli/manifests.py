"""Reading Kubernetes manifests the way kubectl does: YAML or JSON, multi-document,
`kind: List`, a file, a directory or stdin; errors name the file, the document and
the field."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


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


def read_manifests(path: str) -> list[Manifest]:
    """The objects of a file, of every manifest file in a directory (sorted, as kubectl
    reads them), or of stdin ("-")."""
    if path != "-" and Path(path).is_dir():
        files = sorted(p for p in Path(path).iterdir() if p.suffix in MANIFEST_SUFFIXES)
        return [m for f in files for m in parse_manifests(_read(str(f)), str(f))]
    return parse_manifests(_read(path), path)


def _read(path: str) -> str:
    try:
        return Path(path).read_text() if path != "-" else sys.stdin.read()
    except OSError as err:
        raise ManifestError(f"{path}: cannot read: {err.strerror}") from None


def parse_manifests(text: str, source: str) -> list[Manifest]:
    try:
        docs = (
            [json.loads(text)] if text.lstrip().startswith("{") else list(yaml.safe_load_all(text))
        )
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        raise ManifestError(f"{source}: not valid YAML or JSON: {err}") from None
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
