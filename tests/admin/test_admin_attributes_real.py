"""RocketMQ 5.1.1's topic attributes and 5.x group settings in ``rmq serve`` beside the real 5.1.1
broker (``../shared/rocketmq-5.1.1``): the same UPDATE_AND_CREATE_TOPIC requests (``attributes``
header field) and UPDATE_AND_CREATE_SUBSCRIPTIONGROUP bodies to both give the same codes and
remarks, the same attributes in GET_TOPIC_CONFIG, and the same keys and values in topics.json and
subscriptionGroup.json; then the real 5.1.1 mqadmin against ``rmq serve``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.admin.runner import rmq
from tests.support import popwire as w
from tests.support.oracle5 import KIT5, kit5_env, real_cluster5
from tests.support.serve import ServeProcess, write_conf

pytestmark = [pytest.mark.java, pytest.mark.java5]

# (topic, attributes header): in this order to each broker; parse errors, the alter rules in
# 5.1.1's order (HashMap order decides which of several problems is named), creation vs update
TOPIC_REQUESTS = [
    ("TA", "+message.type=FIFO"),
    ("TA", "+message.type=DELAY"),
    ("TA", "+queue.type=SimpleCQ"),
    ("TA", "+message.type=BAD"),
    ("TA", "+foo=bar"),
    ("TA", "-nothere"),
    ("TA", None),
    ("TA", ""),
    ("TA", "+message.type=UNSPECIFIED"),
    ("TA", "-message.type"),
    ("TA", "+message.type=TRANSACTION"),
    ("TB", "-message.type"),
    ("TC", "+queue.type=SimpleCQ,+cleanup.policy=DELETE,+message.type=NORMAL"),
    ("TC", "+cleanup.policy=DELETE"),
    ("TC", "-queue.type"),
    ("TD", "+message.type=FIFO,-message.type"),
    ("TE", "+message.type=FIFO,+foo=1,+bar=2"),
    ("TE", "+cleanup.policy=NOPE"),
    ("TE", "message.type=FIFO"),
    ("TE", "+message.type="),
    ("TE", "="),
    ("TE", "+a=1,+a=2"),
    ("TE", "x"),
    ("TE", "+=FIFO"),
    ("TE", "a+b=c"),
    ("TE", "++a=1"),
    ("TE", ",,"),
    ("TF", "+message.type=FIFO,"),
]

GROUP_BODIES = {
    "G5": {"groupName": "G5", "consumeMessageOrderly": True, "retryMaxTimes": 3,
           "groupRetryPolicy": {"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 1000}}},
    "GC": {"groupName": "GC", "consumeMessageOrderly": False, "consumeTimeoutMinute": 15, "groupSysFlag": 0,
           "groupRetryPolicy": {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000, 2000]}}},
    "GN": {"groupName": "GN", "groupRetryPolicy": {"type": "NOPE"}, "consumeTimeoutMinute": 7},
    "GD": {"groupName": "GD", "groupRetryPolicy": {"customizedRetryPolicy": {}}, "groupSysFlag": 0},
}  # fmt: skip


def create(addr: str, topic: str, attributes: str | None) -> tuple[int, str | None]:
    header = hd.CreateTopicRequestHeader(
        topic=topic, default_topic="TBW102", read_queue_nums=2, write_queue_nums=2, perm=6,
        topic_filter_type="SINGLE_TAG", topic_sys_flag=0, order=False, attributes=attributes,
    )  # fmt: skip
    resp = w.call(addr, RC.UPDATE_AND_CREATE_TOPIC, header)
    return resp.code, answer_remark(resp)


def answer_remark(resp: Any) -> str | None:
    """The remark of an error; a success's is none (Java's is ``not set any response code``, the
    one ``createResponseCommand`` starts with, in 4.9.8 too)."""
    return None if resp.code == RS.SUCCESS else resp.remark


def attributes_in_order(addr: str, topic: str) -> list[tuple[str, str]] | None:
    """GET_TOPIC_CONFIG's ``attributes``, in the order the body has them."""
    resp = w.call(addr, RC.GET_TOPIC_CONFIG, hd.GetTopicConfigRequestHeader(topic=topic))
    if resp.code != RS.SUCCESS:
        return None
    pairs = dict(json.loads(resp.body, object_pairs_hook=list)).get("attributes")
    return None if pairs is None else [tuple(kv) for kv in pairs]


