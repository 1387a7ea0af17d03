"""NATS and Redis connections that survive server restarts."""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
from typing import Any
from urllib.parse import ParseResult, urlparse

import nats
import redis.asyncio as aioredis
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.api import RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError
from redis.asyncio.connection import SSLConnection
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool, SentinelManagedConnection
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from shared.runtime.redisurl import SentinelURL, parse_sentinel_url
from shared.runtime.settings import Credentials
from shared.subjects import STREAMS, StreamSpec

log = logging.getLogger("ksched.connections")


def nats_auth(creds: Credentials | None) -> dict[str, Any]:
    """nats.connect's arguments for a user/password, a .creds file and TLS."""
    if creds is None:
        return {}
    auth: dict[str, Any] = {}
    if creds.nats_user:
        auth["user"] = creds.nats_user
        auth["password"] = creds.nats_password or ""
    if creds.nats_creds:
        auth["user_credentials"] = creds.nats_creds
    if creds.nats_tls_ca:
        auth["tls"] = ssl.create_default_context(cafile=creds.nats_tls_ca)
    return auth


def reached_first(urls: list[str], reached: ParseResult | None) -> list[str]:
    """`urls` with the server that another connection of this process reached put first
    (the others shuffled, as nats-py would): a server cut off from this host answers
    no connect, and trying it first costs the whole connect timeout."""
    if reached is None:
        return urls
    here = (reached.hostname, reached.port)
    first = [u for u in urls if (urlparse(u).hostname, urlparse(u).port) == here]
    rest = [u for u in urls if u not in first]
    random.shuffle(rest)
    return first + rest


# A server cut off from this host answers nothing and resets nothing: only unanswered
# pings tell, after about PING_INTERVAL x MAX_OUTSTANDING_PINGS (4-6 s; nats-py's 2 min x 2
# and our former 5 s x 3, 15-19 s, left a standby connected to it deaf that long).
PING_INTERVAL = 2
MAX_OUTSTANDING_PINGS = 2


async def connect_nats(
    urls: list[str], name: str, creds: Credentials | None = None, *, in_order: bool = False
) -> NATS:
    """Connect, retrying forever; once connected, nats-py reconnects forever. The
    servers are tried in a random order, or in the given one (`in_order`)."""

    async def on_error(err: Exception) -> None:
        log.warning("nats error: %s", err)

    async def on_disconnect() -> None:
        log.warning("nats disconnected; reconnecting")

    async def on_reconnect() -> None:
        log.info("nats reconnected")

    delay = 0.1
    while True:
        try:
            return await nats.connect(
                servers=urls,
                name=name,
                allow_reconnect=True,
                max_reconnect_attempts=-1,
                dont_randomize=in_order,
                reconnect_time_wait=0.5,
                connect_timeout=2,
                ping_interval=PING_INTERVAL,
                max_outstanding_pings=MAX_OUTSTANDING_PINGS,
                error_cb=on_error,
                disconnected_cb=on_disconnect,
                reconnected_cb=on_reconnect,
                **nats_auth(creds),
            )
        except Exception as err:  # no server yet: keep trying, as a pod would
            log.warning("nats connect to %s failed (%s); retrying", ",".join(urls), err)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)


def redis_auth(creds: Credentials | None) -> dict[str, Any]:
    """redis-py's arguments for an ACL user and a CA for rediss:// URLs."""
    auth: dict[str, Any] = {}
    if creds is not None:
        if creds.redis_username:
            auth["username"] = creds.redis_username
        if creds.redis_password:
            auth["password"] = creds.redis_password
        if creds.redis_tls_ca:
            auth["ssl_ca_certs"] = creds.redis_tls_ca
    return auth


# Every command retries through a short outage (a restart, a Sentinel failover: about
# 2.5 s of backoff, reconnecting each time), then fails to its caller, which retries
# longer. On a Sentinel primary a reconnect asks the sentinels for the primary again.
# A primary whose host is cut off answers nothing and resets nothing: the read timeout
# is what tells, and a command sent just before the cut waits it out (10 s before).
_COMMANDS: dict[str, Any] = {
    "decode_responses": False,
    "socket_connect_timeout": 2,
    "socket_timeout": 5,
    "health_check_interval": 5,
    "retry_on_error": [RedisConnectionError, RedisTimeoutError],
}
_SENTINEL_TIMEOUT = 2.0  # a sentinel answers at once or is skipped for the next one


def _sentinel_retry() -> Retry:
    """None: a sentinel that does not answer is skipped for the next. redis-py 8 gives
    every client ten retries by default, the sentinels' clients too: a sentinel on a
    cut-off host cost each look-up of the primary about 30 s, at every reconnect, and
    a service whose Redis connections had to move served nothing for as long
    (docs/reliability.md, "The third pass looked at again")."""
    return Retry(NoBackoff(), 0)


def _retry() -> Retry:
    return Retry(ExponentialBackoff(cap=1.0, base=0.05), 5)


def connect_redis(url: str, creds: Credentials | None = None) -> aioredis.Redis:
    """A pooled client of KSCHED_REDIS_URL (runtime/redisurl.py): one server, or the
    primary that Sentinel names, followed across failovers."""
    target = parse_sentinel_url(url)
    if target is None:
        return aioredis.from_url(url, retry=_retry(), **_COMMANDS, **redis_auth(creds))
    return _sentinel_primary(target, creds)


