"""Hosts on one machine: Linux network namespaces on a bridge (needs root and `ip netns`).

Each host is a network namespace with its own loopback and one veth whose other end
sits on a bridge in the root namespace; the bridge has an address too, so that tools in
the root namespace (load, probes) reach every host. Nothing leaves the machine: the
subnet is a private one (10.77.<n>.0/24, a free <n> per run) and nothing routes it.

    net = HostNet.create(3)      # hosts h1..h3 at 10.77.n.11..13
    proc = net.spawn(1, ["nats-server", ...], log_path)
    net.cut(2); net.heal(2)      # drop every packet on h2's link, then let them through
    net.kill(3)                  # kill -9 every process of h3
    net.destroy()

Names carry the owner's pid (`ksched-<pid>-h1`, bridge `ksbr<pid>`), so a run that
crashed is recognised and cleared by the next (`clear_leftovers`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "ksched"
BRIDGE_PREFIX = "ksbr"
VETH_PREFIX = "ksv"
SUBNET_BASE = "10.77"
FIRST_HOST = 11  # h1 is 10.77.n.11; the bridge (root namespace) is .1
COMMENT = "ksched-hosts"  # marks the root namespace's iptables rules of a run
_OWNED = re.compile(rf"^{PREFIX}-(\d+)-h\d+$")


class NetnsUnavailable(RuntimeError):
    """Not root, or no `ip netns` / iptables here."""


def sh(*args: str, check: bool = True) -> str:
    out = subprocess.run(args, capture_output=True, text=True, check=False)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def unavailable_reason() -> str:
    """Why hosts cannot be made here ("" when they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    probe = f"{PREFIX}-{os.getpid()}-probe"
    try:
        sh("ip", "netns", "add", probe)
        sh("ip", "netns", "del", probe)
    except RuntimeError as err:
        return f"ip netns does not work here: {err}"
    return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def netns_pids(ns: str) -> list[int]:
    return [int(p) for p in sh("ip", "netns", "pids", ns, check=False).split()]


def kill_all(ns: str) -> list[int]:
    """kill -9 every process in the namespace, whoever started it; returns their pids."""
    pids = netns_pids(ns)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return pids


def _drop_root_rules(owner: int) -> None:
    for rule in sh("iptables", "-S", "FORWARD", check=False).splitlines():
        if f"{COMMENT}-{owner}" in rule and rule.startswith("-A "):
            sh("iptables", "-D", *_split_rule(rule[3:]), check=False)


def _split_rule(rule: str) -> list[str]:
    """iptables -S output back into arguments (its comments are quoted)."""
    import shlex

    return shlex.split(rule)


def clear_run(owner: int) -> None:
    """Remove every namespace, link and rule of the run of process `owner`."""
    for ns in sh("ip", "netns", "list", check=False).split():
        match = _OWNED.match(ns)
        if match and int(match.group(1)) == owner:
            kill_all(ns)
            sh("ip", "netns", "del", ns, check=False)
    sh("ip", "link", "del", f"{BRIDGE_PREFIX}{owner}", check=False)
    _drop_root_rules(owner)


def clear_leftovers() -> list[int]:
    """Clear the runs whose owner process is gone (a crash, a kill -9); returns them."""
    owners = {
        int(m.group(1))
        for ns in sh("ip", "netns", "list", check=False).split()
        if (m := _OWNED.match(ns))
    }
    for link in re.findall(rf"\d+: {BRIDGE_PREFIX}(\d+)[:@]", sh("ip", "-o", "link", check=False)):
        owners.add(int(link))
    dead = sorted(o for o in owners if not _alive(o))
    for owner in dead:
        clear_run(owner)
    return dead


def free_subnet() -> str:
    """10.77.<n> with no address of this machine in it."""
    used = sh("ip", "-o", "-4", "addr", check=False)
    for n in range(256):
        if f" {SUBNET_BASE}.{n}." not in used:
            return f"{SUBNET_BASE}.{n}"
    raise RuntimeError(f"no free {SUBNET_BASE}.n.0/24 subnet")


@dataclass
class HostNet:
    """Hosts h1..hN as network namespaces on one bridge."""

    owner: int
    subnet: str  # "10.77.n"
    size: int
    procs: dict[int, list[subprocess.Popen[bytes]]] = field(default_factory=dict)

    @property
    def bridge(self) -> str:
        return f"{BRIDGE_PREFIX}{self.owner}"

    @property
    def gateway(self) -> str:
        """The bridge's address: the root namespace as the hosts see it."""
        return f"{self.subnet}.1"

    def ns(self, host: int) -> str:
        return f"{PREFIX}-{self.owner}-h{host}"

    def address(self, host: int) -> str:
        return f"{self.subnet}.{FIRST_HOST + host - 1}"

    @property
    def hosts(self) -> list[int]:
        return list(range(1, self.size + 1))

    @classmethod
    def create(cls, size: int = 3) -> HostNet:
        reason = unavailable_reason()
        if reason:
            raise NetnsUnavailable(reason)
        clear_leftovers()
        net = cls(os.getpid(), free_subnet(), size)
        try:
            net._build()
        except Exception:
            net.destroy()
            raise
        return net

    def _build(self) -> None:
        ipaddress.ip_network(f"{self.subnet}.0/24")  # a well-formed private subnet
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        # With br_netfilter, frames between two ports of a bridge pass the FORWARD chain,
        # whose policy may be DROP (Docker sets it): let this bridge's own traffic through.
        comment = f"{COMMENT}-{self.owner}"
        sh("iptables", "-I", "FORWARD", "-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT",
           "-m", "comment", "--comment", comment)  # fmt: skip
        for host in self.hosts:
            self._add_host(host)

    def _add_host(self, host: int) -> None:
        ns, outer, inner = self.ns(host), f"{VETH_PREFIX}{self.owner}h{host}", f"ksp{host}"
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", outer, "type", "veth", "peer", "name", inner, "netns", ns)
        sh("ip", "link", "set", outer, "master", self.bridge, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "link", "set", inner, "name", "eth0")
        sh("ip", "-n", ns, "addr", "add", f"{self.address(host)}/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")

    def spawn(
        self,
        host: int,
        args: list[str],
        log_path: Path,
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start a process inside the host (`ip netns exec` execs it: the pid is its own)."""
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                ["ip", "netns", "exec", self.ns(host), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        self.procs.setdefault(host, []).append(proc)
        return proc

    def run(self, host: int, *args: str) -> str:
        """A short command inside the host; its output."""
        return sh("ip", "netns", "exec", self.ns(host), *args)

    def cut(self, host: int) -> None:
        """Drop every packet on the host's link, both ways (loopback keeps working)."""
        for chain, way in (("INPUT", "-i"), ("OUTPUT", "-o")):
            self.run(host, "iptables", "-A", chain, way, "eth0", "-j", "DROP")

    def heal(self, host: int) -> None:
        for chain in ("INPUT", "OUTPUT"):
            self.run(host, "iptables", "-F", chain)

    def kill(self, host: int) -> list[int]:
        """kill -9 every process of the host; returns their pids."""
        pids = kill_all(self.ns(host))
        for proc in self.procs.pop(host, []):
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        return pids

    def destroy(self) -> None:
        for host in self.hosts:
            self.kill(host)
        clear_run(self.owner)
