"""``rmqcli.admin`` as a library: name server resolution (protocol.md C.1), the text helpers of C.4,
and the operations' data against the name server and brokers of ``rmq serve``
(``tests.admin.adminserver``)."""

from __future__ import annotations

import pytest

from rmqcli.admin import broker, topic
from rmqcli.admin.session import NAMESRV_HINT, AdminSession, resolve_namesrv
from rmqcli.cli.admin import format as fmt
from rmqcli.errors import NotFoundError, UsageError
from tests.admin.adminserver import AdminServer


def test_resolve_namesrv() -> None:
    assert resolve_namesrv("a:1; b:2;", {}) == ["a:1", "b:2"]
    assert resolve_namesrv(None, {"NAMESRV_ADDR": "c:3"}) == ["c:3"]
    assert resolve_namesrv("a:1", {"NAMESRV_ADDR": "c:3"}) == ["a:1"]
    with pytest.raises(UsageError, match="No name server address"):
        resolve_namesrv(None, {})
    assert "NAMESRV_ADDR" in NAMESRV_HINT
    with pytest.raises(UsageError):
        resolve_namesrv("nohostport", {})


def test_perm_and_java_strings() -> None:
    assert [topic.perm_to_string(p) for p in (6, 4, 2, 7, 0)] == ["RW-", "R--", "-W-", "RWX", "---"]
    assert fmt.java_map({0: "h:1", 1: "h:2"}) == "{0=h:1, 1=h:2}"
    assert fmt.java_list(["a:1", "b:2"]) == "[a:1, b:2]"


def test_operations_return_data() -> None:
    with AdminServer() as server, AdminSession(server.namesrv.split(";")) as s:
        result = topic.update_topic(s, "T", cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        assert result.brokers == [server.broker("broker-a").addr, server.broker("broker-b").addr]
        assert "T" in topic.topic_list(s).topics
        rows = topic.topic_status(s, "T")
        assert [(r.broker_name, r.queue_id) for r in rows] == [
            ("broker-a", 0), ("broker-a", 1), ("broker-b", 0), ("broker-b", 1)
        ]  # fmt: skip
        assert topic.topic_cluster_list(s, "T") == ["DefaultCluster"]
        assert [r.broker_name for r in topic.route_rows(topic.topic_route(s, "T"))] == [
            "broker-a",
            "broker-b",
        ]
        clusters = broker.cluster_list(s)
        assert [(c.broker_name, c.broker_id) for c in clusters] == [("broker-a", 0), ("broker-b", 0)]
        assert clusters[0].runtime["brokerVersionDesc"] == "V4_9_7"
        assert broker.clean_expired_cq(s, None, "DefaultCluster").ok
        with pytest.raises(NotFoundError):
            s.master_addrs_of_cluster("Other")
        # one SyncClient for everything: one connection per listener
        assert server.connections == {"namesrv": 1, **{b.addr: 1 for b in server.brokers}}


def test_allocate_averagely() -> None:
    with AdminServer((("C", "b", 0),)) as server, AdminSession([server.namesrv]) as s:
        server.create_topic(server.broker("b"), "T", 5, 5)
        result = topic.allocate_mq(s, "T", ["x", "y"])
        assert sorted(len(v) for v in result.values()) == [2, 3]
        assert len(result["x"]) == 3  # AllocateMessageQueueAveragely: the first consumers take the extra
        only = topic.allocate_mq(s, "T", ["x", "y", "z", "u", "v", "w"])
        assert sorted(len(v) for v in only.values()) == [0, 1, 1, 1, 1, 1]
