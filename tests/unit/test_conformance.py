"""Every vector in ../shared/conformance (kube-scheduler's plugin tests) must pass, and
those this repository ports itself (tests/unit/data/conformance, the same layout)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shared.plugins import REGISTRY
from shared.tools.conformance import load_dir, run_case

ROOT = Path(
    os.environ.get(
        "KSCHED_CONFORMANCE_DIR",
        Path(__file__).resolve().parents[2] / ".." / "shared" / "conformance",
    )
).resolve()
OWN = Path(__file__).resolve().parent / "data" / "conformance"


def _cases() -> list:  # type: ignore[type-arg]
    if not ROOT.is_dir():
        raise RuntimeError(f"conformance vectors not found at {ROOT} (set KSCHED_CONFORMANCE_DIR)")
    return [
        pytest.param(doc, i, file, id=f"{file}[{i}] {doc['cases'][i].get('name', '')}")
        for root in (ROOT, OWN)
        for file, doc in load_dir(root)
        for i in range(len(doc["cases"]))
    ]


@pytest.mark.parametrize(("doc", "index", "file"), _cases())
def test_vector(doc: dict, index: int, file: str) -> None:
    result = run_case(doc, index, REGISTRY, file)
    if result.outcome == "skipped":
        pytest.skip(result.detail)
    assert result.outcome == "passed", result.detail
