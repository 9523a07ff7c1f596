"""The broker metrics' label settings and system-group test (5.1.1 ``BrokerMetricsManager``:
``init``'s ``metricsLabel`` parsing, ``isSystemGroup``)."""

from __future__ import annotations

from rmqcli.admin.export import is_system_group as admin_system_group
from rmqcli.broker.metrics.broker import is_system_group
from rmqcli.broker.metrics.config import MetricsConfig


def test_metrics_label_pairs_and_the_entries_skipped() -> None:
    config = MetricsConfig(label="region:north,bad,,:empty-key, k : v ,a:b:c")
    assert config.labels() == {"region": "north", "k": "v"}
    assert config.bad_labels() == ["bad", "a:b:c"]
    assert MetricsConfig(label="").labels() == {} and MetricsConfig(label="").bad_labels() == []


def test_the_metrics_system_group_ignores_case_mqadmin_does_not() -> None:
    assert is_system_group("CID_RMQ_SYS_TRANS") and is_system_group("cid_rmq_sys_x")
    assert not is_system_group("CID_RMQ_SY") and not is_system_group("my_CID_RMQ_SYS_")
    assert admin_system_group("CID_RMQ_SYS_X") and not admin_system_group("cid_rmq_sys_x")
