"""The worker's what-if endpoint (subjects.WHATIF): `ksched whatif` asks, one worker
answers (nats.micro endpoints share a queue group), against the committed state: the
cache's NodeInfos in Redis (assumed pods included), read the way the worker's own
snapshot reads them, with the pods nominated to each node and the PodDisruptionBudgets
the worker watches. Nothing is written.

The what-if keeps a snapshot of its own, made at the first request and refreshed
(incrementally, by generation) at each, and computes in a thread with frameworks of its
own: the worker's lanes never wait for it (the event loop stays free) and never see the
replicas a workload's what-if assumes onto that snapshot (shared/framework/whatif.py
takes them back before it returns). Requests take turns.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import redis.asyncio as aioredis
from nats.micro.request import Request
from nats.micro.service import Service
from pydantic import ValidationError

from shared.api.models import describe_validation_error
from shared.config import ConfigError, SchedulerConfiguration, parse_config
from shared.framework.handle import HandleProviders
from shared.framework.interface import ClusterObjects
from shared.framework.profile_map import ProfileMap
from shared.framework.whatif import MAX_REPLICAS, WhatIfLimits, replica_pods, what_if
from shared.messages import WhatIfRequest
from shared.plugins import REGISTRY
from shared.snapshot import Snapshot
from shared.subjects import WHATIF
from shared.wire import body_limit, dump_json

log = logging.getLogger("ksched.worker.whatif")

# Lists a report carries, cut in half in turn until it fits the server's max payload.
_TRIMMABLE = ("groups", "scores", "best")
MAX_REASON = 1000  # characters of a 400's reason (it travels in a header)


class WhatIfError(ValueError):
    """A request the endpoint cannot answer: the reply is a 400 with this reason."""


def read_request(data: bytes) -> WhatIfRequest:
    try:
        body = json.loads(data) if data.strip() else {}
    except ValueError as err:
        raise WhatIfError(f"the request is not JSON: {err}") from None
    if not isinstance(body, dict) or not isinstance(body.get("pod"), dict):
        raise WhatIfError('the request must be a JSON object with a "pod"')
    replicas = body.get("replicas", 1)
    if not isinstance(replicas, int) or not 1 <= replicas <= MAX_REPLICAS:
        raise WhatIfError(f"replicas must be an integer from 1 to {MAX_REPLICAS}")
    return body  # type: ignore[return-value]


def fit_report(report: dict[str, Any], limit: int) -> bytes:
    """The report as JSON within `limit` bytes: per-node lists cut short (and said so)."""
    body = dump_json(report)
    while len(body) > limit:
        cut = False
        for key in _TRIMMABLE:
            items = report.get(key)
            if isinstance(items, list) and len(items) > 1:
                del items[len(items) // 2 :]
                cut = True
        placements = (report.get("replicas") or {}).get("placements") or {}
        if len(placements) > 1:
            keep = dict(list(placements.items())[: len(placements) // 2])
            report["replicas"]["placements"] = keep
            cut = True
        if not cut:
            report.pop("node", None)
            if len(dump_json(report)) > limit:
                raise WhatIfError("the report does not fit the server's max payload")
        report["truncated"] = True
        body = dump_json(report)
    return body


class WhatIf:
    """Answers what-if requests; `providers` are the worker's (read: copied per request)."""

    def __init__(
        self,
        redis: aioredis.Redis,
        objects: ClusterObjects,
        config: SchedulerConfiguration,
        providers: HandleProviders,
    ) -> None:
        self.redis = redis
        self.objects = objects
        self.config = config
        self.worker_providers = providers
        self.providers = HandleProviders()  # this endpoint's copy, what its plugins read
        self.profiles = ProfileMap(config, REGISTRY, self.providers)
        self.snapshot: Snapshot | None = None  # made at the first request
        self.turn = asyncio.Lock()

    async def answer(self, req: WhatIfRequest) -> dict[str, Any]:
        config, profiles = self.config, self.profiles
        if "config" in req:
            config = parse_config(req["config"], "config")
            profiles = ProfileMap(config, REGISTRY, self.providers)
        try:
            pods = replica_pods(req["pod"], req.get("replicas", 1))
        except ValidationError as err:
            raise WhatIfError(describe_validation_error(err)) from None
        name = pods[0].pod.spec.scheduler_name
        fw = profiles.get(name)
        if fw is None:
            raise WhatIfError(f"no profile serves schedulerName {name!r}")
        limits = WhatIfLimits(top=int(req.get("top", WhatIfLimits.top)))
        async with self.turn:
            if self.snapshot is None:
                self.snapshot = Snapshot(self.redis, self.objects)
            await self.snapshot.refresh()  # the committed state as of now
            self._copy_providers()
            snapshot = self.snapshot
            return await asyncio.to_thread(
                lambda: what_if(
                    fw,
                    pods,
                    snapshot.cluster(),
                    percentage=config.percentage_of_nodes_to_score,
                    node=req.get("node"),
                    limits=limits,
                )
            )

    def _copy_providers(self) -> None:
        """What the worker knows beyond the snapshot, as of now: the lanes change theirs
        while the thread reads this copy."""
        worker, mine = self.worker_providers, self.providers
        mine.nominated = {node: list(pods) for node, pods in worker.nominated.items()}
        mine.pdbs[:] = list(worker.pdbs)
        mine.terminating = dict(worker.terminating)
        mine.pod_groups = dict(worker.pod_groups)

    async def start(self, svc: Service, max_payload: int) -> None:
        async def handler(msg: Request) -> None:
            try:
                reply = fit_report(await self.answer(read_request(msg.data)), limit)
            except (WhatIfError, ConfigError) as err:
                await msg.respond_error("400", str(err)[:MAX_REASON])
                return
            except Exception as err:  # a bug, not the asker's: say so, keep serving
                log.exception("what-if failed")
                await msg.respond_error("500", f"what-if failed: {err}")
                return
            await msg.respond(reply)

        limit = body_limit(max_payload)
        await svc.add_endpoint(name="whatif", subject=WHATIF, handler=handler)
