"""The lease records of leader election (runtime/lease.py) in a NATS KV bucket.

JetStream KV is a Raft-replicated stream (`KSCHED_STREAM_REPLICAS` replicas, 3 on a
3-server cluster): a write is acknowledged once a quorum has it, and a server that
lost it cannot lead the stream. Every write here is a compare-and-set on the key's
revision (the stream sequence of its last write: `Nats-Expected-Last-Subject-Sequence`),
so two candidates that read the same record cannot both replace it. The record is
never deleted: a release clears the holder and keeps the epoch.

The bucket keeps one revision per key; reads go to the stream's leader (not a direct
get, which a lagging replica may answer), so a read sees every acknowledged write.
"""

from __future__ import annotations

from dataclasses import replace

from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError
from nats.js.kv import KeyValue

from shared.runtime.lease import LeaseRecord
from shared.subjects import LEASE_BUCKET

LEASE_STREAM = f"KV_{LEASE_BUCKET}"


class Outraced(RuntimeError):
    """The record's revision moved since it was read: another write landed first."""


async def ensure_lease_bucket(js: JetStreamContext, replicas: int) -> None:
    """Create the bucket, or bring its replicas to `replicas` (idempotent)."""
    try:
        info = await js.stream_info(LEASE_STREAM)
    except NotFoundError:
        await js.create_key_value(
            KeyValueConfig(
                bucket=LEASE_BUCKET,
                description="leader election: one lease record per service",
                history=1,
                replicas=replicas,
                storage=StorageType.FILE,
                direct=False,
            )
        )
        return
    if info.config.num_replicas != replicas:
        await js.update_stream(replace(info.config, num_replicas=replicas))


class LeaseStore:
    """Read and compare-and-set the lease records of one bucket."""

    def __init__(self, kv: KeyValue) -> None:
        self._kv = kv

    @classmethod
    async def open(cls, js: JetStreamContext) -> LeaseStore:
        return cls(await js.key_value(LEASE_BUCKET))

    async def read(self, name: str) -> tuple[LeaseRecord | None, int]:
        """The record of `name` and its revision; (None, 0) when there is none yet."""
        try:
            entry = await self._kv.get(name)
        except KeyNotFoundError:
            return None, 0
        assert entry.value is not None and entry.revision is not None
        return LeaseRecord.decode(entry.value), entry.revision

    async def write(self, name: str, record: LeaseRecord, revision: int) -> int:
        """Replace the record read at `revision` (0: create the first); its new revision.
        Outraced when the record is no longer at `revision`."""
        try:
            if revision == 0:
                return await self._kv.create(name, record.encode())
            return await self._kv.update(name, record.encode(), last=revision)
        except KeyWrongLastSequenceError as err:
            raise Outraced(f"lease {name}: revision {revision} is no longer current") from err

    async def epoch(self, name: str) -> int:
        """The newest epoch `name`'s leaders were handed (0: none ever led)."""
        record, _ = await self.read(name)
        return record.epoch if record is not None else 0
