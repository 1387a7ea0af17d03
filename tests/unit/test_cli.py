"""`ksched conformance` and `ksched simulate`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from shared.tools.cli.main import main
from shared.tools.synthetic import make_node, make_pod


def write(path: Path, doc: object) -> str:
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_conformance_reports_per_plugin_and_fails_on_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = {
        "name": "fits",
        "pod": make_pod("p", cpu="1"),
        "nodes": [make_node("n1", cpu="2")],
        "expected": {"n1": {"code": "Success", "reasons": None}},
    }
    wrong = {
        **case,
        "name": "claims misfit",
        "expected": {"n1": {"code": "Unschedulable", "reasons": ["Insufficient cpu"]}},
    }
    doc = {"plugin": "NodeResourcesFit", "kind": "filter", "cases": [case, wrong]}
    (tmp_path / "filter").mkdir()
    (tmp_path / "filter" / "fit.json").write_text(json.dumps(doc))
    assert main(["conformance", str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "1 passed, 1 failed, 0 skipped"
    assert any(line.startswith("FAILED  filter/fit.json[1] claims misfit") for line in out)


def test_simulate_explains_per_node_and_plugin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tainted = make_node("tainted", cpu="8")
    tainted["spec"] = {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}
    cluster = {
        "kind": "List",
        "items": [
            make_node("big", cpu="8"),
            make_node("small", cpu="1"),
            tainted,
            make_node("other", cpu="8"),
        ],
    }
    args = [
        "simulate",
        "--cluster",
        write(tmp_path / "c.yaml", cluster),
        "--pod",
        write(tmp_path / "p.yaml", make_pod("p", cpu="2")),
        "-o",
        "json",
    ]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["chosen"] in ("big", "other")
    assert report["nodes"]["small"]["filter"]["NodeResourcesFit"].endswith("Insufficient cpu")
    assert "untolerated taint" in report["nodes"]["tainted"]["filter"]["TaintToleration"]
    big = report["nodes"]["big"]["score"]["TaintToleration"]
    assert big == {"raw": 0, "normalized": 100, "weight": 3, "weighted": 300}


def test_simulate_bad_manifest_names_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = make_pod("p")
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    args = [
        "simulate",
        "--cluster",
        write(tmp_path / "c.yaml", make_node("n")),
        "--pod",
        write(tmp_path / "p.yaml", bad),
    ]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "spec.containers[0].resources.requests.cpu" in err
