"""What every ksched service shares: connections, streams, health, metrics, SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from typing import Protocol

import redis.asyncio as aioredis
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from prometheus_client import CollectorRegistry

from shared.config import ConfigError, SchedulerConfiguration, load_config
from shared.runtime.connections import connect_nats, connect_redis, ensure_streams
from shared.runtime.http import HealthServer
from shared.runtime.logs import setup_logging
from shared.runtime.retry import retry_forever
from shared.runtime.settings import Settings

log = logging.getLogger("ksched.service")

SHUTDOWN_GRACE_SECONDS = 10.0
DRAIN_SECONDS = 2.0


class Runtime:
    """Connections and shared plumbing, handed to a service's logic."""

    def __init__(self, settings: Settings, config: SchedulerConfiguration) -> None:
        self.settings = settings
        self.config = config
        self.registry = CollectorRegistry()
        self.nc: NATS = NATS()
        self.js: JetStreamContext
        self.redis: aioredis.Redis = connect_redis(settings.redis_url)
        # Set by the service's logic once it listens (subscriptions, consumers): before
        # that, a request to it would find no responder, so /readyz says not ready.
        self.serving = asyncio.Event()
        self.http = HealthServer(
            host=settings.http_host,
            port=settings.http_port,
            registry=self.registry,
            ready=self.ready,
        )

    async def start(self) -> None:
        # Health first, so that /livez answers while we wait for servers.
        port = await self.http.start()
        log.info("http on port %d", port, extra={"http_port": port})
        self.nc = await connect_nats(self.settings.nats_urls, f"ksched-{self.settings.service}")
        self.js = self.nc.jetstream(timeout=10)
        await retry_forever("ensure streams", lambda: ensure_streams(self.js))

    async def ready(self) -> tuple[bool, str]:
        if not self.serving.is_set():
            return False, "starting: not serving yet"
        if not self.nc.is_connected:
            return False, "nats: not connected"
        try:
            await self.redis.ping()
        except Exception as err:
            return False, f"redis: {err}"
        return True, "ok"

    async def close(self) -> None:
        # Drain delivers what is already buffered; with a pull subscription open it
        # can wait out nats-py's whole drain timeout, so bound it.
        try:
            await asyncio.wait_for(self.nc.drain(), DRAIN_SECONDS)
        except Exception:
            with contextlib.suppress(Exception):
                await self.nc.close()
        with contextlib.suppress(Exception):
            await self.redis.aclose()
        await self.http.stop()


class ServiceLogic(Protocol):
    async def run(self) -> None:
        """Serve until cancelled."""

    async def shutdown(self) -> None:
        """Finish or hand back in-flight work; called once on SIGTERM."""


class ServiceFactory(Protocol):
    def __call__(self, rt: Runtime) -> ServiceLogic: ...


def run_service(name: str, factory: ServiceFactory) -> None:
    """Entry point of `python -m services.<name>`; exits 0 on SIGTERM."""
    settings = Settings.from_env(name)
    setup_logging(name, settings.log_level)
    try:
        config = load_config(settings.config_path)
    except ConfigError as err:
        log.error("bad configuration: %s", err)
        sys.exit(2)
    sys.exit(asyncio.run(_amain(settings, config, factory)))


async def _amain(
    settings: Settings, config: SchedulerConfiguration, factory: ServiceFactory
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    rt = Runtime(settings, config)
    starting = asyncio.create_task(rt.start())
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if stop.is_set():
        starting.cancel()
        await rt.close()
        return 0
    logic = factory(rt)
    running = asyncio.create_task(logic.run())
    log.info("%s started", settings.service)
    await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
    code = 0
    if running.done() and running.exception() is not None:
        log.error("%s failed", settings.service, exc_info=running.exception())
        code = 1
    # Let the logic finish (or hand back) what it holds, then stop whatever is left.
    await logic.shutdown()
    with contextlib.suppress(asyncio.TimeoutError, Exception):
        await asyncio.wait_for(asyncio.shield(running), SHUTDOWN_GRACE_SECONDS)
    running.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await running
    await rt.close()
    log.info("%s stopped", settings.service)
    return code
