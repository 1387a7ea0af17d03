"""Permit signals to the cache: the allows and rejects of waiting pods that Permit and
Unreserve plugins raised (Coscheduling allowing or rejecting a gang), sent by the
worker and the binder alike. The cache records them on the assumptions and tells the
binders holding those pods."""

from __future__ import annotations

from collections.abc import Iterable

from nats.aio.client import Client as NATS

from shared.framework.runtime import Framework
from shared.runtime.retry import retry_forever
from shared.runtime.rpc import request
from shared.subjects import CACHE_PERMIT


async def send_permit_signals(nc: NATS, frameworks: Iterable[Framework]) -> None:
    signals = [s.to_wire() for fw in frameworks for s in fw.handle.take_permit_signals()]
    if signals:
        body = {"signals": signals}
        await retry_forever("permit signals", lambda: request(nc, CACHE_PERMIT, body))
