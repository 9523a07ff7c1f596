"""RocketMQ 5.1.1's topic attributes (``rmq updateTopic -a``) and 5.x group settings (``rmq
updateSubGroup -o/-p``) against ``rmq serve``: the answers, what topics.json and
subscriptionGroup.json keep (4.9.x shapes untouched), what the 5.x reads (GET_TOPIC_CONFIG,
GET_SUBSCRIPTIONGROUP_CONFIG) and rmq's commands show; ``AttributeParser`` and the alter rules
alone. The same requests beside the real 5.1.1 broker: test_admin_attributes_real.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rmqcli.admin.attributes import TOPIC_ATTRIBUTES, ParseError, parse_to_map, parse_to_string
from rmqcli.admin.retrypolicy import CUSTOMIZED_NEXT, PolicyError, parse_policy, policy_value
from rmqcli.broker.admin.topics import AttributeProblem, alter_attributes
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.admin.runner import rmq, rmq_fail
from tests.support import popwire as w
from tests.support.serve import ServeProcess, write_conf


# --- AttributeParser and alterCurrentAttributes alone -------------------------------------------
def test_parse_to_map_as_attribute_parser() -> None:
    assert parse_to_map("+message.type=FIFO,-queue.type") == {"+message.type": "FIFO", "-queue.type": ""}
    assert parse_to_map("") == {} and parse_to_map(None) == {}
    assert parse_to_map("+a=b=c") == {"+a": "b"}  # String.split: the third part is dropped
    assert parse_to_map("+a=1,") == {"+a": "1"}  # trailing empty parts dropped
    cases = {
        "message.type=FIFO": (
            "java.lang.RuntimeException",
            "add/alter attribute format is wrong: message.type",
        ),
        "x": ("java.lang.RuntimeException", "delete attribute format is wrong: x"),
        "+a=1,+a=2": ("java.lang.RuntimeException", "key duplication: +a"),
        "+a=": ("java.lang.ArrayIndexOutOfBoundsException", "Index 1 out of bounds for length 1"),
        "=": ("java.lang.ArrayIndexOutOfBoundsException", "Index 0 out of bounds for length 0"),
        "a,,b": ("java.lang.RuntimeException", "delete attribute format is wrong: a"),
    }
    for text, (cls, message) in cases.items():
        with pytest.raises(ParseError) as caught:
            parse_to_map(text)
        assert (caught.value.java_class, caught.value.message) == (cls, message), text
    assert parse_to_string({"+message.type": "FIFO", "-queue.type": ""}) == "+message.type=FIFO,-queue.type"


def test_alter_rules() -> None:
    assert alter_attributes(True, {}, {"+message.type": "FIFO"}) == {"message.type": "FIFO"}
    assert alter_attributes(False, {"message.type": "FIFO"}, {}) == {"message.type": "FIFO"}
    assert alter_attributes(False, {"message.type": "FIFO"}, {"-message.type": ""}) == {}
    problems = [
        (True, {}, "-message.type",
         "only add attribute is supported while creating topic. key: message.type"),
        (False, {}, "-message.type", "attempt to delete a nonexistent key: message.type"),
        (False, {}, "+queue.type=SimpleCQ", "attempt to update an unchangeable attribute. key: queue.type"),
        (True, {}, "+foo=1", "unsupported key: foo"),
        (True, {}, "+=1", "kv string format wrong."),
        (True, {}, "a+b=1", "kv string format wrong."),
        (False, {"message.type": "FIFO"}, "+message.type=NOPE",
         "value is not in set: [UNSPECIFIED, TRANSACTION, FIFO, DELAY, NORMAL]"),
    ]  # fmt: skip
    for create, current, text, message in problems:
        with pytest.raises(AttributeProblem, match=None) as caught:
            alter_attributes(create, current, parse_to_map(text))
        assert str(caught.value) == message, text
    assert TOPIC_ATTRIBUTES["queue.type"].universe == ("SimpleCQ", "BatchCQ")
    assert TOPIC_ATTRIBUTES["cleanup.policy"].universe == ("DELETE", "COMPACTION")


def test_retry_policy_as_the_bean() -> None:
    assert policy_value({}) == {"type": "CUSTOMIZED"}
    assert policy_value({"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 1000}}) == {
        "exponentialRetryPolicy": {"initial": 1000, "max": 7200000, "multiplier": 2},
        "type": "EXPONENTIAL",
    }
    assert policy_value({"customizedRetryPolicy": {}}) == {
        "customizedRetryPolicy": {"next": CUSTOMIZED_NEXT},
        "type": "CUSTOMIZED",
    }
    assert policy_value({"type": "NOPE"}) == {}  # fastjson: an unknown enum name reads as null
    assert policy_value({"type": 0}) == {"type": "EXPONENTIAL"}
    for bad in ("[1]", "{bad", '{"exponentialRetryPolicy":{"initial":"x"}}', "null"):
        with pytest.raises(PolicyError):
            parse_policy(bad)


# --- rmq serve ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    home = tmp_path_factory.mktemp("attributes")
    with ServeProcess(home / "store", write_conf(home / "broker.conf")) as server:
        yield server


def config_dir(server: ServeProcess) -> Path:
    return server.store / "config"


def topic_entry(server: ServeProcess, topic: str) -> dict:
    return json.loads((config_dir(server) / "topics.json").read_text())["topicConfigTable"][topic]


def create(addr: str, topic: str, attributes: str | None) -> tuple[int, str | None]:
    header = hd.CreateTopicRequestHeader(
        topic=topic, default_topic="TBW102", read_queue_nums=2, write_queue_nums=2, perm=6,
        topic_filter_type="SINGLE_TAG", attributes=attributes,
    )  # fmt: skip
    resp = w.call(addr, RC.UPDATE_AND_CREATE_TOPIC, header)
    return resp.code, resp.remark


def test_update_topic_attributes(served: ServeProcess) -> None:
    n, b = served.namesrv, served.broker
    out = rmq("updateTopic", "-n", n, "-b", b, "-t", "TF", "-a", "+message.type=FIFO")
    assert out == (
        f"create topic to {b} success.\n"
        "TopicConfig [topicName=TF, readQueueNums=8, writeQueueNums=8, perm=RW-, topicFilterType=SINGLE_TAG, "
        "topicSysFlag=0, order=false, attributes={+message.type=FIFO}]"
    )
    text = (config_dir(served) / "topics.json").read_text()
    assert (
        '"TF":{\n\t\t\t"attributes":{\n\t\t\t\t"message.type":"FIFO"\n\t\t\t},\n\t\t\t"order":false,' in text
    )
    # a topic without attributes is stored as 4.9.8 stores it, and shown as 4.9.8's mqadmin shows it
    out = rmq("updateTopic", "-n", n, "-b", b, "-t", "TN")
    assert out.endswith("order=false]")
    assert list(topic_entry(served, "TN")) == [
        "order", "perm", "readQueueNums", "topicFilterType", "topicName", "topicSysFlag", "writeQueueNums",
    ]  # fmt: skip
    # an update without -a keeps them (updateTopicPerm too); -message.type removes the key
    rmq("updateTopic", "-n", n, "-b", b, "-t", "TF", "-w", "4")
    assert topic_entry(served, "TF")["attributes"] == {"message.type": "FIFO"}
    assert topic_entry(served, "TF")["writeQueueNums"] == 4
    rmq("updateTopicPerm", "-n", n, "-b", b, "-t", "TF", "-p", "4")
    assert topic_entry(served, "TF")["attributes"] == {"message.type": "FIFO"}
    out = rmq("updateTopic", "-n", n, "-b", b, "-t", "TF", "-a", "+message.type=DELAY", "--json")
    assert json.loads(out)["config"]["attributes"] == {"+message.type": "DELAY"}
    assert topic_entry(served, "TF")["attributes"] == {"message.type": "DELAY"}
    rmq("updateTopic", "-n", n, "-b", b, "-t", "TF", "-a", "-message.type")
    assert "attributes" not in topic_entry(served, "TF")
    # refusals: SYSTEM_ERROR with 5.1.1's remark; a malformed -a is refused before sending
    code, err = rmq_fail("updateTopic", "-n", n, "-b", b, "-t", "TN", "-a", "+queue.type=BatchCQ")
    assert err.rstrip().endswith(
        "SYSTEM_ERROR(1): attempt to update an unchangeable attribute. key: queue.type"
    )
    code, err = rmq_fail("updateTopic", "-n", n, "-b", b, "-t", "TX", "-a", "message.type=FIFO")
    assert code == 2 and err.rstrip().endswith("add/alter attribute format is wrong: message.type")
    assert "TX" not in json.loads((config_dir(served) / "topics.json").read_text())["topicConfigTable"]


def test_attributes_on_the_wire(served: ServeProcess) -> None:
    b = served.broker
    assert create(b, "TW", "+message.type=TRANSACTION,+queue.type=SimpleCQ") == (RS.SUCCESS, None)
    assert create(b, "TW", "message.type=FIFO") == (
        RS.SYSTEM_ERROR,
        "java.lang.RuntimeException: add/alter attribute format is wrong: message.type, "
        "org.apache.rocketmq.common.attribute.AttributeParser.parseToMap(AttributeParser.java:51)",
    )
    assert create(b, "TW", "+message.type=BAD") == (
        RS.SYSTEM_ERROR,
        "value is not in set: [UNSPECIFIED, TRANSACTION, FIFO, DELAY, NORMAL]",
    )
    resp = w.call(b, RC.GET_TOPIC_CONFIG, hd.GetTopicConfigRequestHeader(topic="TW"))
    assert resp.code == RS.SUCCESS
    assert json.loads(resp.body)["attributes"] == {"message.type": "TRANSACTION", "queue.type": "SimpleCQ"}
    resp = w.call(b, RC.GET_TOPIC_CONFIG, hd.GetTopicConfigRequestHeader(topic="Nope"))
    assert (resp.code, resp.remark) == (RS.TOPIC_NOT_EXIST, "No topic in this broker. topic: Nope")
    resp = w.call(b, RC.GET_ALL_TOPIC_CONFIG)
    assert json.loads(resp.body)["topicConfigTable"]["TW"]["attributes"]["message.type"] == "TRANSACTION"


def test_update_sub_group_5x_settings(served: ServeProcess) -> None:
    n, b = served.namesrv, served.broker
    policy = '{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000,"max":60000,"multiplier":3}}'
    out = rmq("updateSubGroup", "-n", n, "-b", b, "-g", "G5", "-o", "true", "-r", "3", "-p", policy)
    assert out == (
        f"create subscription group to {b} success.\n"
        "SubscriptionGroupConfig{groupName=G5, consumeEnable=true, consumeFromMinEnable=false, "
        "consumeBroadcastEnable=false, consumeMessageOrderly=true, retryQueueNums=1, retryMaxTimes=3, "
        "groupRetryPolicy=GroupRetryPolicy{type=EXPONENTIAL, exponentialRetryPolicy=ExponentialRetryPolicy"
        "{initial=1000, max=60000, multiplier=3}, customizedRetryPolicy=null}, "
        "whichBrokerWhenConsumeSlowly=1, notifyConsumerIdsChangedEnable=true, groupSysFlag=0, "
        "consumeTimeoutMinute=15, subscriptionTopicSet=null}"
    )
    rmq("updateSubGroup", "-n", n, "-b", b, "-g", "G4")
    stored = json.loads((config_dir(served) / "subscriptionGroup.json").read_text())["subscriptionGroupTable"]
    assert stored["G5"] == {
        "brokerId": 0, "consumeBroadcastEnable": False, "consumeEnable": True, "consumeFromMinEnable": False,
        "consumeMessageOrderly": True, "consumeTimeoutMinute": 15, "groupName": "G5",
        "groupRetryPolicy": {"exponentialRetryPolicy": {"initial": 1000, "max": 60000, "multiplier": 3},
                             "type": "EXPONENTIAL"},
        "groupSysFlag": 0, "notifyConsumerIdsChangedEnable": True, "retryMaxTimes": 3, "retryQueueNums": 1,
        "whichBrokerWhenConsumeSlowly": 1,
    }  # fmt: skip
    assert list(stored["G4"]) == [  # a 4.9.x group keeps 4.9.x's nine keys
        "brokerId", "consumeBroadcastEnable", "consumeEnable", "consumeFromMinEnable", "groupName",
        "notifyConsumerIdsChangedEnable", "retryMaxTimes", "retryQueueNums", "whichBrokerWhenConsumeSlowly",
    ]  # fmt: skip
    assert (
        json.loads(rmq("getConsumerConfig", "-n", n, "-g", "G5", "--json"))[0]["config"]["groupRetryPolicy"][
            "type"
        ]
        == "EXPONENTIAL"
    )
    out = rmq("getConsumerConfig", "-n", n, "-g", "G5")
    assert f"{'consumeMessageOrderly':<40}=  true\n" in out
    assert f"{'groupRetryPolicy':<40}=  GroupRetryPolicy{{type=EXPONENTIAL, " in out
    assert "consumeMessageOrderly" not in rmq("getConsumerConfig", "-n", n, "-g", "G4")
    resp = w.call(b, RC.GET_SUBSCRIPTIONGROUP_CONFIG, hd.GetSubscriptionGroupConfigRequestHeader(group="G5"))
    assert json.loads(resp.body)["consumeMessageOrderly"] is True
    resp = w.call(
        b, RC.GET_SUBSCRIPTIONGROUP_CONFIG, hd.GetSubscriptionGroupConfigRequestHeader(group="Nope")
    )
    assert (resp.code, resp.remark) == (RS.SYSTEM_ERROR, "No group in this broker")
    code, err = rmq_fail("updateSubGroup", "-n", n, "-b", b, "-g", "GX", "-p", "{bad")
    assert code == 2 and "-p '{bad'" in err
    # a body's policy that does not read as the bean: refused, nothing stored
    body = json.dumps({"groupName": "GY", "groupRetryPolicy": {"exponentialRetryPolicy": {"max": "x"}}})
    resp = w.call(b, RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body.encode())
    assert resp.code == RS.SYSTEM_ERROR and resp.remark.startswith("groupRetryPolicy: ")


def test_attributes_and_settings_survive_a_restart(tmp_path: Path) -> None:
    conf = write_conf(tmp_path / "broker.conf")
    with ServeProcess(tmp_path / "store", conf) as server:
        rmq("updateTopic", "-n", server.namesrv, "-b", server.broker, "-t", "TR", "-a", "+message.type=FIFO")
        rmq("updateSubGroup", "-n", server.namesrv, "-b", server.broker, "-g", "GR", "-o", "true")
    with ServeProcess(tmp_path / "store", conf) as server:
        resp = w.call(server.broker, RC.GET_TOPIC_CONFIG, hd.GetTopicConfigRequestHeader(topic="TR"))
        assert json.loads(resp.body)["attributes"] == {"message.type": "FIFO"}
        assert create(server.broker, "TR", "-message.type") == (RS.SUCCESS, None)
        out = rmq("getConsumerConfig", "-n", server.namesrv, "-g", "GR")
        assert f"{'consumeMessageOrderly':<40}=  true\n" in out
