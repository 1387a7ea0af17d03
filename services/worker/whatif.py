"""The worker's what-if endpoint (subjects.WHATIF): `ksched whatif` asks, one worker
answers (nats.micro endpoints share a queue group), against the snapshot it schedules
from: the cache's committed NodeInfos plus what this worker assumed and the cache has
not confirmed yet, and the pods nominated to each node. Nothing is written: the
replicas a workload places are assumed onto the snapshot and taken back before the
handler returns (shared/framework/whatif.py), and no await separates the two, so the
worker's lanes never see them.

The work is synchronous, like a lane's scheduling cycle: a few tens of milliseconds at
5000 nodes for one pod, plus one cycle per further replica (capped at
whatif.MAX_REPLICAS).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from nats.micro.request import Request
from nats.micro.service import Service
from pydantic import ValidationError

from shared.api.models import describe_validation_error
from shared.config import ConfigError, SchedulerConfiguration, parse_config
from shared.framework.handle import HandleProviders
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
    """Answers what-if requests from the worker's snapshot, profiles and providers."""

    def __init__(
        self,
        snapshot: Snapshot,
        config: SchedulerConfiguration,
        profiles: Mapping[str, Any],
        providers: HandleProviders,
    ) -> None:
        self.snapshot = snapshot
        self.config = config
        self.profiles = profiles
        self.providers = providers

    async def answer(self, req: WhatIfRequest) -> dict[str, Any]:
        await self.snapshot.refresh()  # the committed state as of now
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
        return what_if(
            fw,
            pods,
            self.snapshot.cluster(),
            percentage=config.percentage_of_nodes_to_score,
            node=req.get("node"),
            limits=WhatIfLimits(top=int(req.get("top", WhatIfLimits.top))),
        )

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