class SentinelRedis(aioredis.Redis):
    """The client of a Sentinel-watched primary. redis-py's SentinelManagedConnection
    asks the sentinels for the primary at every (re)connect and turns a READONLY reply
    (the primary it still talks to was demoted) into a ConnectionError, so the retry
    above reconnects to the new primary; Lua runs through Script objects, which load a
    script again on NOSCRIPT (a promoted replica has none cached). Closing the client
    also closes its sentinel connections, which redis-py leaves open."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        pool = self.connection_pool
        await super().aclose(close_connection_pool)
        if isinstance(pool, SentinelConnectionPool):
            await pool.sentinel_manager.aclose()


class PrimaryConnection(SentinelManagedConnection):
    """A connection to the primary that asks the Sentinels where it is at every connect.

    redis-py 8's commands reconnect a dropped connection through `connect_check_health`,
    which its SentinelManagedConnection does not override: the retry of a command that
    timed out on a silent primary (its host cut off) connected again to that same old
    address, five times over, and failed after 15-22 s although the Sentinels had named
    the new primary within 3 s. (`connect`, the other way in, asks them as well: the
    Sentinels are then asked twice, a local round trip.)"""

    async def connect_check_health(
        self, check_health: bool = True, retry_socket_connect: bool = True
    ) -> None:
        if not self.is_connected and self.connection_pool.is_master:
            self.host, self.port = await self.connection_pool.get_master_address()
        await super().connect_check_health(check_health, retry_socket_connect)


class PrimarySSLConnection(PrimaryConnection, SSLConnection):
    pass


def _sentinel_primary(target: SentinelURL, creds: Credentials | None) -> aioredis.Redis:
    auth = redis_auth(creds)
    tls: dict[str, Any] = {"ssl": True} if target.tls else {}
    if not target.tls:
        auth.pop("ssl_ca_certs", None)
    # the URL's user:password, as in a redis:// URL, over the environment's
    auth.update(
        {k: v for k, v in (("username", target.username), ("password", target.password)) if v}
    )
    sentinel_auth: dict[str, Any] = {}
    if creds is not None and creds.redis_sentinel_username:
        sentinel_auth["username"] = creds.redis_sentinel_username
    if creds is not None and creds.redis_sentinel_password:
        sentinel_auth["password"] = creds.redis_sentinel_password
    if target.tls and "ssl_ca_certs" in auth:
        sentinel_auth["ssl_ca_certs"] = auth["ssl_ca_certs"]
    sentinels = Sentinel(
        list(target.sentinels),
        sentinel_kwargs={
            "socket_connect_timeout": _SENTINEL_TIMEOUT,
            "socket_timeout": _SENTINEL_TIMEOUT,
            "retry": _sentinel_retry(),
            **tls,
            **sentinel_auth,
        },
    )
    client: aioredis.Redis = sentinels.master_for(
        target.master,
        redis_class=SentinelRedis,
        connection_class=PrimarySSLConnection if target.tls else PrimaryConnection,
        db=target.db,
        retry=_retry(),
        **_COMMANDS,
        **auth,
    )
    return client


def stream_config(spec: StreamSpec, replicas: int = 1) -> StreamConfig:
    """The spec as JetStream's config, kept in `replicas` copies. Durability is chosen
    per stream in docs/reliability.md: every stream is file-backed and written with the
    server's default persist mode (never "async", which acks before the write), and
    fsync is the servers' `sync_interval`, the one knob nats-server has for it."""
    return StreamConfig(
        name=spec.name,
        subjects=list(spec.subjects),
        description=spec.description or None,
        retention=RetentionPolicy(spec.retention),
        storage=StorageType.FILE,
        num_replicas=replicas,
        max_msgs_per_subject=spec.max_msgs_per_subject,
        max_age=spec.max_age_seconds or None,
        duplicate_window=spec.duplicate_window_seconds,
        allow_direct=True,
    )


async def ensure_streams(
    js: JetStreamContext, specs: tuple[StreamSpec, ...] = STREAMS, *, replicas: int | None = None
) -> None:
    """Create every stream ksched needs, or bring an existing one to the spec (idempotent).

    `replicas` is the services' KSCHED_STREAM_REPLICAS: an existing stream is scaled to
    it (JetStream moves a clustered stream between R1 and R3 online; its durable
    consumers follow). Without it (the CLI and tools), a new stream gets one replica and
    an existing one keeps its count: a user's command never scales the cluster's streams.
    """
    for spec in specs:
        try:
            info = await js.stream_info(spec.name)
        except NotFoundError:
            await js.add_stream(stream_config(spec, replicas or 1))
            continue
        config = stream_config(spec, replicas or info.config.num_replicas or 1)
        if _differs(info.config, config):  # publishers may read a stream, not update it
            await js.update_stream(config)


# The StreamConfig fields ksched sets; the server fills in the others.
_SPEC_FIELDS = (
    "subjects",
    "description",
    "retention",
    "storage",
    "num_replicas",
    "max_msgs_per_subject",
    "max_age",
    "duplicate_window",
    "allow_direct",
)


def _differs(current: StreamConfig, wanted: StreamConfig) -> bool:
    def norm(value: object) -> object:
        return value or None  # the server says 0 / [] / "" where we said None

    return any(norm(getattr(current, f)) != norm(getattr(wanted, f)) for f in _SPEC_FIELDS)
