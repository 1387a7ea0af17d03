"""PodDisruptionBudgets on ksched.cluster.pdbs.<ns>.<name>: decoded and validated like
pods (bad ones are BadEvents, which the watcher reports), routed nowhere by the watcher,
and kept by the worker's informer (PdbLister) from the stream."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from services.worker.preempt import PdbLister
from shared.api.events import BadEvent, decode_cluster_event
from shared.api.pdb import PodDisruptionBudget
from shared.routing import route
from shared.runtime.informer import Informer
from shared.subjects import PDBS_PREFIX, pdb_subject
from shared.tools.synthetic import make_pdb

SUBJECT = pdb_subject("default", "db")


def encode(obj: Any, etype: str = "ADDED") -> bytes:
    return json.dumps({"type": etype, "object": obj}).encode()


def test_a_pdb_event_decodes_with_names_from_the_subject() -> None:
    pdb = make_pdb("db", {"app": "db"}, max_unavailable="25%")
    del pdb["metadata"]["namespace"]
    ev = decode_cluster_event(SUBJECT, encode(pdb), None, 7)
    assert ev.kind == "pdb"
    assert isinstance(ev.obj, PodDisruptionBudget)
    assert ev.obj.key == "default/db"
    assert ev.obj.spec.max_unavailable == "25%"


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"minAvailable": 1, "maxUnavailable": 1}, "cannot be both set"),
        ({"minAvailable": -1}, "non-negative"),
        ({"maxUnavailable": "lots"}, "percentage"),
        (
            {"selector": {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}},
            "selector",
        ),
    ],
)
def test_malformed_pdbs_are_bad_events(spec: dict[str, Any], reason: str) -> None:
    pdb = make_pdb("db", {"app": "db"})
    pdb["spec"].update(spec)
    with pytest.raises(BadEvent, match=reason):
        decode_cluster_event(SUBJECT, encode(pdb), None, 1)


def test_the_watcher_routes_a_pdb_nowhere() -> None:
    ev = decode_cluster_event(SUBJECT, encode(make_pdb("db", {"app": "db"})), None, 1)
    assert route(ev, frozenset({"default-scheduler"})) == ([], [])


@dataclass
class FakeMsg:
    subject: str
    data: bytes
    headers: dict[str, str] | None = None


def test_pdb_watch_keeps_the_latest_good_budget_per_subject() -> None:
    pdbs: list[PodDisruptionBudget] = []
    watch = Informer(None, (PDBS_PREFIX,), PdbLister(pdbs).on_change, "PDBs")  # type: ignore[arg-type]
    other = pdb_subject("default", "web")

    def feed(subject: str, data: bytes) -> None:
        watch.on_msg(FakeMsg(subject, data))  # type: ignore[arg-type]

    feed(SUBJECT, encode(make_pdb("db", {"app": "db"}, min_available=1)))
    feed(other, encode(make_pdb("web", {"app": "web"})))
    assert sorted(p.key for p in pdbs) == ["default/db", "default/web"]
    feed(SUBJECT, encode(make_pdb("db", {"app": "db"}), "DELETED"))
    assert [p.key for p in pdbs] == ["default/web"]
    feed(other, b"{not json")  # malformed: the outdated version goes too
    assert pdbs == []
