"""KSCHED_REDIS_URL (DESIGN.md, Beyond one machine): one Redis server as redis-py reads
it (`redis://host:port/db`, `rediss://…`, `unix://…`), or a primary that Sentinel
watches, `redis+sentinel://host:port[,host:port…]/<master-name>/<db>` (`rediss+sentinel`
for TLS to the primary and the sentinels). Parsed here alone, without pydantic, so that
the CLI and the tools read it as the services do (runtime/connections.py connects)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
SENTINEL_PORT = 26379  # redis-sentinel's default port


@dataclass(frozen=True)
class SentinelURL:
    """Where to ask for the primary (`sentinels`), its name there, and the database.
    A user:password in the URL is the primary's (as in redis://); the sentinels' own
    come from KSCHED_REDIS_SENTINEL_USERNAME / _PASSWORD (runtime/settings.py)."""

    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    tls: bool = False
    username: str | None = None
    password: str | None = None


def parse_sentinel_url(url: str) -> SentinelURL | None:
    """The Sentinel target `url` names; None for a plain redis-py URL. A malformed
    redis+sentinel URL is a ValueError that says what is wrong."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in SENTINEL_SCHEMES:
        return None
    userinfo, at, location = rest.rpartition("@")
    if not at:
        userinfo, location = "", rest
    hosts, _, path = location.partition("/")
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if not parts or len(parts) > 2:
        raise ValueError(f"{_redacted(url)}: expected /<master-name>[/<db>] after the sentinels")
    sentinels = tuple(_host_port(h, url) for h in hosts.split(",") if h.strip())
    if not sentinels:
        raise ValueError(f"{_redacted(url)}: names no sentinel")
    username, password = _userinfo(userinfo)
    return SentinelURL(
        sentinels=sentinels,
        master=unquote(parts[0]),
        db=_db(parts[1] if len(parts) == 2 else "0", url),
        tls=scheme.lower() == "rediss+sentinel",
        username=username,
        password=password,
    )


def _userinfo(userinfo: str) -> tuple[str | None, str | None]:
    if not userinfo:
        return None, None
    user, colon, password = userinfo.partition(":")
    return (unquote(user) or None), (unquote(password) if colon else None)


def _host_port(hostport: str, url: str) -> tuple[str, int]:
    hostport = hostport.strip()
    if hostport.startswith("["):  # [v6 address]:port
        host, _, tail = hostport[1:].partition("]")
        port = tail.removeprefix(":")
    else:
        host, _, port = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
    if not host:
        raise ValueError(f"{_redacted(url)}: a sentinel without a host in {hostport!r}")
    if not port:
        return host, SENTINEL_PORT
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{_redacted(url)}: bad sentinel port in {hostport!r}")
    return host, int(port)


def _db(raw: str, url: str) -> int:
    if not raw.isdigit():
        raise ValueError(f"{_redacted(url)}: the database must be a number, got {raw!r}")
    return int(raw)


def _redacted(url: str) -> str:
    """The URL without its password, for error messages and logs."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, location = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    return f"{scheme}{sep}{userinfo.partition(':')[0]}:***@{location}"
