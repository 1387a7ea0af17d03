"""`ksched shadow --config FILE [--since SEQ|TIME] [--follow]`: the recorded cluster
history replayed through a candidate configuration (shared/framework/shadow.py), and the
decisions it would have taken differently, without binding or writing anything.

The cluster stream is read with an ephemeral ordered consumer, as ClusterWatch reads it:
first everything it holds (then the report), then with --follow every new decision as
it is recorded (one line, or one JSON object a line with -o json), until interrupted.
With --diverge the replay follows the candidate's own placements instead of reality's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
from typing import Any

from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy

from shared.api.names import object_key
from shared.config import ConfigError, SchedulerConfiguration, load_config
from shared.framework.shadow import Decision, LogEvent, Shadow, backfilled
from shared.framework.shadow_report import RESOURCES, report
from shared.runtime.timeouts import within
from shared.subjects import CLUSTER_STREAM, WHOLE_STREAM, object_of_subject
from shared.tools.cli.live import CliError, answered, connect, require_stream
from shared.tools.cli.output import emit, warn
from shared.tools.cli.tables import render_table
from shared.wire import DecodeError, decode_user_payload

READ_TIMEOUT_SECONDS = 30.0  # for the stored history to arrive


def event_of(msg: Msg) -> LogEvent | None:
    """A stream message as the replay reads it; None for what names no object or does
    not decode (the watcher refused it: it is on ksched.errors)."""
    named = object_of_subject(msg.subject)
    if named is None:
        return None
    kind, namespace, name = named
    try:
        event = decode_user_payload(msg.data, msg.headers)
        obj = event["object"]
        meta = dict(obj.get("metadata") or {})
    except (DecodeError, KeyError, TypeError, AttributeError):
        return None
    # the subject names the object (as ClusterWatch reads it)
    meta.setdefault("name", name)
    if namespace:
        meta.setdefault("namespace", namespace)
    key = object_key(namespace, name) if namespace else name
    md = msg.metadata
    return LogEvent(
        md.sequence.stream,
        kind,
        key,
        str(event.get("type")),
        {**obj, "metadata": meta},
        md.timestamp,
    )


def parse_since(text: str | None) -> tuple[int, dt.datetime | None]:
    """--since: a stream sequence, or an ISO 8601 time (UTC when it names no zone)."""
    if not text:
        return 0, None
    if text.isdigit():
        return int(text), None
    try:
        at = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CliError(f"--since {text!r}: neither a stream sequence nor an ISO time") from None
    return 0, at if at.tzinfo else at.replace(tzinfo=dt.UTC)


async def shadow_stream(
    url: str, config: SchedulerConfiguration, args: argparse.Namespace
) -> dict[str, Any]:
    """The report over the stored history; with --follow, then prints the differences
    of each new decision until cancelled."""
    since_seq, since_time = parse_since(args.since)
    follow, json_lines = args.follow, args.output == "json"
    from shared.plugins import REGISTRY

    shadow = Shadow(config, REGISTRY, since_seq, since_time, diverge=args.diverge)
    nc = await connect(url)
    try:
        js = nc.jetstream()
        stored = await answered(lambda: require_stream(js))
        queue: asyncio.Queue[Msg] = asyncio.Queue()
        sub = await answered(
            lambda: js.subscribe(
                WHOLE_STREAM,
                stream=CLUSTER_STREAM,
                cb=queue.put,
                ordered_consumer=True,
                deliver_policy=DeliverPolicy.ALL,
            )
        )
        events = await _stored(queue, stored)
        # CPU-bound: off the event loop, which keeps the consumer's heartbeats meanwhile
        result = await asyncio.to_thread(replay, shadow, events)
        if follow:
            emit(json.dumps(result) if json_lines else "\n".join(report_lines(result)))
            await _follow(queue, shadow, json_lines)
        await sub.unsubscribe()
        return result
    finally:
        await nc.close()


def replay(shadow: Shadow, events: list[LogEvent]) -> dict[str, Any]:
    for ev in backfilled(events):
        shadow.feed(ev)
    return report(shadow)


async def _stored(queue: asyncio.Queue[Msg], stored: int) -> list[LogEvent]:
    """Every message the stream held when we subscribed (none when it was empty)."""
    events: list[LogEvent] = []
    pending = stored
    while pending:
        try:
            msg = await within(queue.get(), READ_TIMEOUT_SECONDS)
        except TimeoutError:
            raise CliError(f"reading stream {CLUSTER_STREAM} timed out") from None
        pending = msg.metadata.num_pending
        ev = event_of(msg)
        if ev is not None:
            events.append(ev)
    return events


async def _follow(queue: asyncio.Queue[Msg], shadow: Shadow, json_lines: bool) -> None:
    while True:
        ev = event_of(await queue.get())
        # a decision costs a cycle over every node: off the event loop
        decision = await asyncio.to_thread(shadow.feed, ev) if ev is not None else None
        if decision is not None and decision.differs:
            line = json.dumps(decision.to_dict()) if json_lines else decision_line(decision)
            emit(line)


# --- the tables -------------------------------------------------------------------------


def decision_line(d: Decision) -> str:
    return f"seq {d.seq} {d.pod}: {d.verdict}, real {d.real or '-'}, shadow " + (
        f"{d.shadow_node or '-'}; {cause(d.to_dict())}"
    )


def cause(d: dict[str, Any]) -> str:
    """Why the candidate decided otherwise: the Filter verdicts on the real node, or
    each Score plugin's weighted gain of its node over the real one."""
    if d.get("rejectedBy"):
        return "; ".join(f"{p}: {v}" if p else v for p, v in d["rejectedBy"].items())
    if d.get("scoreDeltas"):
        return ", ".join(f"{p} {v:+d}" for p, v in d["scoreDeltas"].items())
    if d["verdict"] == "schedulable":
        return f"fits {d['feasible']} node(s)"
    return ""


