"""Reading Kubernetes manifests the way kubectl does: YAML or JSON, multi-document,
`kind: List`; errors name the file, the document and the field."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml


class ManifestError(ValueError):
    pass


def load_objects(path: str) -> list[dict[str, Any]]:
    """Every object in the file, `List` items flattened, in order."""
    try:
        text = Path(path).read_text() if path != "-" else sys.stdin.read()
    except OSError as err:
        raise ManifestError(f"{path}: cannot read: {err.strerror}") from None
    try:
        docs = (
            [json.loads(text)] if text.lstrip().startswith("{") else list(yaml.safe_load_all(text))
        )
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        raise ManifestError(f"{path}: not valid YAML or JSON: {err}") from None
    objects: list[dict[str, Any]] = []
    for index, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise ManifestError(f"{path}: document {index}: must be an object")
        if doc.get("kind", "").endswith("List") and isinstance(doc.get("items"), list):
            objects.extend(doc["items"])
        else:
            objects.append(doc)
    return objects
