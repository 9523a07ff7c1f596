"""The request headers the admin commands send, built from the typed classes of
``rmqcli.remoting.headers``: the ext fields on the wire are those of mqadmin 4.9.7's header classes
(PROTOCOL.md A.5, B.2-B.7), checked here request by request as the name server and broker of
``rmq serve`` (``tests.admin.adminserver``) receive them; and the header classes themselves behave
as the keyword-only value classes they declare, while their module stays cheap to import."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from rmqcli import errors
from rmqcli.admin import acl, broker, group, message, topic
from rmqcli.admin.session import AdminSession
from rmqcli.errors import RmqError
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codes import RequestCode as RC
from tests.admin.adminserver import AdminServer


@pytest.fixture(scope="module")
def sent() -> Iterator[dict[int, list[dict[str, str]]]]:
    """Every admin request sent while the commands below run, ext fields by request code."""
    with AdminServer((("DefaultCluster", "broker-a", 0),)) as server, AdminSession([server.namesrv]) as s:
        addr = server.broker("broker-a").addr

        def attempt(fn, *args, **kwargs):  # what is sent matters here, not the answers
            try:
                return fn(*args, **kwargs)
            except RmqError as exc:
                return exc

        attempt(topic.update_topic, s, "T", cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        attempt(topic.update_topic, s, "O", broker_addr=addr, order=True, write_queue_nums=3)
        attempt(topic.topic_status, s, "T")
        attempt(topic.update_order_conf, s, "T", "delete", None)
        server.add_consumer("G", "1.2.3.4@c1", {"T": "*"})
        sent = message.send_message(s, "T", "hello", keys="k1", tags="ta", broker_name="broker-a", queue_id=1)
        attempt(group.consume_stats, s, "G", "T")
        attempt(group.producer_connection, s, "P", "T")
        attempt(group.running_info, s, "G", "1.2.3.4@c1", True)
        attempt(group.reset_offset_old, s, "G", "T", 0, True)
        attempt(group.reset_offset_by_time, s, "G", "T", "now")
        attempt(group.stats_all, s, "T")
        attempt(group.broker_consume_stats, s, addr, is_order=True)
        attempt(group.delete_sub_group, s, "G3", cluster="DefaultCluster", remove_offset=True)
        attempt(broker.wipe_write_perm, s, "broker-a")
        attempt(broker.add_write_perm, s, "broker-a")
        attempt(message.print_msg, s, "T", "ta")
        attempt(message.print_msg_by_queue, s, "T", "broker-a", 1, begin=5)
        attempt(message.query_msg_by_key, s, "T", "k1")
        attempt(message.query_msg_by_id, s, sent.offset_msg_id)
        attempt(message.consume_message_directly, s, "G", "1.2.3.4@c1", "T", sent.msg_id)
        attempt(message.query_cq, s, "T", 0, 1, 2, addr, "G")
        attempt(acl.update_acl_config, s, [addr], access_key="ak", secret_key="s", admin=True, group_perms=[])
        attempt(acl.delete_acl_config, s, [addr], "ak")
        attempt(acl.update_global_white_addr, s, [addr], "10.*", "/x/acl.yml")
        by_code: dict[int, list[dict[str, str]]] = {}
        for _, command in server.commands:
            by_code.setdefault(command.code, []).append(command.ext_fields)
        yield by_code


TOPIC_CONFIG = {"topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
PULL = {"commitOffset": "0", "suspendTimeoutMillis": "20000", "subVersion": "0", "expressionType": "TAG"}
ALL_TIME = {"beginTimestamp": "0", "endTimestamp": "9223372036854775807"}
EXPECTED = [
    (RC.UPDATE_AND_CREATE_TOPIC, {"topic": "T", "defaultTopic": "TBW102", "readQueueNums": "2",
                                  "writeQueueNums": "2", "perm": "6", **TOPIC_CONFIG}),
    (RC.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "O"}),
    (RC.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "O", "value": "broker-a:3"}),
    (RC.DELETE_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"}),
    (RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}),
    (RC.GET_TOPIC_STATS_INFO, {"topic": "T"}),
    (RC.GET_CONSUME_STATS, {"consumerGroup": "G", "topic": "T"}),
    (RC.GET_CONSUME_STATS, {"consumerGroup": "G"}),
    (RC.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "P"}),
    (RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "G"}),
    (RC.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "G", "clientId": "1.2.3.4@c1", "jstackEnable": "true"}),
    (RC.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": "T", "queueId": "0", "timestamp": "0"}),
    (RC.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": "T", "queueId": "1", "timestamp": "5"}),
    (RC.GET_MIN_OFFSET, {"topic": "T", "queueId": "1"}),
    (RC.GET_MAX_OFFSET, {"topic": "T", "queueId": "1"}),
    (RC.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "T", "queueId": "0", "commitOffset": "0",
                                 "bname": "broker-a"}),
    (RC.INVOKE_BROKER_TO_RESET_OFFSET, {"topic": "T", "group": "G", "timestamp": "-1", "isForce": "true"}),
    (RC.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "T"}),
    (RC.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS", "statsKey": "T"}),
    (RC.VIEW_BROKER_STATS_DATA, {"statsName": "GROUP_GET_NUMS", "statsKey": "T@G"}),
    (RC.GET_BROKER_CONSUME_STATS, {"isOrder": "true"}),
    (RC.DELETE_SUBSCRIPTIONGROUP, {"groupName": "G3", "removeOffset": "true"}),
    (RC.DELETE_TOPIC_IN_BROKER, {"topic": "%RETRY%G3"}),
    (RC.DELETE_TOPIC_IN_NAMESRV, {"topic": "%DLQ%G3", "clusterName": "DefaultCluster"}),
    (RC.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}),
    (RC.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}),
    (RC.PULL_MESSAGE, {"consumerGroup": "TOOLS_CONSUMER", "topic": "T", "queueId": "1", "queueOffset": "0",
                       "maxMsgNums": "32", "sysFlag": "4", "subscription": "ta", "bname": "broker-a",
                       **PULL}),
    (RC.QUERY_MESSAGE, {"topic": "T", "key": "k1", "maxNum": "64", **ALL_TIME}),
    (RC.QUERY_CONSUME_QUEUE, {"topic": "T", "queueId": "0", "index": "1", "count": "2",
                              "consumerGroup": "G"}),
    (RC.UPDATE_AND_CREATE_ACL_CONFIG, {"accessKey": "ak", "secretKey": "s", "admin": "true",
                                       "groupPerms": ""}),
    (RC.DELETE_ACL_CONFIG, {"accessKey": "ak"}),
    (RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": "10.*", "aclFileFullPath": "/x/acl.yml"}),
]  # fmt: skip
IDS = [f"{code.name}-{i}" for i, (code, _) in enumerate(EXPECTED)]


@pytest.mark.parametrize(("code", "ext"), EXPECTED, ids=IDS)
def test_admin_requests_carry_the_java_header_fields(sent, code: RC, ext: dict[str, str]) -> None:
    assert ext in sent[code], sent.get(code)


def test_requests_with_varying_values(sent) -> None:
    """The producer's send (V2 letters), unregister, view-by-id and consume-directly requests."""
    [send] = sent[RC.SEND_MESSAGE_V2]
    fixed = {k: v for k, v in send.items() if k not in "agi"}
    assert fixed == {"b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "h": "0", "j": "0", "k": "false",
                     "m": "false", "n": "broker-a"}  # fmt: skip
    assert send["a"].isdigit() and send["g"].isdigit()  # producer group: the current millis
    assert send["i"].startswith("KEYS\x01k1\x02UNIQ_KEY\x01") and send["i"].endswith(
        "\x02WAIT\x01true\x02TAGS\x01ta"
    )
    [unregister] = sent[RC.UNREGISTER_CLIENT]
    assert sorted(unregister) == ["clientID", "producerGroup"] and unregister["producerGroup"] == send["a"]
    assert [list(v) for v in sent[RC.VIEW_MESSAGE_BY_ID]] == [["offset"]]
    [direct] = sent[RC.CONSUME_MESSAGE_DIRECTLY]
    assert (direct["consumerGroup"], direct["clientId"], len(direct["msgId"])) == ("G", "1.2.3.4@c1", 32)
    unique = [q for q in sent[RC.QUERY_MESSAGE] if "_UNIQUE_KEY_QUERY" in q]
    assert unique and all(q["_UNIQUE_KEY_QUERY"] == "true" and q["maxNum"] == "32" for q in unique)