def report_lines(out: dict[str, Any]) -> list[str]:
    counts = ", ".join(f"{v} {k}" for k, v in out["counts"].items()) or "none"
    lines = [
        f"{out['decisions']} decisions compared ({counts}): {out['differences']} differ"
        f" ({out['mode']})"
    ]
    if out["differing"]:
        rows = [
            [
                str(d["seq"]),
                d["pod"],
                d["verdict"],
                d["real"] or "-",
                d["shadow"] or "-",
                cause(d),
            ]
            for d in out["differing"]
        ]
        lines += ["", render_table(["SEQ", "POD", "VERDICT", "REAL", "SHADOW", "CAUSE"], rows)]
    lines += ["", "Utilisation, requested/allocatable (real -> shadow):"]
    lines += [render_table(["NODE", "ZONE", *(r.upper() for r in RESOURCES)], _node_rows(out))]
    real, shadow = out["utilisation"]["real"], out["utilisation"]["shadow"]
    zone_rows = [
        [zone, *(_change(real["zones"][zone][r], shadow["zones"][zone][r]) for r in RESOURCES)]
        for zone in real["zones"]
    ]
    lines += ["", render_table(["ZONE", *(r.upper() for r in RESOURCES)], zone_rows)]
    lines.append("")
    for r in RESOURCES:
        a, b = real["balance"][r], shadow["balance"][r]
        lines.append(
            f"Balance of {r} across nodes: mean {_pct(a['mean'])} -> {_pct(b['mean'])}, "
            f"standard deviation {_pct(a['stddev'])} -> {_pct(b['stddev'])}"
        )
    return lines


def _node_rows(out: dict[str, Any]) -> list[list[str]]:
    real, shadow = out["utilisation"]["real"]["nodes"], out["utilisation"]["shadow"]["nodes"]
    return [
        [name, real[name]["zone"], *(_change(real[name][r], shadow[name][r]) for r in RESOURCES)]
        for name in real
    ]


def _change(a: dict[str, Any], b: dict[str, Any]) -> str:
    if a["fraction"] == b["fraction"]:
        return _pct(a["fraction"])
    return f"{_pct(a['fraction'])} -> {_pct(b['fraction'])}"


def _pct(fraction: float) -> str:
    return f"{fraction * 100:.1f}%"


def run_shadow(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
        out = asyncio.run(shadow_stream(args.nats, config, args))
    except (ConfigError, CliError) as err:
        warn(f"error: {err}")
        return 1
    except KeyboardInterrupt:
        return 0
    if not args.follow:
        with contextlib.suppress(BrokenPipeError):
            json_out = args.output == "json"
            emit(json.dumps(out, indent=2) if json_out else "\n".join(report_lines(out)))
    return 0
