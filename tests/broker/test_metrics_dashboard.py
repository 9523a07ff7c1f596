"""The example Grafana dashboard of the README (docs/grafana/rmq-dashboard.json): valid JSON, and
every metric its queries name is one ``rmq serve`` (its meter, made over an in-process broker) or
``rmq exporter`` (its families) exports, so that a renamed family breaks this test, not the
dashboard of an operator."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from rmqcli.broker.metrics.broker import BrokerMetrics
from rmqcli.exporter import families
from tests.support import ROOT
from tests.support.controller import broker_controller

DASHBOARD = ROOT / "docs" / "grafana" / "rmq-dashboard.json"
FUNCTIONS = {"sum", "by", "rate", "max", "histogram_quantile", "le"}


def exported_names(tmp_path: Path) -> set[str]:
    with broker_controller(tmp_path / "store", [int(time.time() * 1000)]) as ctl:
        meter = BrokerMetrics(ctl).meter
    names = set()
    for instrument in meter.instruments:
        names.add(instrument.name)
        if instrument.kind == "histogram":
            names |= {f"{instrument.name}_{part}" for part in ("bucket", "count", "sum")}
    exporter = [
        *families.ORDER,
        *families.RUNTIME_FAMILIES.values(),
        families.BROKER_UP,
        families.SCRAPE_SECONDS,
    ]
    return names | {f.name for f in exporter}


def test_every_metric_of_the_dashboard_is_exported(tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    assert exprs
    used = set()
    for expr in exprs:
        without_labels = re.sub(r"\{[^}]*\}|\([^()]*\bby\b[^()]*\)|\[[^\]]*\]", " ", expr)
        used |= {w for w in re.findall(r"[a-zA-Z_][a-zA-Z0-9_]*", without_labels) if w not in FUNCTIONS}
    used -= {"topic", "consumer_group", "request_code", "group"}  # grouping labels
    assert used and used <= exported_names(tmp_path), used - exported_names(tmp_path)
