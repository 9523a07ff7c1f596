"""The Prometheus text of ``rmqcli.metrics.registry``, against what a 5.1.1 broker's
OpenTelemetry 1.26.0 exporter writes (docs/metrics.md §2.2-§2.4, whose §9 shows the real output)."""

from __future__ import annotations

import pytest

from rmqcli.metrics import registry
from rmqcli.metrics.registry import Meter, java_double
from tests.support.prom import FIRST_SIX


@pytest.mark.parametrize(
    ("value", "java"),
    [
        (50, "50.0"),
        (0, "0.0"),
        (6, "6.0"),
        (0.5, "0.5"),
        (27509530624, "2.7509530624E10"),  # metrics.md §2.2, observed
        (10_000_000, "1.0E7"),
        (9_999_999, "9999999.0"),
        (0.001, "0.001"),
        (0.00099, "9.9E-4"),
        (-3, "-3.0"),
        (123.456, "123.456"),
        (float("inf"), "Infinity"),
    ],
)
def test_values_print_as_java_prints_a_double(value, java):
    assert java_double(value) == java


def meter() -> Meter:
    return Meter({"node_type": "broker", "cluster": "DefaultCluster", "node_id": "broker-a"})


def test_layout_scope_first_labels_sorted_type_before_help_and_the_scrape_time():
    m = meter()
    counter = m.counter("rocketmq_messages_in_total", "Total number of incoming messages")
    counter.add(3, topic="T", message_type="normal", is_system=False)
    m.gauge("rocketmq_broker_permission", "Broker permission", lambda: [({}, 6)])
    m.gauge("rocketmq_consumer_lag_messages", "Consumer lag messages", lambda: [])  # no point: left out
    lines = m.render(1796035512520).splitlines()
    assert lines[:6] == FIRST_SIX
    assert lines[6:] == [
        "# TYPE rocketmq_messages_in_total counter",
        "# HELP rocketmq_messages_in_total Total number of incoming messages",
        'rocketmq_messages_in_total{otel_scope_name="broker-meter",cluster="DefaultCluster",is_system="false",'
        'message_type="normal",node_id="broker-a",node_type="broker",topic="T"} 3.0 1796035512520',
        "# TYPE rocketmq_broker_permission gauge",
        "# HELP rocketmq_broker_permission Broker permission",
        'rocketmq_broker_permission{otel_scope_name="broker-meter",cluster="DefaultCluster",node_id="broker-a",'
        'node_type="broker"} 6.0 1796035512520',
    ]


def test_histograms_count_sum_then_cumulative_buckets_with_inclusive_bounds():
    m = Meter({})
    h = m.histogram("rocketmq_rpc_latency", "Rpc latency", (1, 3, 5), protocol_type="remoting")
    for ms in (0, 1, 2, 3, 4, 900):
        h.record(ms, request_code="pull_message")
    text = m.render(5)
    labels = 'otel_scope_name="broker-meter",protocol_type="remoting",request_code="pull_message"'
    expected = [
        f"rocketmq_rpc_latency_count{{{labels}}} 6.0 5",
        f"rocketmq_rpc_latency_sum{{{labels}}} 910.0 5",
        f'rocketmq_rpc_latency_bucket{{{labels},le="1.0"}} 2.0 5',  # 0 and 1: le is inclusive
        f'rocketmq_rpc_latency_bucket{{{labels},le="3.0"}} 4.0 5',
        f'rocketmq_rpc_latency_bucket{{{labels},le="5.0"}} 5.0 5',
        f'rocketmq_rpc_latency_bucket{{{labels},le="+Inf"}} 6.0 5',
    ]
    assert text.splitlines()[-6:] == expected


def test_openmetrics_seconds_and_eof_and_a_name_filter():
    m = meter()
    m.gauge("a_gauge", "A", lambda: [({}, 1)])
    m.gauge("b_gauge", "B", lambda: [({}, 2)])
    text = m.render(1796035573880, openmetrics=True, names=frozenset({"b_gauge"}))
    assert text.endswith("# EOF\n") and "a_gauge" not in text
    assert 'b_gauge{otel_scope_name="broker-meter",cluster="DefaultCluster",node_id="broker-a",' in text
    assert text.splitlines()[-2].endswith(" 2.0 1796035573.880")


def test_label_values_are_escaped():
    m = Meter({})
    m.counter("c_total", "C").add(1, topic='a"b\\c\nd')
    assert 'topic="a\\"b\\\\c\\nd"' in m.render(0)


def test_attribute_sets_beyond_the_cardinality_limit_are_dropped(monkeypatch):
    monkeypatch.setattr(registry, "CARDINALITY", 3)
    m = Meter({})
    counter = m.counter("c_total", "C")
    for i in range(5):
        counter.add(1, topic=f"T{i}")
    counter.add(1, topic="T0")  # a known set still counts
    samples = [line for line in m.render(0).splitlines() if line.startswith("c_total{")]
    assert len(samples) == 3 and 'topic="T0"} 2.0 0' in samples[0]


def test_a_failing_gauge_costs_its_family_only():
    m = Meter({})

    def broken():  # type: ignore[no-untyped-def]
        raise RuntimeError("boom")

    m.gauge("broken_gauge", "X", broken)
    m.gauge("fine_gauge", "Y", lambda: [({}, 1)])
    text = m.render(0)
    assert "broken_gauge" not in text and "fine_gauge{" in text
