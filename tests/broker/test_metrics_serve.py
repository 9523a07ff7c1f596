"""``rmq serve`` with ``metricsExporterType=PROM``: the Prometheus endpoint over HTTP (every path,
HEAD, ``name[]``, gzip, OpenMetrics, ``/-/healthy``, bounded requests), the counters under a real
client's load (the C++ client: messages in and out equal what was sent and consumed, the
connections, RPC latency by request and response code, the consumer gauges), a port in use, and
an exporter type rmq does not implement (docs/metrics.md §1-§3)."""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.support.broker_drivers import Driver, run_driver, warmed_consumer
from tests.support.cli import RMQ, one_line_error, rmq_env
from tests.support.ports import claim
from tests.support.prom import get, prom_conf, samples, value
from tests.support.serve import ServeProcess, wait_until, write_conf


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("metrics")
    port = claim()
    with ServeProcess(tmp / "store", prom_conf(tmp, port, metricsLabel="region:north,bad")) as server:
        yield server, port


def test_every_path_answers_the_metrics_with_the_5_1_1_layout(served):
    server, port = served
    status, headers, body = get(port, "/")
    assert status == 200 and headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    text = body.decode()
    assert text.startswith("# TYPE target info\n# HELP target Target metadata\ntarget_info{} 1\n")
    names = {n for n, _, _ in samples(text)}
    assert {"rocketmq_broker_permission", "rocketmq_processor_watermark", "rocketmq_storage_size"} <= names
    assert {n for n, _, _ in samples(get(port, "/anything")[2].decode())} == names
    for _, labels, _ in samples(text):
        if labels.get("otel_scope_name") == "broker-meter" and "node_type" in labels:
            assert labels["cluster"] == "DefaultCluster" and labels["node_id"] == "broker-a"
            assert labels["region"] == "north"  # metricsLabel; the pair without ':' was skipped
    assert value(text, "rocketmq_broker_permission") == 6
    assert "rmq serve: warning: metricsLabel: 'bad' is not key:value; skipped" in server.output()
    assert f"metrics (Prometheus) on 127.0.0.1:{port}" in server.output()


