"""The subject mapping docs/scale.md proposes for the watcher's pod partitions."""

from __future__ import annotations

from shared.tools.bench.partitions import mapping_config


def test_plain_and_dotted_pod_names_are_both_mapped_into_n_partitions() -> None:
    config = mapping_config(64)
    dest = "ksched.cluster.pods.{{partition(64,1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}"
    assert f'"ksched.cluster.pods.*.*": "{dest}"' in config
    assert f'"ksched.cluster.pods.*.*.>": "{dest}.>"' in config