def scenario(addr: str, config_dir: Path) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for i, (topic, attributes) in enumerate(TOPIC_REQUESTS):
        seen[f"{i}:{topic}:{attributes}"] = create(addr, topic, attributes)
    for topic in ("TA", "TC", "TD"):
        seen[f"get:{topic}"] = attributes_in_order(addr, topic)
    resp = w.call(addr, RC.GET_ALL_TOPIC_CONFIG)
    table = jb.decode(jb.TopicConfigSerializeWrapper, resp.body).topic_config_table
    seen["all:TA"] = table["TA"].attributes
    for name, body in GROUP_BODIES.items():
        resp = w.call(addr, RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json.dumps(body).encode())
        seen[f"group:{name}"] = (resp.code, answer_remark(resp))
    topics = json.loads((config_dir / "topics.json").read_text())["topicConfigTable"]
    for topic in ("TA", "TC"):
        seen[f"topics.json:{topic}"] = topics[topic]
    groups = json.loads((config_dir / "subscriptionGroup.json").read_text())["subscriptionGroupTable"]
    for name in GROUP_BODIES:
        seen[f"subscriptionGroup.json:{name}"] = groups[name]
    return seen


def test_attributes_and_group_settings_match_the_real_broker(tmp_path: Path) -> None:
    (tmp_path / "rmq").mkdir()
    with ServeProcess(tmp_path / "rmq" / "store", write_conf(tmp_path / "broker.conf")) as server:
        ours = scenario(server.broker, tmp_path / "rmq" / "store" / "config")
    home = tmp_path / "real"
    home.mkdir()
    with real_cluster5(home) as real:
        theirs = scenario(real.broker, home / "store" / "config")
        # rmq's own commands against the real 5.1.1 broker: the same stored group
        rmq("updateSubGroup", "-n", real.namesrv, "-b", real.broker, "-g", "GR", "-o", "true",
            "-p", '{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[1000,5000]}}')  # fmt: skip
        rmq("updateTopic", "-n", real.namesrv, "-b", real.broker, "-t", "TR", "-a", "+message.type=FIFO")
        stored = json.loads((home / "store" / "config" / "subscriptionGroup.json").read_text())
        real_gr = stored["subscriptionGroupTable"]["GR"]
        assert attributes_in_order(real.broker, "TR") == [("message.type", "FIFO")]
    assert ours == theirs
    assert real_gr["consumeMessageOrderly"] is True
    assert real_gr["groupRetryPolicy"] == {
        "customizedRetryPolicy": {"next": [1000, 5000]},
        "type": "CUSTOMIZED",
    }


POLICY = '{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000}}'


def mqadmin(env: dict[str, str], *args: str) -> str:
    proc = subprocess.run(
        [str(KIT5 / "bin" / "mqadmin"), *args], capture_output=True, text=True, env=env, timeout=120
    )
    return proc.stdout


def test_real_mqadmin_5_against_rmq_serve(tmp_path: Path) -> None:
    """5.1.1's mqadmin: ``updateTopic -a +message.type=FIFO``, ``updateSubGroup -o true -p ..`` and
    ``getConsumerConfig`` print what rmq's commands print, and ``rmq serve`` stores 5.1.1's keys."""
    store = tmp_path / "store"
    with ServeProcess(store, write_conf(tmp_path / "broker.conf")) as server:
        env = kit5_env(tmp_path)
        n = server.namesrv
        out = mqadmin(
            env, "updateTopic", "-n", n, "-b", server.broker, "-t", "TF", "-a", "+message.type=FIFO"
        )
        assert f"create topic to {server.broker} success." in out
        assert "attributes={+message.type=FIFO}]" in out
        ours = rmq("updateTopic", "-n", n, "-b", server.broker, "-t", "TF", "-a", "+message.type=FIFO")
        assert out.endswith(ours + "\n")  # mqadmin's ends with a newline; its JVM's notices come first
        args = ("updateSubGroup", "-n", n, "-b", server.broker, "-g", "GF", "-o", "true", "-p", POLICY)
        out = mqadmin(env, *args)
        assert out.endswith(rmq(*args))  # the same text: 5.1.1's toString
        assert "consumeMessageOrderly=true" in out
        assert mqadmin(env, "getConsumerConfig", "-n", n, "-g", "GF") == rmq(
            "getConsumerConfig", "-n", n, "-g", "GF"
        )
        assert attributes_in_order(server.broker, "TF") == [("message.type", "FIFO")]
    topics = json.loads((store / "config" / "topics.json").read_text())["topicConfigTable"]
    assert topics["TF"]["attributes"] == {"message.type": "FIFO"}
    group = json.loads((store / "config" / "subscriptionGroup.json").read_text())["subscriptionGroupTable"][
        "GF"
    ]
    assert group == {
        "brokerId": 0, "consumeBroadcastEnable": False, "consumeEnable": True, "consumeFromMinEnable": False,
        "consumeMessageOrderly": True, "consumeTimeoutMinute": 15, "groupName": "GF",
        "groupRetryPolicy": {"exponentialRetryPolicy": {"initial": 1000, "max": 7200000, "multiplier": 2},
                             "type": "EXPONENTIAL"},
        "groupSysFlag": 0, "notifyConsumerIdsChangedEnable": True,
        "retryMaxTimes": 16, "retryQueueNums": 1, "whichBrokerWhenConsumeSlowly": 1,
    }  # fmt: skip
