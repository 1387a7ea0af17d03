"""deploy/: the Grafana dashboard asks for metrics the services export, and Prometheus
scrapes each service on the port it serves /metrics on."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from shared.runtime import metrics
from shared.runtime.settings import DEFAULT_HTTP_PORTS

ROOT = Path(__file__).resolve().parents[2]
METRIC = re.compile(r"\b((?:scheduler|ksched)_[a-z_]+)")
SUFFIXES = ("_bucket", "_sum", "_count")


def exported_names() -> set[str]:
    """The metrics ksched declares (shared/runtime/metrics.py, one declaration each)."""
    return {m.name for m in vars(metrics).values() if isinstance(m, metrics.Metric)}


def test_dashboard_queries_only_exported_metrics() -> None:
    dashboard = json.loads((ROOT / "deploy/grafana/ksched.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    asked = set()
    for expr in exprs:
        for name in METRIC.findall(expr):
            for suffix in SUFFIXES:
                name = name.removesuffix(suffix)
            asked.add(name)
    assert asked and asked <= exported_names(), asked - exported_names()


def test_prometheus_scrapes_every_service_on_its_port() -> None:
    config = yaml.safe_load((ROOT / "deploy/prometheus.yml").read_text())
    scraped = {
        sd["names"][0]: sd["port"]
        for job in config["scrape_configs"]
        for sd in job["dns_sd_configs"]
    }
    assert scraped == DEFAULT_HTTP_PORTS


def test_every_declared_metric_is_served_by_some_service() -> None:
    sources = [
        *(ROOT / "services").rglob("*.py"),
        ROOT / "shared/runtime/service.py",
        ROOT / "shared/runtime/framework_metrics.py",  # the framework's, wired by services
    ]
    text = "\n".join(p.read_text() for p in sources)
    declared = {k for k, v in vars(metrics).items() if isinstance(v, metrics.Metric)}
    assert declared and {k for k in declared if f"metrics.{k}." not in text} == set()
