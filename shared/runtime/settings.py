"""Deployment settings from the environment (DESIGN.md, Running a service)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, Field, field_validator

# Default HTTP port per service; KSCHED_HTTP_PORT overrides, 0 picks a free one.
DEFAULT_HTTP_PORTS: dict[str, int] = {
    "watcher": 10251,
    "queue": 10252,
    "cache": 10253,
    "worker": 10254,
    "binder": 10255,
}


class Settings(BaseModel):
    service: str
    nats_urls: list[str] = Field(default_factory=lambda: ["nats://127.0.0.1:4222"])
    redis_url: str = "redis://127.0.0.1:6379/0"
    config_path: str | None = None
    http_host: str = "0.0.0.0"
    http_port: int = Field(default=0, ge=0, le=65535)
    log_level: str = "info"

    @field_validator("nats_urls")
    @classmethod
    def _non_empty(cls, urls: list[str]) -> list[str]:
        if not urls:
            raise ValueError("KSCHED_NATS_URL names no server")
        return urls

    @classmethod
    def from_env(cls, service: str, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        urls = env.get("KSCHED_NATS_URL", "nats://127.0.0.1:4222")
        port = env.get("KSCHED_HTTP_PORT", str(DEFAULT_HTTP_PORTS.get(service, 0)))
        try:
            http_port = int(port)
        except ValueError:
            raise ValueError(f"KSCHED_HTTP_PORT must be a port number, got {port!r}") from None
        return cls(
            service=service,
            nats_urls=[u.strip() for u in urls.split(",") if u.strip()],
            redis_url=env.get("KSCHED_REDIS_URL", "redis://127.0.0.1:6379/0"),
            config_path=env.get("KSCHED_CONFIG") or None,
            http_host=env.get("KSCHED_HTTP_HOST", "0.0.0.0"),
            http_port=http_port,
            log_level=env.get("KSCHED_LOG_LEVEL", "info"),
        )
