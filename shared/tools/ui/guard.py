"""Who may ask the page's server: a browser's request is refused when its Host header
names a host the server was not told about, or its Origin is another site.

The server has no login of its own and binds to 127.0.0.1 by default. That is not
enough against a web page in the user's own browser: with DNS rebinding, a site the
user visits makes its own name resolve to 127.0.0.1 and then reads the cluster's pods
through this server (its requests carry the site's name in Host); and any site can
send a cross-site POST (a what-if or a shadow replay: CPU spent on a worker). So, as
Jupyter's and Vite's development servers do:

- Host must be an IP address (typing an address is not rebinding), `localhost`, or a
  name given with `--allow-host` (how a user reaches a shared page by name);
- a request that carries an Origin (browsers send it on cross-origin reads and on
  every POST) must come from the page itself: Origin's host and port equal Host's.

Clients that are not browsers (curl, tests) send no Origin and an address in Host."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

LOCAL_NAMES = frozenset({"localhost"})


def host_name(authority: str) -> str:
    """`host[:port]` or `[v6]:port` → the host, lower-cased, without brackets."""
    authority = authority.strip().lower()
    if authority.startswith("["):
        return authority[1:].partition("]")[0]
    return authority.rpartition(":")[0] if authority.count(":") == 1 else authority


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class RequestGuard:
    def __init__(self, allowed_hosts: Iterable[str] = ()) -> None:
        self.allowed = LOCAL_NAMES | {h.strip().lower().rstrip(".") for h in allowed_hosts}

    def refusal(self, headers: Mapping[str, str]) -> str | None:
        """Why this request is refused (None: it is not). `headers` lower-cased."""
        host_header = headers.get("host", "")
        host = host_name(host_header).rstrip(".")
        if host and not is_address(host) and host not in self.allowed:
            return (
                f'host "{host}" is not allowed: reach the page by address or localhost, '
                f"or start it with --allow-host {host}"
            )
        origin = headers.get("origin")
        if origin is not None and urlsplit(origin).netloc.lower() != host_header.strip().lower():
            return f'origin "{origin}" is not this page ({host_header or "no Host"})'
        return None
