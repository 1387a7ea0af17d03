"""Encoding on the wire.

Internal messages are msgpack. User input (watch events) is JSON unless the
`Content-Type: application/msgpack` header says otherwise. ksched's own writes
to public subjects are JSON so that any client can read them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import msgpack

from shared.subjects import CONTENT_TYPE_HEADER, MSGPACK_CONTENT_TYPE

# Caps on what a hostile publisher can make us allocate while decoding.
MAX_PAYLOAD_BYTES = 4 * 1024 * 1024
MAX_NESTING = 64

# nats-server counts headers into its max_payload (nats-py checks the body alone): what
# ksched sends leaves this much room for its headers (message ids, error reasons).
HEADER_ROOM = 8 * 1024
# The largest array header msgpack writes (0xdd + 4 bytes).
_ARRAY_HEADER_MAX = 5
# What a batch message holds beside its items (map and array headers, a small head
# such as an epoch): an item larger than item_limit(limit) fits no message.
ENVELOPE_ROOM = 64


def item_limit(limit: int) -> int:
    return limit - ENVELOPE_ROOM


class DecodeError(ValueError):
    """A payload that cannot be decoded; the message says why."""


def text(value: bytes | str) -> str:
    """A Redis reply's string (bytes, or str from a client that decodes)."""
    return value.decode() if isinstance(value, bytes) else value


# One packer per thread, reused: msgpack.packb builds a Packer and its buffer at every
# call, which costs more than packing a small value (a queue record's fields, a key)
# and is paid several times per pod by queue and cache. Per thread, because a Packer's
# buffer is shared state; it packs no callback, so no call re-enters it.
_packers = threading.local()


def _packer() -> msgpack.Packer:
    try:
        packer: msgpack.Packer = _packers.packer
    except AttributeError:
        packer = _packers.packer = msgpack.Packer(use_bin_type=True)
    return packer


def pack(obj: Any) -> bytes:
    return _packer().pack(obj)


def pack_with(item: Mapping[str, Any], field: str, packed: bytes) -> bytes:
    """pack(item), where `packed` is pack(item[field]) made before: the object is not
    packed again. The field comes last (a map's order means nothing to its reader)."""
    rest = {k: v for k, v in item.items() if k != field}
    header = _packer().pack_map_header
    body = pack(rest)[len(header(len(rest))) :]
    return header(len(rest) + 1) + body + pack(field) + packed


class Packed(bytes):
    """A message body packed already (assembled from parts packed once and kept, such
    as the queue's pop reply): sent as it is, not packed again."""


class TooLarge(ValueError):
    """One item is larger than any message may be."""


class Chunk(NamedTuple):
    data: bytes
    items: int  # how many of the items it carries, in order after the previous chunk's


def body_limit(max_payload: int) -> int:
    """The largest body ksched sends on a connection whose server allows `max_payload`."""
    return max_payload - HEADER_ROOM


def pack_chunks(
    items: Iterable[bytes], field: str, limit: int, head: Mapping[str, Any] | None = None
) -> list[Chunk]:
    """Messages `{**head, field: [item, ...]}`, each at most `limit` bytes, from items
    packed one by one (`pack`), in order. Every internal batch goes through here, so
    that no burst of large objects makes a message the server refuses; an item that
    alone exceeds the limit raises TooLarge (the door should have refused it). No items,
    no messages."""
    head = head or {}
    packer = msgpack.Packer(use_bin_type=True)
    prefix = packer.pack_map_header(len(head) + 1) + b"".join(
        pack(k) + pack(v) for k, v in head.items()
    )
    prefix += pack(field)
    room = limit - len(prefix) - _ARRAY_HEADER_MAX
    chunks: list[Chunk] = []
    current: list[bytes] = []
    size = 0

    def close() -> None:
        data = prefix + packer.pack_array_header(len(current)) + b"".join(current)
        chunks.append(Chunk(data, len(current)))

    for item in items:
        if len(item) > room:
            raise TooLarge(f"an item of {len(item)} bytes exceeds the {limit}-byte message limit")
        if current and size + len(item) > room:
            close()
            current, size = [], 0
        current.append(item)
        size += len(item)
    if current:
        close()
    return chunks


def unpack(data: bytes | str) -> Any:
    if isinstance(data, str):  # redis-py's typing allows it; ksched never stores text
        raise DecodeError("expected msgpack bytes, got text")
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as err:  # msgpack raises several unrelated types
        raise DecodeError(f"invalid msgpack: {err}") from err


def dump_json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


_CONTENT_TYPE = CONTENT_TYPE_HEADER.lower()


def is_msgpack(headers: Mapping[str, str] | None) -> bool:
    if not headers:
        return False
    for key, value in headers.items():
        # the length first: most messages carry other headers (ksched's writes do)
        if len(key) == len(_CONTENT_TYPE) and key.lower() == _CONTENT_TYPE:
            return value.split(";")[0].strip().lower() == MSGPACK_CONTENT_TYPE
    return False


# json.loads' own scanner (the C one), with its defaults (typeshed leaves it out)
_scan_json: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _loads(data: bytes) -> Any:
    """json.loads(data), without its steps a watch event does not need: a UTF-8 body
    that starts with "{" (no BOM, no UTF-16/32, no leading space) and ends where the
    value ends is scanned at once (half of json.loads' time for a pod's event). Anything
    else, an error included, goes through json.loads, which says what is wrong in its
    own words."""
    if data[:1] == b"{" and data[-1:] == b"}":
        try:
            text = data.decode()
            obj, end = _scan_json(text, 0)
            if end == len(text):
                return obj
        except (StopIteration, ValueError, RecursionError):
            pass  # json.loads raises its own error for it
    return json.loads(data)


def decode_user_payload(data: bytes, headers: Mapping[str, str] | None) -> Any:
    """Decode a user-published payload by its Content-Type (JSON by default)."""
    if len(data) > MAX_PAYLOAD_BYTES:
        raise DecodeError(f"payload of {len(data)} bytes exceeds {MAX_PAYLOAD_BYTES}")
    if is_msgpack(headers):
        obj = unpack(data)
    else:
        try:
            obj = _loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
            raise DecodeError(f"invalid JSON: {err}") from err
        if data.count(b"{") + data.count(b"[") < MAX_NESTING:
            return obj  # not enough brackets (even counting those in strings) to nest deeper
    _check_depth(obj)
    return obj


def _check_depth(obj: Any) -> None:
    # Iterative so that a deeply nested payload cannot exhaust the stack.
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_NESTING:
            raise DecodeError(f"payload nested deeper than {MAX_NESTING} levels")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