def test_header_classes_are_keyword_only_values() -> None:
    a = hd.GetMaxOffsetRequestHeader(topic="t", queue_id=1)
    assert (
        a
        == hd.GetMaxOffsetRequestHeader(topic="t", queue_id=1)
        != hd.GetMaxOffsetRequestHeader(topic="t", queue_id=2)
    )
    assert repr(a) == "GetMaxOffsetRequestHeader(topic='t', queue_id=1, committed=None)"
    with pytest.raises(TypeError):
        hd.GetMaxOffsetRequestHeader(topic="t")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        hd.GetMaxOffsetRequestHeader("t", 1)  # type: ignore[misc]
    with pytest.raises(TypeError):
        hash(a)
    with pytest.raises(AttributeError):
        a.queueId = 3  # type: ignore[attr-defined]
    assert hd.UpdateConsumerOffsetRequestHeader.from_ext_fields(
        {"consumerGroup": "g", "topic": "t", "queueId": "0", "commitOffset": "7"}
    ) == hd.UpdateConsumerOffsetRequestHeader(consumer_group="g", topic="t", queue_id=0, commit_offset=7)
    assert hd.HeaderError is errors.HeaderError and issubclass(hd.HeaderError, errors.RmqError)


def test_header_module_is_light() -> None:
    """No dataclass machinery at import: classes get their ``__init__`` and decoder on first use."""
    code = (
        "import sys, rmqcli.remoting.headers; print('dataclasses' in sys.modules, 'inspect' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
