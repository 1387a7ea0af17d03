"""Deployment settings from the environment (DESIGN.md, Running a service)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, Field, field_validator, model_validator

from shared.runtime.lease import LeaseConfig, identity, seconds
from shared.runtime.natsurl import server_list
from shared.runtime.progress import DEFAULT_STALL_SECONDS, HEARTBEAT_SECONDS
from shared.sharding import PARTITIONS, QUEUE, WATCHER, QueueShard, WatcherShard

MIN_STALL_SECONDS = 1.0
# JetStream keeps at most this many copies of a stream (nats-server's StreamMaxReplicas).
MAX_STREAM_REPLICAS = 5

# Default HTTP port per service; KSCHED_HTTP_PORT overrides, 0 picks a free one.
DEFAULT_HTTP_PORTS: dict[str, int] = {
    "watcher": 10251,
    "queue": 10252,
    "cache": 10253,
    "worker": 10254,
    "binder": 10255,
}


class Credentials(BaseModel):
    """Who a service is to NATS and Redis; never baked into the image (docs/security.md).

    The URLs may carry user:password too; these override nothing in a URL that has them.
    """

    nats_user: str | None = None
    nats_password: str | None = Field(default=None, repr=False)
    nats_creds: str | None = None  # a NATS .creds file (decentralized JWT auth)
    nats_tls_ca: str | None = None  # CA bundle for tls:// servers
    redis_username: str | None = None
    redis_password: str | None = Field(default=None, repr=False)
    redis_tls_ca: str | None = None  # CA bundle for rediss:// servers
    # the sentinels' own user, when they require one (redis+sentinel:// URLs)
    redis_sentinel_username: str | None = None
    redis_sentinel_password: str | None = Field(default=None, repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Credentials:
        return cls(
            nats_user=env.get("KSCHED_NATS_USER") or None,
            nats_password=secret(env, "KSCHED_NATS_PASSWORD"),
            nats_creds=env.get("KSCHED_NATS_CREDS") or None,
            nats_tls_ca=env.get("KSCHED_NATS_TLS_CA") or None,
            redis_username=env.get("KSCHED_REDIS_USERNAME") or None,
            redis_password=secret(env, "KSCHED_REDIS_PASSWORD"),
            redis_tls_ca=env.get("KSCHED_REDIS_TLS_CA") or None,
            redis_sentinel_username=env.get("KSCHED_REDIS_SENTINEL_USERNAME") or None,
            redis_sentinel_password=secret(env, "KSCHED_REDIS_SENTINEL_PASSWORD"),
        )


def secret(env: Mapping[str, str], name: str) -> str | None:
    """NAME's value, or the content of the file NAME_FILE names (a docker secret)."""
    if env.get(name):
        return env[name]
    path = env.get(f"{name}_FILE")
    if not path:
        return None
    try:
        with open(path) as f:
            return f.read().strip() or None
    except OSError as err:
        raise ValueError(f"{name}_FILE: cannot read {path}: {err.strerror}") from None


