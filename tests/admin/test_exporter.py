"""``rmq exporter``: rocketmq-exporter's families from a live cluster over the admin protocol
(docs/metrics.md §4): against ``rmq serve`` under the C++ client's load (offsets, consumer diff
and connections, statistics, the runtime table), against the real 4.9.8 broker (any version), a
broker that stops answering (bounded scrape, ``rmq_exporter_broker_up`` 0), the HTTP endpoint and a
port in use."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.broker_drivers import run_driver, warmed_consumer
from tests.support.cli import RMQ, one_line_error, rmq_env, run_rmq
from tests.support.ports import claim
from tests.support.prom import samples, value
from tests.support.serve import ServeProcess, wait_until, write_conf


def scrape(namesrv: str, *extra: str) -> str:
    proc = run_rmq("exporter", "-n", namesrv, "--once", *extra, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.cpp
def test_a_served_cluster_under_a_real_clients_load(tmp_path: Path) -> None:
    keys = [f"e{i}" for i in range(20)]
    with ServeProcess(tmp_path / "store", write_conf(tmp_path / "broker.conf")) as server:
        ns = server.namesrv
        consumer = warmed_consumer(tmp_path, ns, "TopicE", "CG_E")
        try:
            run_driver(tmp_path, "produce", {"op": "produce", "namesrv": ns, "topic": "TopicE", "keys": keys})
            consumer.wait_for(lambda ev: {e.get("key") for e in ev} >= set(keys), 60, "every message")
            broker = {"cluster": "DefaultCluster", "broker": "broker-a"}
            diff = {"group": "CG_E", "topic": "TopicE", "countOfOnlineConsumers": "1", "msgModel": "1"}
            # the consumer commits its offsets every 5 s: then nothing is left behind
            wait_until(lambda: value(scrape(ns), "rocketmq_group_diff", **diff) == 0, 40, "diff 0")
            text = scrape(ns)
        finally:
            consumer.stop()
        assert value(text, "rocketmq_producer_offset", topic="TopicE", **broker) == 21
        assert value(text, "rocketmq_consumer_offset", topic="TopicE", group="CG_E", **broker) == 21
        count = [ls for n, ls, _ in samples(text) if n == "rocketmq_group_count" and ls["group"] == "CG_E"]
        assert len(count) == 1 and count[0]["caddr"].startswith("127.0.0.1:") and count[0]["localaddr"]
        assert value(text, "rocketmq_group_count", group="CG_E") == 1
        assert value(text, "rocketmq_producer_tps", topic="TopicE", **broker) is not None  # TOPIC_PUT_NUMS
        assert value(text, "rocketmq_consumer_tps", topic="TopicE", group="CG_E", **broker) is not None
        assert value(text, "rocketmq_topic_retry_offset", topic="%RETRY%CG_E", **broker) == 0
        runtime = {"cluster": "DefaultCluster", "brokerIP": server.broker, "brokerHost": ""}
        max_offset = value(text, "rocketmq_brokeruntime_commitlog_maxoffset", **runtime)
        assert max_offset is not None and max_offset > 0
        assert value(text, "rmq_exporter_broker_up", brokerIP=server.broker, broker="broker-a") == 1
        assert value(text, "rmq_exporter_scrape_errors") is None  # nothing failed
        # every family with HELP and TYPE before its samples
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("# HELP "):
                assert lines[i + 1] == f"# TYPE {line.split()[2]} gauge"


def test_a_broker_that_stops_answering_is_down_and_the_scrape_stays_bounded(tmp_path: Path) -> None:
    with ServeProcess(tmp_path / "a", write_conf(tmp_path / "a.conf")) as a:
        conf_b = write_conf(tmp_path / "b.conf", brokerName="broker-b")
        with ServeProcess(tmp_path / "b", conf_b, extra=["--no-namesrv", "--namesrv", a.namesrv]) as b:
            wait_until(
                lambda: value(scrape(a.namesrv), "rmq_exporter_broker_up", broker="broker-b") == 1, 30, "b"
            )
            assert b.proc is not None
            os.kill(b.proc.pid, signal.SIGSTOP)  # registered, its connections open, no answer
            try:
                started = time.monotonic()
                text = scrape(a.namesrv, "--timeout", "1", "--scrape-timeout", "10")
                took = time.monotonic() - started
            finally:
                os.kill(b.proc.pid, signal.SIGCONT)
    assert value(text, "rmq_exporter_broker_up", broker="broker-b") == 0
    assert value(text, "rmq_exporter_broker_up", broker="broker-a") == 1
    assert value(text, "rmq_exporter_scrape_errors", kind="network") >= 1
    assert not [
        ls
        for n, ls, _ in samples(text)
        if n.startswith("rocketmq_brokeruntime") and ls["brokerIP"] == b.broker
    ]
    assert took < 10 + 15, took  # the budget, and the interpreter's start


def test_the_http_endpoint_and_a_port_in_use(tmp_path: Path) -> None:
    with ServeProcess(tmp_path / "store", write_conf(tmp_path / "broker.conf")) as server:
        port = claim()
        proc = subprocess.Popen(
            [*RMQ, "exporter", "-n", server.namesrv, "--port", str(port)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=rmq_env(),
        )  # fmt: skip
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert (
                line.strip()
                == f"rmq exporter: metrics of {server.namesrv} on http://127.0.0.1:{port}/metrics"
            )
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as answer:
                assert answer.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
                text = answer.read().decode()
            assert value(text, "rmq_exporter_broker_up", broker="broker-a") == 1
            url = f"http://127.0.0.1:{port}/metrics?name[]=rmq_exporter_broker_up"
            with urllib.request.urlopen(url, timeout=30) as answer:
                assert {n for n, _, _ in samples(answer.read().decode())} == {"rmq_exporter_broker_up"}
            second = run_rmq("exporter", "-n", server.namesrv, "--port", str(port), timeout=60)
            assert second.returncode == 5
            assert one_line_error(second.stderr).endswith(
                f"exporter: cannot listen on 127.0.0.1:{port}: address already in use\n"
            )
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0


def test_no_name_server_is_a_metric_not_a_hang(tmp_path: Path) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    text = scrape(f"127.0.0.1:{port}", "--timeout", "1")
    assert value(text, "rmq_exporter_scrape_errors", kind="namesrv") == 1


@pytest.mark.java
def test_the_real_4_9_8_broker(tmp_path: Path) -> None:
    """Any version: the real 4.9.8 broker's runtime table gives every rocketmq_brokeruntime_*
    family (rocketmq-exporter was written against it), its statistics the rates."""
    from tests.support.oracle import clienttest_send, real_cluster

    with real_cluster(tmp_path) as cluster:
        clienttest_send(tmp_path, cluster.namesrv, "TopicR", 10)
        text = scrape(cluster.namesrv)
    names = {n for n, _, _ in samples(text)}
    # the keys a young 4.9.8 broker fills (putTps and putMessageDistributeTime come with its samples)
    always = ("commitlog_maxoffset commitlog_minoffset dispatch_behind_bytes put_message_size_total "
              "putmessage_times_total send_threadpoolqueue_capacity pull_threadpoolqueue_capacity "
              "commitlogdir_capacity_total commitlogdir_capacity_free remain_howmanydata_toflush "
              "gettotal_tps10 gettotal_tps60 gettotal_tps600 put_latency_99 msg_put_total_today_now "
              "earliest_message_timestamp commitlog_disk_ratio").split()  # fmt: skip
    assert {f"rocketmq_brokeruntime_{s}" for s in always} <= names
    total = value(text, "rocketmq_brokeruntime_commitlogdir_capacity_total")
    free = value(text, "rocketmq_brokeruntime_commitlogdir_capacity_free")
    assert total is not None and free is not None and 0 < free <= total  # "Total : 252.0 GiB, ..." in bytes
    broker = {"cluster": "DefaultCluster", "broker": "broker-a"}
    assert value(text, "rocketmq_producer_offset", topic="TopicR", **broker) == 10
    assert value(text, "rocketmq_producer_tps", topic="TopicR", **broker) is not None
    assert value(text, "rocketmq_producer_message_size", topic="TopicR", **broker) is not None
    assert value(text, "rocketmq_broker_tps", brokerIP=cluster.broker, broker="broker-a") is not None
    runtime = [ls for n, ls, _ in samples(text) if n == "rocketmq_brokeruntime_commitlog_maxoffset"]
    assert runtime and runtime[0]["des"] == "V4_9_8" and runtime[0]["broker_version"] == "409"
    assert value(text, "rmq_exporter_broker_up", broker="broker-a") == 1


def test_requests_are_signed_with_the_acl_keys_given(tmp_path: Path) -> None:
    """Under aclEnable, the broker refuses the unsigned runtime request (the broker is down for the
    exporter, the scrape says why) and answers the one signed with an account's keys."""
    from tests.support.acl import ACL, ADMIN, keys, serve_acl

    with serve_acl(tmp_path, ACL) as server:
        unsigned = scrape(server.namesrv)
        signed = scrape(server.namesrv, *keys(ADMIN))
    assert value(unsigned, "rmq_exporter_broker_up", broker="broker-a") == 0
    assert value(unsigned, "rmq_exporter_scrape_errors", kind="broker") >= 1
    assert value(signed, "rmq_exporter_broker_up", broker="broker-a") == 1
    assert value(signed, "rocketmq_brokeruntime_commitlog_maxoffset") is not None
