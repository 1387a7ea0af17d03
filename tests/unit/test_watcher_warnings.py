"""The watcher's warnings about unknown fields: one per event that brings them, none for
ksched's own writes that merely echo them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.watcher import warnings as warnings_module
from services.watcher.warnings import FieldWarnings
from shared.api.events import ClusterEvent, decode_cluster_event
from shared.tools.synthetic import make_pod


def event(pod: dict[str, Any], etype: str = "ADDED") -> ClusterEvent:
    meta = pod["metadata"]
    subject = f"ksched.cluster.pods.{meta['namespace']}.{meta['name']}"
    return decode_cluster_event(
        subject, json.dumps({"type": etype, "object": pod}).encode(), None, 1
    )


def typo(name: str = "p", uid: str = "") -> dict[str, Any]:
    pod = make_pod(name)
    pod["spec"]["nodeSelecter"] = {"disk": "ssd"}
    if uid:
        pod["metadata"]["uid"] = uid
    return pod


def test_an_event_with_unknown_fields_is_warned_about_with_every_path() -> None:
    pod = typo()
    pod["metadata"]["lables"] = {}
    assert FieldWarnings().to_warn(event(pod)) == (
        'unknown field "metadata.lables", unknown field "spec.nodeSelecter"'
    )


def test_no_warning_without_unknown_fields() -> None:
    assert FieldWarnings().to_warn(event(make_pod("p"))) is None


def test_the_same_fields_on_a_later_version_are_not_warned_again() -> None:
    """ksched's binding publishes the pod again, typo and all."""
    warnings = FieldWarnings()
    assert warnings.to_warn(event(typo()))
    bound = typo()
    bound["spec"]["nodeName"] = "n1"
    assert warnings.to_warn(event(bound, "MODIFIED")) is None


def test_new_fields_a_new_object_or_one_created_again_are_warned_about() -> None:
    warnings = FieldWarnings()
    assert warnings.to_warn(event(typo()))
    more = typo()
    more["spec"]["priorityClass"] = "high"
    assert warnings.to_warn(event(more, "MODIFIED"))  # another field
    assert warnings.to_warn(event(typo("q")))  # another object
    assert warnings.to_warn(event(typo(uid="other")))  # the same name, another uid
    assert warnings.to_warn(event(typo(uid="other"), "DELETED")) is None
    assert warnings.to_warn(event(typo(uid="other")))  # created again after its deletion


def test_the_fixed_object_forgets_its_warning() -> None:
    warnings = FieldWarnings()
    assert warnings.to_warn(event(typo()))
    assert warnings.to_warn(event(make_pod("p"), "MODIFIED")) is None
    assert len(warnings) == 0
    assert warnings.to_warn(event(typo(), "MODIFIED"))  # the typo is back


def test_what_it_remembers_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warnings_module, "MAX_REMEMBERED", 5)
    warnings = FieldWarnings()
    for i in range(8):
        assert warnings.to_warn(event(typo(f"p{i}")))
    assert len(warnings) == 5
