"""What every ksched service shares: connections, streams, health, metrics, SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
import time
from typing import Any, Protocol

import redis.asyncio as aioredis
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.micro.service import Service
from prometheus_client import CollectorRegistry

from shared.config import ConfigError, SchedulerConfiguration, load_config
from shared.runtime import metrics, progress
from shared.runtime.askagain import AskingAgain
from shared.runtime.connections import connect_nats, connect_redis, ensure_streams, reached_first
from shared.runtime.discovery import StatsData, register
from shared.runtime.elector import LeaderElector, LeaseClients
from shared.runtime.fencing import FencedBatch, WatcherFloors
from shared.runtime.http import HealthServer
from shared.runtime.lease import LEADER_ELECTED
from shared.runtime.leasestore import LeaseStore, ensure_lease_bucket
from shared.runtime.logs import setup_logging
from shared.runtime.partitions import probe_partitions
from shared.runtime.progress import Progress
from shared.runtime.retry import retry_forever
from shared.runtime.settings import Settings
from shared.runtime.timeouts import within
from shared.sharding import use_partitions

log = logging.getLogger("ksched.service")

SHUTDOWN_GRACE_SECONDS = 10.0
DRAIN_SECONDS = 2.0
# A new leader's reads at takeover (each retried until answered): a request sent while
# a stream elects its leader, or through a server that then died, is never answered,
# and waiting the services' 10 s on it was most of a takeover after a host was lost.
TAKEOVER_REQUEST_TIMEOUT = 3.0
# Within that, its reads are asked again this often (runtime/askagain.py): a read sent
# while a stream elects its leader is never answered, even once the election is over.
TAKEOVER_ASK_AGAIN = 0.5


class Runtime:
    """Connections and shared plumbing, handed to a service's logic."""

    def __init__(self, settings: Settings, config: SchedulerConfiguration) -> None:
        self.settings = settings
        self.config = config
        self.registry = CollectorRegistry()
        self.nc: NATS = NATS()
        self.js: JetStreamContext
        self.partitions: int | None = None  # the server's pod partitions (None: unmapped)
        # the same, with TAKEOVER_REQUEST_TIMEOUT, its reads asked again (askagain.py)
        self.takeover_js: JetStreamContext
        self.redis: aioredis.Redis = connect_redis(settings.redis_url, settings.credentials)
        # Set by the service's logic once it listens (subscriptions, consumers): before
        # that, a request to it would find no responder, so /readyz says not ready.
        self.serving = asyncio.Event()
        # Whether the process makes progress (runtime/progress.py): the consumers and
        # request handlers of runtime/consume.py and runtime/rpc.py report to it.
        self.progress = Progress(settings.stall_seconds)
        progress.install(self.progress)
        self._heartbeat: asyncio.Task[None] | None = None
        # watcher, queue and cache work only while they hold their service's lease, in
        # the lease bucket (runtime/leasestore.py); the elector is made once connected
        self.elector: LeaderElector | None = None
        self.leases: LeaseStore | None = None
        self.holding: asyncio.Task[None] | None = None  # renewing while leading
        self._lease_replicas = settings.stream_replicas if settings.service in LEADER_ELECTED else 1
        self.leader_status = metrics.LEADER_STATUS.gauge(self.registry)
        metrics.PROGRESS_AGE.gauge(self.registry).set_function(
            lambda: self.progress.age(time.monotonic())
        )
        metrics.EVENT_LOOP_LAG.gauge(self.registry).set_function(lambda: self.progress.lag)
        # The instance's nats.micro service (discovery.py), started with the connection;
        # a service may add endpoints to it and set what $SRV.STATS reports.
        self.micro: Service | None = None
        self.stats_data: StatsData | None = None
        self.http = HealthServer(
            host=settings.http_host,
            port=settings.http_port,
            registry=self.registry,
            ready=self.ready,
            live=self.stalled,
        )

    async def start(self) -> None:
        self._heartbeat = asyncio.create_task(self.progress.heartbeat())
        # Health first, so that /livez answers while we wait for servers.
        port = await self.http.start()
        log.info("http on port %d", port, extra={"http_port": port})
        self.nc = await connect_nats(
            self.settings.nats_urls, f"ksched-{self.settings.service}", self.settings.credentials
        )
        self.js = self.nc.jetstream(timeout=10)
        self.takeover_js = AskingAgain(
            self.nc, timeout=TAKEOVER_REQUEST_TIMEOUT, again=TAKEOVER_ASK_AGAIN
        )
        replicas = self.settings.stream_replicas
        # With the takeover's short timeout too: a service restarted while the server it
        # reached is cut off (or a stream elects its leader) asked again only after the
        # services' 10 s, per stream; the client's pings move it to another server.
        await retry_forever(
            "ensure streams", lambda: ensure_streams(self.takeover_js, replicas=replicas)
        )
        # Does the server store pods under their partitions (docs/scale.md §4)? The
        # watcher shards' consumers and every read of a pod's latest event depend on it.
        self.partitions = await probe_partitions(self.nc)
        use_partitions(self.partitions)
        if self.partitions is not None:
            log.info("the NATS server maps pods into %d partitions", self.partitions)
        if self.settings.service in LEADER_ELECTED:
            await retry_forever("open the lease bucket", self._open_leases)
        self.micro = await register(
            self.nc,
            self.settings.service,
            ready=self.ready,
            registry=self.registry,
            http_port=port,
            stats_data=lambda: self.stats_data,
        )

    async def _open_leases(self) -> None:
        await ensure_lease_bucket(self.takeover_js, self._lease_replicas)
        self.leases = await LeaseStore.open(self.js)
        settings = self.settings
        self.elector = LeaderElector(
            LeaseClients(self.leases, self.redis),
            settings.lease_name,  # a watcher shard's own lease (shared/sharding.py)
            settings.identity,
            settings.leader_election,
            renewer=self._lease_clients,
            stalled=self.progress.stalled,
        )

    async def _lease_clients(self) -> LeaseClients:
        """The lease thread's own NATS connection and Redis client, opened on its own
        event loop (runtime/elector.py): a blocked service loop does not stop them."""
        settings = self.settings
        # A new leader opens them under its renew deadline: the server the service's
        # connection reached is tried first, not one that may be cut off from here.
        urls = reached_first(settings.nats_urls, self.nc.connected_url)
        nc = await connect_nats(
            urls, f"ksched-{settings.service}-lease", settings.credentials, in_order=True
        )
        redis = connect_redis(settings.redis_url, settings.credentials)

        async def close() -> None:
            for closing in (nc.close, redis.aclose):
                with contextlib.suppress(Exception):
                    await closing()

        try:
            return LeaseClients(await LeaseStore.open(nc.jetstream()), redis, close)
        except BaseException:
            await close()
            raise

    def watcher_floors(self) -> WatcherFloors:
        """Admits only the current epoch of each watcher shard's leader (runtime/fencing.py)."""
        if self.leases is None:
            raise RuntimeError(f"{self.settings.service} has no lease bucket")
        return WatcherFloors(self.leases)

    @property
    def epoch(self) -> int:
        """The lease epoch this replica leads with (0 for services without election)."""
        return self.elector.lease.epoch if self.elector is not None else 0

    def fenced_writes(self) -> FencedBatch:
        """A write batch that Redis applies only while this replica's epoch is current."""
        if self.elector is None:
            raise RuntimeError(f"{self.settings.service} has no lease to fence its writes with")
        return self.elector.batch()

    async def lead(self) -> None:
        """Stand by until this replica holds its service's lease (at once without
        election); then keep renewing it, until `holding` ends: the lease is lost."""
        if self.elector is not None:
            self.leader_status.labels(self.settings.service).set(0)
            await self.elector.acquire()
            self.leader_status.labels(self.settings.service).set(1)
            self.holding = asyncio.create_task(self.elector.hold())
            await self.elector.fence_raised()

    async def _stop_holding(self) -> None:
        """Stop renewing (the renewal thread's last try ends first)."""
        if self.holding is not None:
            self.holding.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.holding

    async def start_serving(self) -> None:
        """The service listens: /readyz may say so once the server has its
        subscriptions. nats-py sends a SUB from its buffer later, so a request made as
        soon as /readyz said ready could find no responder (seen in test_pop_reports).
        A failed flush is let go: the subscriptions are sent again at the reconnect."""
        try:
            await self.nc.flush(timeout=5)
        except Exception as err:
            log.warning("flush before serving failed: %s", err)
        self.serving.set()

    def stalled(self) -> str | None:
        """Why this process makes no progress (runtime/progress.py), or None."""
        return self.progress.stalled(time.monotonic())

    async def ready(self) -> tuple[bool, str]:
        stalled = self.stalled()
        if stalled is not None:
            return False, f"stalled: {stalled}"
        if self.elector is not None and not self.elector.lease.leading:
            # a standby is ready to take over; /metrics tells leader from standby
            return self.nc.is_connected, f"standby (leader {self.elector.lease.holder or '-'})"
        if not self.serving.is_set():
            return False, "starting: not serving yet"
        if not self.nc.is_connected:
            return False, "nats: not connected"
        try:
            await self.redis.ping()
        except Exception as err:
            return False, f"redis: {err}"
        return True, "ok"

    async def abort(self) -> None:
        """A deposed leader: drop the connections without delivering what is buffered."""
        self.leader_status.labels(self.settings.service).set(0)
        self._stop_heartbeat()
        await self._stop_holding()
        for close in (self.nc.close, self.redis.aclose, self.http.stop):
            with contextlib.suppress(Exception):
                await close()

    def _stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()

    async def close(self) -> None:
        self._stop_heartbeat()
        if self.micro is not None:
            with contextlib.suppress(Exception):
                await self.micro.stop()
        # renewed until now: the leader's last writes (shutdown flushes) are fenced
        # with a current lease; then handed over at once
        await self._stop_holding()
        if self.elector is not None:
            await self.elector.release()
        # Drain delivers what is already buffered; with a pull subscription open it
        # can wait out nats-py's whole drain timeout, so bound it.
        try:
            await within(self.nc.drain(), DRAIN_SECONDS)
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


