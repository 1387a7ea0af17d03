"""A Sentinel client's connections to the primary ask the Sentinels where it is at every
connect, with TLS for rediss+sentinel:// (the I/O is tests/e2e/test_sentinel_reconnect.py)."""

from __future__ import annotations

import pytest

from shared.runtime.connections import PrimaryConnection, PrimarySSLConnection, connect_redis
from shared.runtime.settings import Credentials


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("redis+sentinel://s1:1/ksched/0", PrimaryConnection),
        ("rediss+sentinel://s1:1/ksched/0", PrimarySSLConnection),
    ],
)
async def test_the_primarys_connections_follow_the_sentinels(url: str, kind: type) -> None:
    client = connect_redis(url, Credentials(redis_tls_ca="/etc/ssl/certs/ca-certificates.crt"))
    try:
        connection = client.connection_pool.make_connection()
        assert type(connection) is kind
    finally:
        await client.aclose()
