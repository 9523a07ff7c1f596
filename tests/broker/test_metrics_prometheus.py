"""A real Prometheus server scrapes ``rmq serve``'s metrics endpoint and ``rmq exporter`` pointed
at the real 4.9.8 broker, each under a real (C++) client whose consumer is stopped (SIGSTOP: still
registered, its offsets frozen) while messages are sent: a PromQL query over Prometheus' HTTP API
returns the lag the test created, and falls back to 0 once the consumer resumes."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.broker_drivers import Driver, run_driver, warmed_consumer
from tests.support.cli import RMQ, rmq_env
from tests.support.ports import claim
from tests.support.prom import prom_conf
from tests.support.prometheus import Prometheus, prometheus
from tests.support.serve import ServeProcess, wait_until

pytestmark = [pytest.mark.prometheus, pytest.mark.cpp]
SENT = 7


def create_lag(tmp: Path, namesrv: str, promql: str, server: Prometheus, consumer: Driver) -> None:
    """With ``consumer`` caught up (``promql`` 0 in Prometheus), stop it, send ``SENT`` messages and
    wait for ``promql`` to reach ``SENT``; then resume it and wait for 0."""
    wait_until(lambda: server.value(promql) == 0, 60, f"{promql} at 0 (the consumer's commit)")
    os.kill(consumer.proc.pid, signal.SIGSTOP)
    try:
        keys = [f"p{i}" for i in range(SENT)]
        run_driver(tmp, "produce", {"op": "produce", "namesrv": namesrv, "topic": "TopicP", "keys": keys})
        wait_until(lambda: server.value(promql) == SENT, 60, f"{promql} at {SENT}")
    finally:
        os.kill(consumer.proc.pid, signal.SIGCONT)
    wait_until(lambda: server.value(promql) == 0, 60, f"{promql} back at 0")


@contextmanager
def exporter(namesrv: str) -> Iterator[int]:
    port = claim()
    proc = subprocess.Popen(
        [*RMQ, "exporter", "-n", namesrv, "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=rmq_env(),
    )  # fmt: skip
    try:
        assert proc.stdout is not None and "metrics of" in proc.stdout.readline()
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_prometheus_scrapes_rmq_serve_and_queries_its_lag(tmp_path: Path) -> None:
    metrics_port = claim()
    with ServeProcess(tmp_path / "store", prom_conf(tmp_path, metrics_port)) as served:
        consumer = warmed_consumer(tmp_path, served.namesrv, "TopicP", "CG_P")
        try:
            with prometheus(tmp_path / "prom", {"rmq-serve": metrics_port}) as server:
                wait_until(lambda: server.targets_up() == {"rmq-serve": "up"}, 30, "the target up")
                lag = 'sum(rocketmq_consumer_lag_messages{consumer_group="CG_P",topic="TopicP"})'
                create_lag(tmp_path, served.namesrv, lag, server, consumer)
                # the counters went through Prometheus too: 1 warm-up + SENT in, as many out
                inbound = 'sum(rocketmq_messages_in_total{topic="TopicP"})'
                assert server.value(inbound) == 1 + SENT
                outbound = 'sum(rocketmq_messages_out_total{topic="TopicP",consumer_group="CG_P"})'
                wait_until(lambda: server.value(outbound) == 1 + SENT, 30, "messages out")
        finally:
            consumer.stop()


@pytest.mark.java
def test_prometheus_scrapes_rmq_exporter_over_the_real_4_9_8_broker(tmp_path: Path) -> None:
    from tests.support.oracle import real_cluster

    (tmp_path / "real").mkdir()
    with real_cluster(tmp_path / "real") as cluster:
        consumer = warmed_consumer(tmp_path, cluster.namesrv, "TopicP", "CG_P")
        try:
            with (
                exporter(cluster.namesrv) as port,
                # one scrape is a round of admin calls to the real broker: a second is too short loaded
                prometheus(tmp_path / "prom", {"rmq-exporter": port}, interval=5) as server,
            ):
                wait_until(lambda: server.targets_up() == {"rmq-exporter": "up"}, 60, "the target up")
                assert server.value('rmq_exporter_broker_up{broker="broker-a"}') == 1
                lag = 'sum(rocketmq_group_diff{group="CG_P",topic="TopicP"})'
                create_lag(tmp_path, cluster.namesrv, lag, server, consumer)
                assert server.value('rocketmq_producer_offset{topic="TopicP",broker="broker-a"}') == 1 + SENT
        finally:
            consumer.stop()
