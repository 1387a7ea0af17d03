"""KSCHED_REDIS_URL's Sentinel form (DESIGN.md, Beyond one machine), parsed in one place."""

from __future__ import annotations

import pytest

from shared.runtime.connections import SentinelRedis, connect_redis
from shared.runtime.redisurl import SentinelURL, parse_sentinel_url
from shared.runtime.settings import Credentials


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        pytest.param("redis://127.0.0.1:6379/0", None, id="one server"),
        pytest.param("rediss://redis:6380/1", None, id="one server over TLS"),
        pytest.param("unix:///run/redis.sock", None, id="a socket"),
        pytest.param(
            "redis+sentinel://s1:26379,s2:26380,s3/ksched/2",
            SentinelURL((("s1", 26379), ("s2", 26380), ("s3", 26379)), "ksched", 2),
            id="every sentinel, the default port where none is given",
        ),
        pytest.param(
            "redis+sentinel://10.0.0.1:5000/mymaster",
            SentinelURL((("10.0.0.1", 5000),), "mymaster", 0),
            id="db 0 when left out",
        ),
        pytest.param(
            "rediss+sentinel://cache:p%40ss@[::1]:26379,h2/ksched/0",
            SentinelURL((("::1", 26379), ("h2", 26379)), "ksched", 0, True, "cache", "p@ss"),
            id="TLS, the primary's user and password, an IPv6 sentinel",
        ),
    ],
)
def test_parse(url: str, parsed: SentinelURL | None) -> None:
    assert parse_sentinel_url(url) == parsed


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+sentinel://s1:26379", "master-name"),
        ("redis+sentinel://s1:26379/", "master-name"),
        ("redis+sentinel://s1/ksched/zero", "must be a number"),
        ("redis+sentinel://s1/ksched/0/extra", "master-name"),
        ("redis+sentinel://s1:port/ksched", "bad sentinel port"),
        ("redis+sentinel://s1:70000/ksched", "bad sentinel port"),
        ("redis+sentinel:///ksched/0", "names no sentinel"),
        ("redis+sentinel://:26379/ksched", "without a host"),
    ],
)
def test_malformed_urls_say_what_is_wrong(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_sentinel_url(url)


def test_the_password_is_not_in_the_error() -> None:
    with pytest.raises(ValueError) as err:
        parse_sentinel_url("redis+sentinel://u:secret@s1/ksched/x")
    assert "secret" not in str(err.value) and "u:***@" in str(err.value)


async def test_a_sentinel_url_makes_a_client_of_the_primary_with_the_sentinels_auth() -> None:
    creds = Credentials(
        redis_username="queue",
        redis_password="q",
        redis_sentinel_username="watchers",
        redis_sentinel_password="s",
    )
    client = connect_redis("redis+sentinel://s1:1,s2:2/ksched/3", creds)
    try:
        assert isinstance(client, SentinelRedis)
        pool = client.connection_pool
        assert pool.service_name == "ksched"  # type: ignore[attr-defined]
        primary = pool.connection_kwargs
        assert (primary["db"], primary["username"], primary["password"]) == (3, "queue", "q")
        sentinels = pool.sentinel_manager.sentinels  # type: ignore[attr-defined]
        assert [s.connection_pool.connection_kwargs["port"] for s in sentinels] == [1, 2]
        kwargs = sentinels[0].connection_pool.connection_kwargs
        assert (kwargs["username"], kwargs["password"]) == ("watchers", "s")
    finally:
        await client.aclose()
