"""ksched's JetStream streams as configured for one server or a cluster (DESIGN.md,
Beyond one machine; docs/reliability.md)."""

from __future__ import annotations

from pathlib import Path

from nats.js.api import StorageType

from shared.runtime.connections import stream_config
from shared.subjects import STREAMS
from shared.tools.natscluster import Member, server_config


def test_streams_are_files_in_the_replicas_asked_for() -> None:
    for spec in STREAMS:
        assert stream_config(spec).num_replicas == 1
        config = stream_config(spec, replicas=3)
        assert config.num_replicas == 3
        assert config.storage == StorageType.FILE
        assert config.persist_mode is None  # the server's default: never "async"


def test_cluster_server_config_routes_to_every_member(tmp_path: Path) -> None:
    members = [Member(f"n{i}", 4222 + i, 6222 + i, 8222 + i) for i in range(3)]
    text = server_config(members[1], members, tmp_path / "js", sync_always=True)
    assert 'server_name: "n1"' in text
    assert 'listen: "127.0.0.1:4223"' in text and 'listen: "127.0.0.1:6223"' in text
    assert 'http: "127.0.0.1:8223"' in text
    assert f'store_dir: "{tmp_path / "js"}"' in text
    assert "sync_interval: always" in text
    assert (
        'routes: ["nats-route://127.0.0.1:6222", "nats-route://127.0.0.1:6223", '
        '"nats-route://127.0.0.1:6224"]'
    ) in text
    assert "sync_interval" not in server_config(members[0], members, tmp_path / "js")