# The services hold large long-lived heaps (NodeInfos, pods, parsed models) and make
# many short-lived objects per message: with CPython's default thresholds (700, 10,
# 10) the collector runs every few hundred allocations and keeps re-walking the
# long-lived objects. Fewer, larger young collections cost far less.
GC_THRESHOLDS = (50_000, 20, 20)


def tune_gc() -> None:
    raw = os.environ.get("KSCHED_GC_THRESHOLDS", "")
    thresholds = tuple(int(x) for x in raw.split(",")) if raw else GC_THRESHOLDS
    gc.set_threshold(*thresholds)


def run_service(name: str, factory: ServiceFactory) -> None:
    """Entry point of `python -m services.<name>`; exits 0 on SIGTERM."""
    settings = Settings.from_env(name)
    setup_logging(name, settings.log_level)
    tune_gc()
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
    stopping = asyncio.create_task(stop.wait())

    async def start_and_lead() -> None:
        await rt.start()
        await rt.lead()

    starting = asyncio.create_task(start_and_lead())
    await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if stop.is_set():
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await starting
        await rt.close()
        return 0
    logic = factory(rt)
    running = asyncio.create_task(logic.run())
    log.info("%s started", settings.service)
    serving: set[asyncio.Task[Any]] = {running, stopping}
    if rt.holding is not None:
        serving.add(rt.holding)  # it ends only when the lease is lost
    await asyncio.wait(serving, return_when=asyncio.FIRST_COMPLETED)
    if rt.holding is not None and rt.holding.done():
        # kube-scheduler exits when it loses its lease; restarted, it stands by. Nothing
        # is handed back: what this replica held belongs to its successor now.
        running.cancel()
        await rt.abort()
        return 1
    return await _stop(rt, logic, running)


async def _stop(rt: Runtime, logic: ServiceLogic, running: asyncio.Task[None]) -> int:
    code = 0
    if running.done() and running.exception() is not None:
        log.error("%s failed", rt.settings.service, exc_info=running.exception())
        code = 1
    # Let the logic finish (or hand back) what it holds, then stop whatever is left.
    await logic.shutdown()
    with contextlib.suppress(asyncio.TimeoutError, Exception):
        await within(asyncio.shield(running), SHUTDOWN_GRACE_SECONDS)
    running.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await running
    await rt.close()
    log.info("%s stopped", rt.settings.service)
    return code
