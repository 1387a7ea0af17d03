"""Sampling profiles of the singleton services during a bench's measured phase.

`ksched bench --profile DIR` runs py-spy (`--nonblocking`, so the service is never
paused; idle samples off, so samples follow CPU time) on the watcher, queue and
cache while the measured pods go through, writes each one's collapsed stacks to
DIR/<role>.txt and prints the frames with the most self time. The raw files stay
out of git; docs/scale.md quotes the top frames.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

PROFILED_ROLES = ("watcher", "queue", "cache")
IDLE_LEAF = "EpollSelector.select ("
# frames that only carry another library's work (its socket writes, its callbacks)
TRANSPARENT = ("(asyncio/", "(selectors.py", "(<frozen")
# checked in order on each frame from the leaf up: the first that matches names it
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("json decode/encode", ("(json/",)),
    ("pydantic and API checks (shared/api)", ("(pydantic", "(shared/api/")),
    ("msgpack", ("(msgpack/", "(shared/wire.py)")),
    ("redis-py (incl. its socket writes)", ("(redis/",)),
    ("nats-py (incl. its socket writes)", ("(nats/",)),
    ("prometheus metrics", ("(prometheus_client/", "(shared/runtime/metrics")),
    ("ksched code", ("(services/", "(shared/")),
)
SAMPLE_RATE = 200  # samples/s: enough frames in a 10-s phase, a few % of one core


@dataclass(frozen=True)
class FrameShare:
    frame: str  # "function (file)": py-spy's frame without its line number
    samples: int
    share: float  # of all the profile's samples


def _function(frame: str) -> str:
    """`f (path:12)` -> `f (path)`: a function's self time is spread over its lines."""
    return re.sub(r":\d+\)$", ")", frame)


def stacks(text: str) -> list[tuple[list[str], int]]:
    """py-spy's raw (collapsed) output: one `root;...;leaf count` line per distinct stack.

    A frame may contain spaces; ';' never appears inside one.
    """
    out: list[tuple[list[str], int]] = []
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            out.append(([_function(f) for f in stack.split(";")], int(count)))
    return out


def parse_collapsed(text: str) -> Counter[str]:
    """Self samples per function: the leaf is where a sample was taken."""
    self_samples: Counter[str] = Counter()
    for frames, count in stacks(text):
        self_samples[frames[-1]] += count
    return self_samples


def category(frames: list[str]) -> str:
    """Where a busy sample's time goes: the first frame from the leaf up that belongs to
    a known library or to ksched, skipping asyncio's plumbing, so that a socket write
    counts for the client (redis-py, nats-py) that asked for it."""
    for frame in reversed(frames):
        if any(p in frame for p in TRANSPARENT):
            continue
        for label, needles in CATEGORIES:
            if any(n in frame for n in needles):
                return label
    return "event loop"


def categories(text: str) -> dict[str, float]:
    """Share of the busy samples per category, largest first."""
    shares: Counter[str] = Counter()
    for frames, count in busy(text):
        shares[category(frames)] += count
    total = sum(shares.values()) or 1
    return {label: c / total for label, c in shares.most_common()}


def busy(text: str) -> list[tuple[list[str], int]]:
    """The stacks without the idle ones: a sample whose leaf is the event loop's
    selector is a wait (py-spy's own idle test misses waits on a loaded machine)."""
    return [(f, c) for f, c in stacks(text) if not f[-1].startswith(IDLE_LEAF)]


def top_self_frames(text: str, n: int = 10) -> list[FrameShare]:
    """The functions with the most self time among the busy samples."""
    samples: Counter[str] = Counter()
    for frames, count in busy(text):
        samples[frames[-1]] += count
    total = sum(samples.values())
    return [FrameShare(f, c, c / total) for f, c in samples.most_common(n)] if total else []


def format_top(role: str, text: str) -> list[str]:
    lines = [f"{role}: top self-time frames (share of busy samples)"]
    lines += [f"  {f.share * 100:5.1f} %  {f.samples:6d}  {f.frame}" for f in top_self_frames(text)]
    lines.append(f"{role}: by category")
    lines += [f"  {share * 100:5.1f} %  {label}" for label, share in categories(text).items()]
    return lines


def py_spy() -> str:
    """py-spy beside this interpreter (the venv's), else on the PATH."""
    here = Path(sys.executable).with_name("py-spy")
    found = str(here) if here.exists() else shutil.which("py-spy")
    if found is None:
        raise RuntimeError("--profile needs py-spy (pip install py-spy)")
    return found


class Profiler:
    """py-spy on each profiled role's processes from start() to stop()."""

    def __init__(self, out: Path, pids: dict[str, list[int]]) -> None:
        self.out = out
        self.targets = [
            (role if len(pids[role]) == 1 else f"{role}-{i}", pid)
            for role in PROFILED_ROLES
            for i, pid in enumerate(pids.get(role, []))
        ]
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        exe = py_spy()
        for name, pid in self.targets:
            cmd = [exe, "record", "--pid", str(pid), "--nonblocking", "--format", "raw"]
            cmd += ["--rate", str(SAMPLE_RATE), "-o", str(self.out / f"{name}.txt")]
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.procs.append((name, proc))

    def stop(self) -> list[str]:
        """Stops every recorder (py-spy writes its file on SIGINT); the top frames each."""
        for _, proc in self.procs:
            proc.send_signal(signal.SIGINT)
        lines: list[str] = []
        for name, proc in self.procs:
            proc.wait(timeout=60)
            path = self.out / f"{name}.txt"
            if path.exists():
                lines += format_top(name, path.read_text())
        return lines
