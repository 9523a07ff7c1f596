"""Reading Prometheus text in the metrics tests: samples with their labels, a family's sum, one
HTTP GET of an endpoint, and a broker.conf with ``metricsExporterType=PROM``."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

from tests.support.serve import write_conf

# a sample line: name, optional labels, value, optional timestamp (rmq serve's carry one)
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: (\d+))?$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
# the first lines of a 5.1.1 broker's exposition (docs/metrics.md §2.2, §9)
FIRST_SIX = [
    "# TYPE target info",
    "# HELP target Target metadata",
    "target_info{} 1",
    "# TYPE otel_scope_info info",
    "# HELP otel_scope_info Scope metadata",
    'otel_scope_info{otel_scope_name="broker-meter"} 1',
]


def prom_conf(tmp_path: Path, port: int, **extra: str) -> Path:
    """``tmp_path/broker.conf`` with the Prometheus endpoint on 127.0.0.1:``port``."""
    return write_conf(
        tmp_path / "broker.conf",
        metricsExporterType="PROM",
        metricsPromExporterHost="127.0.0.1",
        metricsPromExporterPort=str(port),
        **extra,
    )


def get(port: int, path: str = "/metrics", headers: dict | None = None, method: str = "GET"):  # type: ignore[no-untyped-def]
    """(status, headers, body) of one request to 127.0.0.1:``port``."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {}, method=method)
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.status, dict(answer.headers), answer.read()


INFO = ("target_info", "otel_scope_info")  # the resource and scope blocks, not families


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every sample line of a family (not ``INFO``'s)."""
    found = []
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match and not line.startswith("#") and match.group(1) not in INFO:
            found.append((match.group(1), dict(LABEL.findall(match.group(2) or "")), float(match.group(3))))
    return found


def value(text: str, name: str, **labels: str) -> float | None:
    """The sum of the samples of ``name`` whose labels include ``labels`` (None: no such sample)."""
    found = [v for n, ls, v in samples(text) if n == name and all(ls.get(k) == w for k, w in labels.items())]
    return sum(found) if found else None
