"""Every service instance announces itself as a `nats.micro` service, so that `ksched
status`, `ksched top` and `nats micro ls` find each running instance with one
`$SRV.PING/INFO/STATS` request, even where its HTTP port is not reachable (compose
publishes only NATS).

Per instance (subjects.instance_subject): `readyz` answers {"ready", "reason"} as
/readyz does; `metrics` answers the Prometheus text of /metrics. The metadata says
which configuration the instance loaded (`config`: the KSCHED_CONFIG file or
"defaults"; `profiles`: its schedulerNames), which the service also logs at start.

nats.micro, prometheus_client and the settings are imported by `register` only: the `ksched` CLI
takes `version()` from here and must start fast.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from importlib import metadata
from typing import TYPE_CHECKING, Any

from shared.subjects import instance_subject, micro_name

if TYPE_CHECKING:
    from nats.aio.client import Client as NATS
    from nats.micro.request import Request
    from nats.micro.service import EndpointStats, Service
    from prometheus_client import CollectorRegistry

log = logging.getLogger("ksched.discovery")

DESCRIPTIONS = {
    "watcher": "ksched watcher: informers and event handlers",
    "queue": "ksched scheduling queue: pending pods by sub-queue",
    "cache": "ksched scheduler cache: NodeInfo, assumed pods, validate-then-commit",
    "worker": "ksched worker: the scheduling cycle",
    "binder": "ksched binder: the binding cycle",
}

ReadyCheck = Callable[[], Awaitable[tuple[bool, str]]]
StatsData = Callable[[], Any]


def version() -> str:
    try:
        return metadata.version("ksched")
    except metadata.PackageNotFoundError:  # run from a source tree without install
        return "0.0.0"


async def register(
    nc: NATS,
    service: str,
    *,
    ready: ReadyCheck,
    registry: CollectorRegistry,
    http_port: int,
    stats_data: Callable[[], StatsData | None],
) -> Service:
    """Start the instance's micro service; `stats_data()` is what $SRV.STATS reports
    per endpoint (the queue sets its sub-queue sizes)."""
    from nats.micro import add_service
    from prometheus_client import generate_latest

    from shared.runtime.settings import loaded_configuration

    configuration = loaded_configuration(os.environ)
    log.info(
        "configuration %s, profiles %s",
        configuration["config"],
        configuration["profiles"],
        extra=configuration,
    )

    def on_stats(_: EndpointStats) -> Any:
        data = stats_data()
        return data() if data is not None else None

    svc = await add_service(
        nc,
        name=micro_name(service),
        version=version(),
        description=DESCRIPTIONS.get(service, f"ksched {service}"),
        metadata={
            "service": service,
            "host": socket.gethostname(),
            "pid": str(os.getpid()),
            "http_port": str(http_port),
            **configuration,
        },
        stats_handler=on_stats,
    )

    async def readyz(req: Request) -> None:
        ok, reason = await ready()
        await req.respond(json.dumps({"ready": ok, "reason": reason}).encode())

    async def metrics(req: Request) -> None:
        await req.respond(generate_latest(registry))

    await svc.add_endpoint(
        name="readyz", subject=instance_subject(service, svc.id, "readyz"), handler=readyz
    )
    await svc.add_endpoint(
        name="metrics", subject=instance_subject(service, svc.id, "metrics"), handler=metrics
    )
    return svc
