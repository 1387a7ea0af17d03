"""CPU seconds and peak RSS of the stack's processes, read from /proc (Linux)."""

from __future__ import annotations

import os
from dataclasses import dataclass

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Usage:
    cpu_seconds: float  # user + system since the process started
    peak_rss_bytes: int  # VmHWM: the resident set's high-water mark


def parse_stat_cpu(stat: str) -> float:
    """utime + stime in seconds from /proc/<pid>/stat (the command may hold spaces
    and parentheses, so fields are counted after the last ')')."""
    fields = stat[stat.rindex(")") + 2 :].split()
    # after ')': state is field 3 of stat(5), so utime (14) and stime (15) are 11, 12
    return (int(fields[11]) + int(fields[12])) / TICKS


def parse_status_hwm(status: str) -> int:
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            value, unit = line.split()[1:3]
            return int(value) * (1024 if unit == "kB" else 1)
    return 0


def usage(pid: int) -> Usage | None:
    """None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            cpu = parse_stat_cpu(f.read())
        with open(f"/proc/{pid}/status") as f:
            hwm = parse_status_hwm(f.read())
    except (OSError, ValueError, IndexError):
        return None
    return Usage(cpu, hwm)


def usages(pids: dict[str, list[int]]) -> dict[str, list[Usage]]:
    """Per role (worker, nats-server, ...), the usage of each live process."""
    out: dict[str, list[Usage]] = {}
    for role, role_pids in pids.items():
        out[role] = [u for u in map(usage, role_pids) if u is not None]
    return out


def cpu_delta(before: dict[str, list[Usage]], after: dict[str, list[Usage]]) -> dict[str, float]:
    """CPU seconds each role spent between two readings (all its processes)."""
    return {
        role: sum(u.cpu_seconds for u in after[role])
        - sum(u.cpu_seconds for u in before.get(role, []))
        for role in after
    }


def peak_rss(after: dict[str, list[Usage]]) -> dict[str, int]:
    """The largest high-water mark among each role's processes."""
    return {role: max((u.peak_rss_bytes for u in us), default=0) for role, us in after.items()}