def test_head_filter_gzip_openmetrics_and_health(served):
    _, port = served
    status, headers, body = get(port, method="HEAD")
    assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0
    text = get(port, "/metrics?name[]=rocketmq_broker_permission")[2].decode()
    assert {n for n, _, _ in samples(text)} == {"rocketmq_broker_permission"}
    assert "otel_scope_info{" in text  # the resource and scope blocks stay
    _, headers, body = get(port, headers={"Accept-Encoding": "gzip"})
    assert headers["Content-Encoding"] == "gzip" and b"rocketmq_broker_permission" in gzip.decompress(body)
    _, headers, body = get(port, headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
    assert body.decode().endswith("# EOF\n")
    assert get(port, "/-/healthy")[2] == b"Exporter is Healthy."


def test_bad_requests_are_answered_and_bounded(served):
    _, port = served
    with pytest.raises(urllib.error.HTTPError) as refused:
        get(port, method="POST")
    assert refused.value.code == 405
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nX-Big: " + b"x" * 20000 + b"\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 431 ")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"garbage\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400 ")


@pytest.mark.cpp
def test_counters_follow_a_real_clients_sends_and_pulls(tmp_path: Path):
    port = claim()
    keys = [f"m{i}" for i in range(30)]
    with ServeProcess(tmp_path / "store", prom_conf(tmp_path, port)) as server:
        ns = server.namesrv
        consumer = warmed_consumer(tmp_path, ns, "TopicM", "CG_M")
        try:
            sent = run_driver(
                tmp_path, "produce", {"op": "produce", "namesrv": ns, "topic": "TopicM", "keys": keys}
            )
            assert [e["status"] for e in sent if "key" in e] == [0] * len(keys)
            consumer.wait_for(lambda ev: {e.get("key") for e in ev} >= set(keys), 60, "every message")
            text = get(port)[2].decode()
            topic = {"topic": "TopicM", "is_system": "false"}
            assert value(text, "rocketmq_messages_in_total", message_type="normal", **topic) == 31
            assert value(text, "rocketmq_message_size_count", message_type="normal", **topic) == 31
            assert value(text, "rocketmq_messages_out_total", consumer_group="CG_M", **topic) == 31
            member = {
                "language": "cpp",
                "consume_mode": "push",
                "protocol_type": "remoting",
                "is_system": "false",
            }
            assert value(text, "rocketmq_consumer_connections", consumer_group="CG_M", **member) == 1
            # a producer is counted while it is connected (by language and version, no group)
            assert value(text, "rocketmq_producer_connections") is None  # the producing driver has gone
            load = Driver(tmp_path, "load", {"op": "load", "namesrv": ns, "topic": "TopicL", "prefix": "l"})
            try:
                load.wait_for(lambda ev: any("id" in e for e in ev), 60, "a load send")
                # its heartbeat (which registers it) may come after its first send
                wait_until(
                    lambda: (
                        value(get(port)[2].decode(), "rocketmq_producer_connections", language="cpp") == 1
                    ),
                    75,  # its heartbeats come every 30 s: the second one under load
                    "the producer counted",
                )
            finally:
                load.stop()
            sends = value(text, "rocketmq_rpc_latency_count", response_code="success", result="success")
            assert sends is not None and sends >= 31 + 2  # the sends and at least the heartbeats
            send_codes = {
                ls["request_code"] for n, ls, _ in samples(text) if n == "rocketmq_rpc_latency_count"
            }
            assert send_codes & {"send_message", "send_message_v2"} and "pull_message" in send_codes
            assert value(
                text, "rocketmq_rpc_latency_count", request_code="pull_message", is_long_polling="true"
            )
            # the consumer's commits reach the broker (every 5 s): nothing left to consume
            wait_until(
                lambda: (
                    value(get(port)[2].decode(), "rocketmq_consumer_lag_messages", consumer_group="CG_M") == 0
                ),
                30,
                "lag 0",
            )
            final = get(port)[2].decode()
            assert (
                value(final, "rocketmq_consumer_ready_messages", consumer_group="CG_M", topic="TopicM") == 0
            )
            assert value(final, "rocketmq_consumer_inflight_messages", consumer_group="CG_M") == 0
        finally:
            consumer.stop()
        throughput = value(get(port)[2].decode(), "rocketmq_throughput_in_total", **topic)
    records = [
        json.loads(line)
        for line in subprocess.run(
            [*RMQ, "dump-commitlog", str(tmp_path / "store"), "--topic", "TopicM", "--output", "jsonl"],
            capture_output=True, text=True, check=True, env=rmq_env(),
        ).stdout.splitlines()
    ]  # fmt: skip
    assert len(records) == 31 and throughput == sum(r["totalSize"] for r in records)


def test_a_metrics_port_in_use_stops_serve_with_one_line(tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        conf = prom_conf(tmp_path, port)
        proc = subprocess.run(
            [*RMQ, "serve", str(tmp_path / "store"), "--config", str(conf), "--namesrv-port", str(claim()),
             "--port", str(claim((0, 1, -2))), "--grpc-port", "0"],
            capture_output=True, text=True, timeout=120, env=rmq_env(),
        )  # fmt: skip
    assert proc.returncode != 0
    assert one_line_error(proc.stderr).endswith(
        f"metrics: cannot listen on 127.0.0.1:{port}: address already in use\n"
    )


def test_an_exporter_rmq_does_not_implement_is_named_and_nothing_listens(tmp_path: Path):
    port = claim()
    conf = write_conf(tmp_path / "broker.conf", metricsExporterType="LOG", metricsPromExporterPort=str(port))
    with ServeProcess(tmp_path / "store", conf) as server:
        assert (
            "metricsExporterType=LOG is not implemented (rmq exports PROM only): metrics off"
            in server.output()
        )
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_timer_and_pop_families_count_what_happened(tmp_path: Path):
    """Three 1 s timers delivered; two POPped messages, one acked, the other revived (docs/metrics.md
    §3.10-§3.11): the wheel's counters by real topic, the timers counted in under the timer topic
    as 5.1.1 counts them, the revive counters by group, topic, type and put status."""
    from tests.broker.test_timer_serve import delivered, tsend
    from tests.support import popwire as w

    port = claim()
    with ServeProcess(tmp_path / "store", prom_conf(tmp_path, port)) as server:
        addr = server.broker
        for topic in ("TopicTimer", "TopicPop"):
            assert w.create_topic(addr, topic, 1).code == 0
        for i in range(3):
            assert tsend(addr, {"UNIQ_KEY": f"T{i}", "TIMER_DELAY_SEC": "1"}).code == 0
        wait_until(lambda: len(delivered(addr)) == 3, 30, "the timers")
        text = get(port)[2].decode()
        assert value(text, "rocketmq_timer_enqueue_total", topic="TopicTimer") == 3
        assert value(text, "rocketmq_timer_dequeue_total", topic="TopicTimer") == 3
        timed = {"topic": "rmq_sys_wheel_timer", "message_type": "delay", "is_system": "true"}
        assert value(text, "rocketmq_messages_in_total", **timed) == 3
        assert value(text, "rocketmq_timer_enqueue_lag") == 0

        for i in range(2):
            assert w.send(addr, "TopicPop", f"p{i}".encode()).code == 0
        got = w.pop_until(addr, "GP", "TopicPop", 2, invisible=2000)
        assert len(got) == 2 and w.ack(addr, "GP", got[0]).code == 0
        pop = {"consumer_group": "GP", "topic": "TopicPop"}
        wait_until(
            lambda: value(get(port)[2].decode(), "rocketmq_pop_revive_retry_messages_total", **pop) == 1,
            30,
            "the revive of the message not acked",
        )
        text = get(port)[2].decode()
        assert value(
            text, "rocketmq_pop_revive_in_message_total", revive_message_type="CK", put_status="PUT_OK", **pop
        )
        assert value(text, "rocketmq_pop_revive_in_message_total", revive_message_type="ACK", **pop) == 1
        assert value(text, "rocketmq_pop_revive_out_message_total", revive_message_type="CK", **pop)
        assert value(text, "rocketmq_pop_revive_out_message_total", revive_message_type="ACK", **pop) == 1
        # the two POPped, then the revived one again from the pop-retry topic (is_retry=true)
        assert value(text, "rocketmq_messages_out_total", is_retry="false", **pop) == 2
        wait_until(lambda: w.pop_until(addr, "GP", "TopicPop", 1, timeout=2), 30, "the revived message")
        retried = value(get(port)[2].decode(), "rocketmq_messages_out_total", is_retry="true", **pop)
        assert retried == 1
        assert {ls["queue_id"] for n, ls, _ in samples(text) if n == "rocketmq_pop_revive_lag"} == {
            str(q) for q in range(8)
        }