def count(env: Mapping[str, str], var: str, *, default: int) -> int:
    raw = env.get(var, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{var} must be a whole number, got {raw!r}") from None


class Settings(BaseModel):
    service: str
    nats_urls: list[str] = Field(default_factory=lambda: ["nats://127.0.0.1:4222"])
    # replicas of ksched's streams (their durable consumers follow): 3 on a 3-server cluster
    stream_replicas: int = 1
    redis_url: str = "redis://127.0.0.1:6379/0"
    config_path: str | None = None
    http_host: str = "0.0.0.0"
    http_port: int = Field(default=0, ge=0, le=65535)
    log_level: str = "info"
    # leader election of watcher, queue and cache (runtime/lease.py)
    leader_election: LeaseConfig = Field(default_factory=LeaseConfig)
    identity: str = ""
    # how long without progress makes a service unhealthy and a leader step down
    # (runtime/progress.py); 0 turns the check off
    stall_seconds: float = DEFAULT_STALL_SECONDS
    credentials: Credentials = Field(default_factory=Credentials)
    # issue 21's shards (docs/scale.md §4): watcher and queue instances are shard `shard`
    # of `shards`; workers and binders send to every queue shard
    shards: int = 1
    shard: int = 0

    @model_validator(mode="after")
    def _shard_in_range(self) -> Settings:
        if not 1 <= self.shards <= PARTITIONS:
            raise ValueError(f"KSCHED_SHARDS must be from 1 to {PARTITIONS}, got {self.shards}")
        if not 0 <= self.shard < self.shards:
            raise ValueError(
                f"KSCHED_SHARD must be from 0 to {self.shards - 1} "
                f"(KSCHED_SHARDS={self.shards}), got {self.shard}"
            )
        return self

    @property
    def watcher_shard(self) -> WatcherShard:
        return WatcherShard(self.shards, self.shard)

    @property
    def queue_shard(self) -> QueueShard:
        return QueueShard(self.shards, self.shard)

    @property
    def lease_name(self) -> str:
        """The key of this service's lease (and of its Redis epoch): a watcher or queue
        shard's own, `watcher.<s>` or `queue.<s>`, when sharded."""
        if self.service == WATCHER:
            return self.watcher_shard.lane
        if self.service == QUEUE:
            return self.queue_shard.lane
        return self.service

    @field_validator("nats_urls")
    @classmethod
    def _non_empty(cls, urls: list[str]) -> list[str]:
        if not urls:
            raise ValueError("KSCHED_NATS_URL names no server")
        return urls

    @field_validator("stream_replicas")
    @classmethod
    def _replica_count(cls, replicas: int) -> int:
        if not 1 <= replicas <= MAX_STREAM_REPLICAS:
            raise ValueError(
                f"KSCHED_STREAM_REPLICAS must be from 1 to {MAX_STREAM_REPLICAS} "
                f"(JetStream's maximum), got {replicas}"
            )
        return replicas

    @field_validator("stall_seconds")
    @classmethod
    def _stall_limit(cls, limit: float) -> float:
        if limit < 0 or 0 < limit < MIN_STALL_SECONDS:
            raise ValueError(
                f"KSCHED_STALL_SECONDS must be 0 (off) or at least {MIN_STALL_SECONDS:g} s "
                f"(the event loop's heartbeat ticks every {HEARTBEAT_SECONDS:g} s), got {limit:g}"
            )
        return limit

    @classmethod
    def from_env(cls, service: str, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        urls = env.get("KSCHED_NATS_URL", "nats://127.0.0.1:4222")
        port = env.get("KSCHED_HTTP_PORT", str(DEFAULT_HTTP_PORTS.get(service, 0)))
        try:
            http_port = int(port)
        except ValueError:
            raise ValueError(f"KSCHED_HTTP_PORT must be a port number, got {port!r}") from None
        stall = seconds(env, "KSCHED_STALL_SECONDS")
        return cls(
            service=service,
            nats_urls=server_list(urls),
            stream_replicas=count(env, "KSCHED_STREAM_REPLICAS", default=1),
            redis_url=env.get("KSCHED_REDIS_URL", "redis://127.0.0.1:6379/0"),
            config_path=config_path(env),
            http_host=env.get("KSCHED_HTTP_HOST", "0.0.0.0"),
            http_port=http_port,
            log_level=env.get("KSCHED_LOG_LEVEL", "info"),
            leader_election=LeaseConfig.from_env(env),
            identity=identity(env),
            stall_seconds=DEFAULT_STALL_SECONDS if stall is None else stall,
            credentials=Credentials.from_env(env),
            shards=count(env, "KSCHED_SHARDS", default=1),
            shard=count(env, "KSCHED_SHARD", default=0),
        )


def config_path(env: Mapping[str, str]) -> str | None:
    """The KubeSchedulerConfiguration file KSCHED_CONFIG names (None: the defaults)."""
    return env.get("KSCHED_CONFIG") or None


def loaded_configuration(env: Mapping[str, str]) -> dict[str, str]:
    """Which configuration a service runs with, as its start log and its nats.micro
    metadata (`ksched status`) say: the file or "defaults", and the profiles'
    schedulerNames. The service has loaded it already (it refuses to start without)."""
    from shared.config import ConfigError, load_config

    path = config_path(env)
    try:
        profiles = ",".join(p.scheduler_name for p in load_config(path).profiles)
    except ConfigError as err:  # changed on disk since the service loaded it
        profiles = f"<unreadable now: {err}>"
    return {"config": path or "defaults", "profiles": profiles}
