"""A real Prometheus server (Debian's ``prometheus``) for the metrics tests: started on a free
loopback port with a scrape configuration written here (every target each second by default), its TSDB under
the test's directory, stopped with SIGTERM; PromQL instant queries over its HTTP API
(``/api/v1/query``, https://prometheus.io/docs/prometheus/latest/querying/api/)."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.ports import claim
from tests.support.serve import wait_until


@dataclass
class Prometheus:
    port: int
    log: Path

    def query(self, promql: str) -> list[tuple[dict[str, str], float]]:
        """The instant vector ``promql`` evaluates to now: (labels, value) per series."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=30) as answer:
            doc = json.loads(answer.read())
        assert doc["status"] == "success", doc
        assert doc["data"]["resultType"] == "vector", doc
        return [(r["metric"], float(r["value"][1])) for r in doc["data"]["result"]]

    def value(self, promql: str) -> float | None:
        """The value of ``promql`` when it is one series, None when it is none."""
        found = self.query(promql)
        assert len(found) <= 1, found
        return found[0][1] if found else None

    def targets_up(self) -> dict[str, str]:
        """Each scrape job's target health ("up", "down", "unknown")."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/targets", timeout=30) as answer:
            doc = json.loads(answer.read())
        return {t["labels"]["job"]: t["health"] for t in doc["data"]["activeTargets"]}


def _config(jobs: dict[str, int], interval: int) -> str:
    lines = [
        "global:",
        f"  scrape_interval: {interval}s",
        f"  scrape_timeout: {interval}s",
        "scrape_configs:",
    ]
    for job, port in jobs.items():
        lines += [f"  - job_name: {job}", "    static_configs:", f"      - targets: ['127.0.0.1:{port}']"]
    return "\n".join(lines) + "\n"


@contextmanager
def prometheus(home: Path, jobs: dict[str, int], interval: int = 1) -> Iterator[Prometheus]:
    """Prometheus scraping ``127.0.0.1:port/metrics`` of each job every ``interval`` seconds (which
    is also the scrape's timeout), ready to query."""
    binary = shutil.which("prometheus")
    assert binary is not None  # the test carries the ``prometheus`` marker
    home.mkdir(parents=True, exist_ok=True)
    (home / "prometheus.yml").write_text(_config(jobs, interval))
    port = claim()
    log = home / "prometheus.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={home / 'prometheus.yml'}",
                f"--storage.tsdb.path={home / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = Prometheus(port, log)
    try:
        wait_until(lambda: proc.poll() is not None or _ready(port), 60, "Prometheus ready")
        assert proc.poll() is None, log.read_text()[-2000:]
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=5) as answer:
            return answer.status == 200
    except OSError:
        return False
