"""`ksched conformance DIR`: replay plugin test vectors, per plugin passed/failed/skipped."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from shared.tools.cli.output import warn
from shared.tools.conformance import run_dir


def run_conformance(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    if not root.is_dir():
        warn(f"error: {root} is not a directory")
        return 1
    results = run_dir(root)
    per_plugin: dict[str, Counter[str]] = {}
    for r in results:
        per_plugin.setdefault(r.plugin, Counter())[r.outcome] += 1
        if r.outcome != "passed" and (args.verbose or r.outcome == "failed"):
            print(f"{r.outcome.upper():7} {r.id}: {r.detail}")
    for plugin in sorted(per_plugin):
        c = per_plugin[plugin]
        print(
            f"{plugin:34} {c['passed']:4d} passed {c['failed']:4d} failed {c['skipped']:4d} skipped"
        )
    totals = Counter(r.outcome for r in results)
    print(f"{totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped")
    return 1 if totals["failed"] else 0
