"""Deployment settings from the environment: credentials (docs/security.md) and the
leader election's lease (docs/reliability.md)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from shared.runtime.connections import nats_auth, redis_auth
from shared.runtime.settings import Credentials, Settings


def test_no_credentials_by_default() -> None:
    s = Settings.from_env("queue", {})
    assert s.credentials == Credentials()
    assert nats_auth(s.credentials) == {} and redis_auth(s.credentials) == {}
    assert s.leader_election.lease_duration == 15.0
    assert s.identity  # hostname_random, unique per process


def test_passwords_from_docker_secret_files(tmp_path: Path) -> None:
    (tmp_path / "nats").write_text("n-secret\n")
    (tmp_path / "redis").write_text("r-secret\n")
    env = {
        "KSCHED_NATS_USER": "queue",
        "KSCHED_NATS_PASSWORD_FILE": str(tmp_path / "nats"),
        "KSCHED_REDIS_USERNAME": "queue",
        "KSCHED_REDIS_PASSWORD_FILE": str(tmp_path / "redis"),
    }
    creds = Settings.from_env("queue", env).credentials
    assert nats_auth(creds) == {"user": "queue", "password": "n-secret"}
    assert redis_auth(creds) == {"username": "queue", "password": "r-secret"}


def test_a_password_in_the_environment_wins_over_its_file(tmp_path: Path) -> None:
    env = {"KSCHED_NATS_PASSWORD": "direct", "KSCHED_NATS_PASSWORD_FILE": "/nonexistent"}
    assert Credentials.from_env(env).nats_password == "direct"


def test_an_unreadable_secret_file_fails_at_start_with_its_name() -> None:
    with pytest.raises(ValueError, match="KSCHED_REDIS_PASSWORD_FILE"):
        Credentials.from_env({"KSCHED_REDIS_PASSWORD_FILE": "/nonexistent/secret"})


def test_passwords_stay_out_of_the_settings_repr() -> None:
    env = {"KSCHED_NATS_PASSWORD": "n-secret", "KSCHED_REDIS_PASSWORD": "r-secret"}
    text = repr(Settings.from_env("cache", env))
    assert "n-secret" not in text and "r-secret" not in text


def test_creds_file_and_tls() -> None:
    creds = Credentials(
        nats_creds="/run/secrets/ksched.creds", nats_tls_ca=ssl.get_default_verify_paths().cafile
    )
    auth = nats_auth(creds)
    assert auth["user_credentials"] == "/run/secrets/ksched.creds"
    assert isinstance(auth["tls"], ssl.SSLContext)
    assert redis_auth(Credentials(redis_tls_ca="/ca.pem")) == {"ssl_ca_certs": "/ca.pem"}


def test_the_stall_limit() -> None:
    assert Settings.from_env("watcher", {}).stall_seconds == 30.0
    assert Settings.from_env("watcher", {"KSCHED_STALL_SECONDS": "3s"}).stall_seconds == 3.0
    assert Settings.from_env("watcher", {"KSCHED_STALL_SECONDS": "0"}).stall_seconds == 0.0
    for bad in ("soon", "-1", "0.2"):
        with pytest.raises(ValueError, match="KSCHED_STALL_SECONDS"):
            Settings.from_env("watcher", {"KSCHED_STALL_SECONDS": bad})


def test_every_server_of_a_cluster_in_order() -> None:
    env = {"KSCHED_NATS_URL": "nats://n1:4222, nats://n2:4222,,nats://n3:4222 "}
    assert Settings.from_env("worker", env).nats_urls == [
        "nats://n1:4222",
        "nats://n2:4222",
        "nats://n3:4222",
    ]
    with pytest.raises(ValueError, match="KSCHED_NATS_URL names no server"):
        Settings.from_env("worker", {"KSCHED_NATS_URL": " , "})


def test_stream_replicas() -> None:
    assert Settings.from_env("cache", {}).stream_replicas == 1
    assert Settings.from_env("cache", {"KSCHED_STREAM_REPLICAS": "3"}).stream_replicas == 3
    for bad in ("three", "0", "6", "-1"):
        with pytest.raises(ValueError, match="KSCHED_STREAM_REPLICAS"):
            Settings.from_env("cache", {"KSCHED_STREAM_REPLICAS": bad})
