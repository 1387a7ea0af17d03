"""KSCHED_NATS_URL: every server of one NATS cluster, comma separated (DESIGN.md,
Beyond one machine). Apart from the settings so that the CLI reads it without them."""

from __future__ import annotations


def server_list(urls: str) -> list[str]:
    """The servers of a comma separated KSCHED_NATS_URL, in their order."""
    return [u.strip() for u in urls.split(",") if u.strip()]
