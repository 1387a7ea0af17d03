"""`ksched bench-latency` end to end on a tiny cluster: the burst, the paced pods, and
each paced pod's stages read off the stamps ksched's services put on its binding."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from shared import stages
from shared.tools.bench.latency import TOTAL
from shared.tools.cli.main import main

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(300)
def test_bench_latency_reports_every_stage_of_every_paced_pod(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = f"--nodes 8 --init-pods 4 --burst-pods 40 --pods 20 --timeout 60 --out {tmp_path}"
    code = main(["bench-latency", *args.split()])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    report = json.loads((tmp_path / "latency.json").read_text())
    assert report["paced"]["pods"] == 20 and report["paced"]["rate"] > 0
    assert report["calibration"]["before"] > 0 and report["calibration"]["after"] > 0
    assert report["double_bindings"] == report["overcommitted_nodes"] == 0
    table = report["stages"]
    # every hop was stamped on every paced pod's binding: no stage merged, none missing
    moments = ["published", *stages.HOPS, "bound"]
    expected = [f"{a}->{b}" for a, b in itertools.pairwise(moments)]
    assert list(table) == [*expected, TOTAL]
    assert all(row["pods"] == 20 for row in table.values())
    assert table[TOTAL]["p99"] >= table[TOTAL]["p50"] > 0
    assert "published->bound" in captured.out and "calibration" in captured.out
