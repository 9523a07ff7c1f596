"""Every mqadmin command of ``rmq`` against ``rmq serve`` (DESIGN.md "broker end-to-end").

``rmq serve`` runs as a subprocess over a store from ``fixtures.generate`` (preset small) on free
loopback ports; each command goes through the real CLI (typer's runner, ``-n`` the embedded name
server) and its output is checked against facts: what the generator wrote (``GenerateSummary.sent``),
what the test created, the broker's config files on disk, and what the real C++ client (PyPI
``rocketmq`` 0.4.4, in a child process with HOME in a temp dir) reports it consumed.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fixtures.generate import START_TIMESTAMP, GenerateSummary, SentMessage, generate
from rmqcli.cli.main import app
from rmqcli.remoting import headers as hd
from rmqcli.remoting.client import RemotingClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support.cli import invoke_rmq
from tests.support.serve import ServeProcess

CLUSTER = "DefaultCluster"
BROKER = "broker-a"
CONF = {
    "brokerName": BROKER,
    "brokerClusterName": CLUSTER,
    "mappedFileSizeCommitLog": "65536",  # the small preset's sizes
    "mappedFileSizeConsumeQueue": "600",
    "maxHashSlotNum": "64",
    "maxIndexNum": "256",
    "flushConsumerOffsetInterval": "1000",
}
CQ_UNITS_PER_FILE = 30  # 600-byte consume-queue files


@dataclass
class Served:
    server: ServeProcess
    summary: GenerateSummary
    root: Path

    @property
    def store(self) -> Path:
        return self.root / "store"

    @property
    def ns(self) -> str:
        return self.server.namesrv

    @property
    def broker(self) -> str:
        return self.server.broker

    def rmq(self, *args: str, code: int = 0) -> str:
        """One command through the CLI with ``-n``; the exit code must be ``code``; its stdout, or
        its stderr when it failed."""
        result = invoke_rmq(args[0], "-n", self.ns, *args[1:])
        assert result.exit_code == code, (args, result.exit_code, result.stdout, result.stderr)
        return result.stdout if code == 0 else result.stderr

    def json(self, *args: str) -> Any:
        return json.loads(self.rmq(*args, "--json"))

    def config(self, name: str) -> dict[str, Any]:
        from rmqcli.store.configfiles import load_config

        return load_config(self.store / "config", name).data


def start(root: Path, edit: Callable[[Path], None] | None = None) -> Served:
    summary = generate(root / "store", "small")
    if edit is not None:
        edit(root / "store")
    conf = root / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in CONF.items()))
    return Served(ServeProcess(root / "store", conf).start(), summary, root)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    s = start(tmp_path_factory.mktemp("serve-admin"))
    try:
        yield s
        assert s.server.stop() == 0, s.server.output()
    finally:
        s.server.kill()


def wait_for(check: Callable[[], Any], what: str, timeout: float = 15.0) -> Any:
    """Poll ``check`` until it returns something truthy (registration and offset flushes are async)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def dispatched(summary: GenerateSummary, topic: str) -> dict[int, list[SentMessage]]:
    """The generator's records of ``topic`` per queue, in queue order (the store's facts)."""
    out: dict[int, list[SentMessage]] = {}
    for m in summary.sent:
        if m.topic == topic and m.dispatched:
            out.setdefault(m.queue_id, []).append(m)
    for records in out.values():
        records.sort(key=lambda m: m.queue_offset)
    return out


def uniq(m: SentMessage) -> str:
    """What a client calls the message id: ``UNIQ_KEY``, else the offset id."""
    return m.properties.get("UNIQ_KEY") or m.msg_id


def route(s: Served, topic: str) -> dict[str, Any] | None:
    result = CliRunner().invoke(app, ["topicRoute", "-n", s.ns, "-t", topic, "--json"])
    return json.loads(result.stdout) if result.exit_code == 0 else None


def queue_perm(s: Served, topic: str) -> int | None:
    r = route(s, topic)
    return r["queueDatas"][0]["perm"] if r else None


# --- cluster, broker and name server -----------------------------------------------------------
def test_cluster_list_and_broker_status(served: Served) -> None:
    first = min(served.summary.sent, key=lambda m: m.physical_offset)
    rows = served.json("clusterList")
    assert [(r["cluster"], r["brokerName"], r["brokerId"], r["addr"]) for r in rows] == [
        (CLUSTER, BROKER, 0, served.broker)
    ]
    runtime = rows[0]["runtime"]
    assert runtime["brokerVersionDesc"] == "V4_9_7"
    assert runtime["earliestMessageTimeStamp"] == str(first.store_timestamp)
    assert runtime["commitLogMinOffset"] == "0"
    assert int(runtime["commitLogMaxOffset"]) >= served.summary.bytes
    text = served.rmq("clusterList")
    assert text.splitlines()[0].startswith("#Cluster Name")
    assert text.splitlines()[1].split()[:5] == [CLUSTER, BROKER, "0", served.broker, "V4_9_7"]
    assert "#Broker Name" in served.rmq("clusterList", "-m")
    rounds = served.rmq("clusterList", "-i", "1", "--rounds", "2")
    assert rounds.count("#Cluster Name") == 2 and rounds.count(served.broker) == 2

    status = served.json("brokerStatus", "-b", served.broker)
    assert status[0]["addr"] == served.broker
    assert status[0]["table"]["brokerVersion"] == "407"
    assert status[0]["table"]["bootTimestamp"] == runtime["bootTimestamp"]
    lines = served.rmq("brokerStatus", "-c", CLUSTER).splitlines()
    assert [served.broker, "brokerVersionDesc", ":", "V4_9_7"] in [line.split() for line in lines]


def test_broker_config_get_and_update(served: Served) -> None:
    before = served.json("getBrokerConfig", "-b", served.broker)[0]
    props = dict(before["properties"])
    assert props["brokerName"] == BROKER and props["brokerClusterName"] == CLUSTER
    assert props["listenPort"] == str(served.server.port)
    assert props["storePathRootDir"] == str(served.store)
    assert props["mappedFileSizeCommitLog"] == "65536" and props["fileReservedTime"] == "72"
    counter = json.loads(before["version"])["counter"]

    served.rmq("updateBrokerConfig", "-b", served.broker, "-k", "fileReservedTime", "-v", "96")
    served.rmq("updateBrokerConfig", "-c", CLUSTER, "-k", "noSuchProperty", "-v", "1")  # ignored
    served.rmq("updateBrokerConfig", "-c", CLUSTER, "-k", "defaultTopicQueueNums", "-v", "x")  # not an int
    after = served.json("getBrokerConfig", "-c", CLUSTER)[0]
    props = dict(after["properties"])
    assert props["fileReservedTime"] == "96"
    assert "noSuchProperty" not in props and props["defaultTopicQueueNums"] == "8"
    assert json.loads(after["version"])["counter"] == counter + 3
    served.rmq("updateBrokerConfig", "-b", served.broker, "-k", "brokerPermission", "-v", "4")
    try:
        # registerBrokerAll: the routes carry the broker's permission while it is not read-write,
        # so a client finds no queue to write to ...
        wait_for(lambda: queue_perm(served, "TopicA") == 4, "TopicA registered read-only")
        err = served.rmq("sendMessage", "-t", "TopicA", "-p", "ro", "-b", BROKER, "-i", "0", code=6)
        assert "No route info of this topic: TopicA" in err
        # ... and a send that reaches the broker anyway is refused from its live config
        answer = _send_directly(served.broker, "TopicA")
        assert answer.code == RS.NO_PERMISSION and "sending message is forbidden" in (answer.remark or "")
    finally:
        served.rmq("updateBrokerConfig", "-b", served.broker, "-k", "brokerPermission", "-v", "6")
    wait_for(lambda: queue_perm(served, "TopicA") == 6, "TopicA registered with its own perm again")
    assert (
        served.json("sendMessage", "-t", "TopicA", "-p", "rw", "-b", BROKER, "-i", "0")["sendStatus"]
        == "SEND_OK"
    )
    assert "fileReservedTime                                  =  96" in served.rmq(
        "getBrokerConfig", "-b", served.broker
    )


def _send_directly(addr: str, topic: str) -> RemotingCommand:
    """One SEND_MESSAGE_V2 straight to the broker, without a route lookup."""
    header = hd.SendMessageRequestHeaderV2(
        a="PG", b=topic, c="TBW102", d=4, e=0, f=0, g=int(time.time() * 1000), h=0, i=""
    )

    async def go() -> RemotingCommand:
        async with RemotingClient() as client:
            request = RemotingCommand.request(RC.SEND_MESSAGE_V2, header.to_ext_fields(), b"ro", version=407)
            return await client.invoke(addr, request, 10.0)

    return asyncio.run(go())


def test_namesrv_config_and_kv_config(served: Served) -> None:
    config = dict(served.json("getNamesrvConfig")[served.ns])
    assert config["listenPort"] == str(served.server.namesrv_port)
    assert config["clusterTest"] == "false"
    served.rmq("updateNamesrvConfig", "-k", "clusterTest", "-v", "true")
    served.rmq("updateNamesrvConfig", "-k", "notANamesrvKey", "-v", "1")
    config = dict(served.json("getNamesrvConfig")[served.ns])
    assert config["clusterTest"] == "true" and "notANamesrvKey" not in config
    err = served.rmq("updateNamesrvConfig", "-k", "kvConfigPath", "-v", "/tmp/x", code=6)
    assert "NO_PERMISSION(16)" in err and "Can not update config path" in err

    served.rmq("updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "KvTopic", "-v", "broker-a:3")
    assert served.json("updateOrderConf", "-t", "KvTopic", "-m", "get")["orderConf"] == "broker-a:3"
    served.rmq("deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "KvTopic")
    assert served.json("updateOrderConf", "-t", "KvTopic", "-m", "get")["orderConf"] is None


# --- topics ------------------------------------------------------------------------------------
def test_topic_lifecycle(served: Served) -> None:
    s = served
    s.rmq("updateTopic", "-c", CLUSTER, "-t", "LifeTopic", "-r", "3", "-w", "5", "-p", "6")
    created = wait_for(lambda: route(s, "LifeTopic"), "LifeTopic in the route")
    assert created["brokerDatas"] == [
        {"brokerAddrs": {"0": s.broker}, "brokerName": BROKER, "cluster": CLUSTER}
    ]
    assert created["queueDatas"][0] | {} == {
        "brokerName": BROKER, "perm": 6, "readQueueNums": 3, "topicSysFlag": 0, "writeQueueNums": 5
    }  # fmt: skip
    on_disk = s.config("topics.json")["topicConfigTable"]["LifeTopic"]
    assert (on_disk["readQueueNums"], on_disk["writeQueueNums"], on_disk["perm"]) == (3, 5, 6)
    assert '"brokerAddrs":{0:"' + s.broker + '"' in s.rmq("topicRoute", "-t", "LifeTopic").replace(
        "\n", ""
    ).replace("\t", "")
    listed = s.rmq("topicRoute", "-t", "LifeTopic", "-l").splitlines()
    assert listed[1].split() == [CLUSTER, BROKER, "{0=" + s.broker + "}", "3", "5", "6"]

    assert "LifeTopic" in s.json("topicList")
    rows = s.json("topicList", "-c")
    assert {"cluster": CLUSTER, "topic": "LifeTopic", "group": ""} in rows
    assert s.json("topicClusterList", "-t", "LifeTopic") == [CLUSTER]

    status = s.json("topicStatus", "-t", "LifeTopic")
    assert [(q["queueId"], q["minOffset"], q["maxOffset"]) for q in status] == [(i, 0, 0) for i in range(5)]
    sent = s.json("sendMessage", "-t", "LifeTopic", "-p", "life", "-b", BROKER, "-i", "4")
    assert (sent["queueId"], sent["queueOffset"]) == (4, 0)
    status = s.json("topicStatus", "-t", "LifeTopic")
    assert status[4]["maxOffset"] == 1 and status[4]["lastUpdateTimestamp"] > 0

    allocation = s.json("allocateMQ", "-t", "LifeTopic", "-i", "10.0.0.1,10.0.0.2")["result"]
    queues = sorted(q["queueId"] for qs in allocation.values() for q in qs)
    assert queues == [0, 1, 2] and sorted(len(qs) for qs in allocation.values()) == [1, 2]

    s.rmq("updateTopicPerm", "-c", CLUSTER, "-t", "LifeTopic", "-p", "4")
    wait_for(lambda: queue_perm(s, "LifeTopic") == 4, "perm 4 in the route")
    assert s.config("topics.json")["topicConfigTable"]["LifeTopic"]["perm"] == 4
    assert (s.store / "consumequeue" / "LifeTopic" / "4").is_dir()

    s.rmq("deleteTopic", "-t", "LifeTopic", "-c", CLUSTER)
    assert route(s, "LifeTopic") is None
    assert "LifeTopic" not in s.config("topics.json")["topicConfigTable"]
    assert not (s.store / "consumequeue" / "LifeTopic").exists()
    assert "LifeTopic" not in s.json("topicList")


def test_system_topics_are_refused(served: Served) -> None:
    err = served.rmq("updateTopic", "-b", served.broker, "-t", "TBW102", code=6)
    assert "The topic[TBW102] is conflict with system topic." in err
    err = served.rmq("updateTopic", "-b", served.broker, "-t", "bad/name", code=6)
    assert "illegal characters" in err


def test_order_topic_conf(served: Served) -> None:
    s = served
    out = s.json("updateTopic", "-c", CLUSTER, "-t", "OrderedTopic", "-w", "2", "-r", "2", "-o", "true")
    assert out["orderConf"] == "broker-a:2"
    assert s.json("updateOrderConf", "-t", "OrderedTopic", "-m", "get")["orderConf"] == "broker-a:2"
    wait_for(lambda: route(s, "OrderedTopic"), "OrderedTopic in the route")
    assert "orderTopicConf" not in route(s, "OrderedTopic")  # orderMessageEnable is false
    s.rmq("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    try:
        assert route(s, "OrderedTopic")["orderTopicConf"] == "broker-a:2"
        s.rmq("updateOrderConf", "-t", "OrderedTopic", "-m", "put", "-v", "broker-a:1")
        assert route(s, "OrderedTopic")["orderTopicConf"] == "broker-a:1"
        s.rmq("updateOrderConf", "-t", "OrderedTopic", "-m", "delete")
        assert "orderTopicConf" not in route(s, "OrderedTopic")
    finally:
        s.rmq("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "false")
    assert s.config("topics.json")["topicConfigTable"]["OrderedTopic"]["order"] is True


def test_wipe_and_add_write_perm(served: Served) -> None:
    s = served
    wipe = s.json("wipeWritePerm", "-b", BROKER)
    topics = s.json("topicList")
    assert wipe == [
        {"namesrv": s.ns, "ok": True, "topicCount": len(topics), "error": None, "errorKind": None}
    ]
    assert queue_perm(s, "TopicA") == 4
    err = s.rmq("sendMessage", "-t", "TopicA", "-p", "nope", code=6)
    assert "No route info of this topic" in err
    add = s.json("addWritePerm", "-b", BROKER)
    assert add[0]["topicCount"] == len(topics)
    assert queue_perm(s, "TopicA") == 6
    assert s.json("sendMessage", "-t", "TopicA", "-p", "yes")["sendStatus"] == "SEND_OK"


# --- subscription groups -----------------------------------------------------------------------
def test_subscription_groups(served: Served) -> None:
    s = served
    s.rmq(
        "updateSubGroup", "-c", CLUSTER, "-g", "SubGroupX", "-q", "3", "-r", "5", "-m", "true", "-d", "false"
    )
    on_disk = s.config("subscriptionGroup.json")["subscriptionGroupTable"]["SubGroupX"]
    assert on_disk == {
        "brokerId": 0, "consumeBroadcastEnable": False, "consumeEnable": True, "consumeFromMinEnable": True,
        "groupName": "SubGroupX", "notifyConsumerIdsChangedEnable": True, "retryMaxTimes": 5,
        "retryQueueNums": 3, "whichBrokerWhenConsumeSlowly": 1,
    }  # fmt: skip
    infos = s.json("getConsumerConfig", "-g", "SubGroupX")
    assert [(i["cluster"], i["brokerName"], i["config"]["retryQueueNums"]) for i in infos] == [
        (CLUSTER, BROKER, 3)
    ]
    s.rmq("updateSubGroup", "-b", s.broker, "-g", "SubGroupX", "-s", "false")
    assert s.config("subscriptionGroup.json")["subscriptionGroupTable"]["SubGroupX"]["consumeEnable"] is False
    text = s.rmq("getConsumerConfig", "-g", "SubGroupX")
    assert "consumeEnable                           =  false" in text

    s.rmq("deleteSubGroup", "-c", CLUSTER, "-g", "SubGroupX")
    assert "SubGroupX" not in s.config("subscriptionGroup.json")["subscriptionGroupTable"]
    assert s.json("getConsumerConfig", "-g", "SubGroupX") == []


# --- messages ----------------------------------------------------------------------------------
def test_send_and_query_one_message(served: Served) -> None:
    s = served
    sent = s.json("sendMessage", "-t", "TopicA", "-p", "hello serve", "-k", "serve-key other", "-c", "TagS")
    assert sent["sendStatus"] == "SEND_OK" and sent["brokerName"] == BROKER
    views = s.json("queryMsgById", "-i", sent["offsetMsgId"])
    msg = views[0]["message"]
    assert (msg["msgId"], msg["topic"], msg["queueId"], msg["queueOffset"]) == (
        sent["msgId"], "TopicA", sent["queueId"], sent["queueOffset"]
    )  # fmt: skip
    assert (msg["body"], msg["keys"], msg["tags"], msg["storeHost"]) == (
        "hello serve", "serve-key other", "TagS", s.broker
    )  # fmt: skip
    assert msg["properties"]["CLUSTER"] == CLUSTER
    assert Path(views[0]["bodyPath"]).read_bytes() == b"hello serve"
    text = s.rmq("queryMsgById", "-i", sent["offsetMsgId"])
    assert ["OffsetID:", sent["offsetMsgId"]] in [line.split() for line in text.splitlines()]

    by_key = s.json("queryMsgByKey", "-t", "TopicA", "-k", "other")
    assert [m["msgId"] for m in by_key] == [sent["msgId"]]
    assert sent["msgId"] in s.rmq("queryMsgByKey", "-t", "TopicA", "-k", "serve-key")
    by_unique = s.json("queryMsgByUniqueKey", "-t", "TopicA", "-i", sent["msgId"])
    assert by_unique[0]["message"]["offsetMsgId"] == sent["offsetMsgId"]
    by_offset = s.json("queryMsgByOffset", "-t", "TopicA", "-b", BROKER, "-i", str(sent["queueId"]),
                       "-o", str(sent["queueOffset"]))  # fmt: skip
    assert by_offset["message"]["msgId"] == sent["msgId"]

    cq = s.json(
        "queryCq", "-t", "TopicA", "-q", str(sent["queueId"]), "-i", str(sent["queueOffset"]), "-c", "5"
    )
    assert cq["queueData"][0]["physicOffset"] == msg["commitLogOffset"]
    assert cq["queueData"][0]["physicSize"] == msg["storeSize"]
    assert cq["maxQueueIndex"] == sent["queueOffset"] + 1 and len(cq["queueData"]) == 1
    assert "Queue data: \nmax: " in s.rmq("queryCq", "-t", "TopicA", "-q", "0", "-i", "0")


def test_generated_messages_by_key_queue_and_offset(served: Served) -> None:
    s = served
    keyed = next(m for m in s.summary.sent if m.topic == "TopicB" and "KEYS" in m.properties)
    key = keyed.properties["KEYS"].split(" ")[0]
    expected = {
        uniq(m)
        for m in s.summary.sent
        if m.topic == "TopicB" and key in m.properties.get("KEYS", "").split(" ")
    }
    assert {m["msgId"] for m in s.json("queryMsgByKey", "-t", "TopicB", "-k", key)} == expected

    queues = dispatched(s.summary, "OrderTopic")
    events = s.json("printMsg", "-t", "OrderTopic")
    printed = [m for e in events if e["kind"] == "messages" for m in e["messages"]]
    assert sorted(m["msgId"] for m in printed) == sorted(uniq(m) for q in queues.values() for m in q)
    bodies = {uniq(m): m.body for q in queues.values() for m in q}
    assert all(m["body"] == bodies[m["msgId"]].decode("utf-8", "replace") for m in printed)
    tagged = s.json("printMsg", "-t", "OrderTopic", "-s", "TagA")
    assert {m["tags"] for e in tagged if e["kind"] == "messages" for m in e["messages"]} == {"TagA"}

    q0 = dispatched(s.summary, "TopicB")[0]
    counts = Counter(m.properties["TAGS"] for m in q0 if m.properties.get("TAGS", "").strip())
    text = s.rmq("printMsgByQueue", "-t", "TopicB", "-a", BROKER, "-i", "0", "-f", "true")
    got = {line.split()[1]: int(line.split()[3]) for line in text.splitlines() if line.startswith("Tag: ")}
    assert got == dict(counts)

    big = next(m for m in s.summary.sent if m.topic == "TopicB" and m.sys_flag & 1 and m.dispatched)
    view = s.json(
        "queryMsgByOffset", "-t", "TopicB", "-b", BROKER, "-i", str(big.queue_id), "-o", str(big.queue_offset)
    )
    assert view["message"]["body"] == big.body.decode("utf-8", "replace")  # stored zlib-compressed

    consumed = s.json("consumeMessage", "-t", "TopicB", "-b", BROKER, "-i", "1", "-o", "2", "-c", "3")
    ids = [m["msgId"] for e in consumed if e["kind"] == "consumed" for m in e["messages"]]
    assert ids == [uniq(m) for m in dispatched(s.summary, "TopicB")[1][2:5]]
    assert len([m for e in s.json("consumeMessage", "-t", "OrderTopic", "-c", "5")
                for m in e.get("messages", [])]) == 5  # fmt: skip


def test_check_rt_and_send_status(served: Served) -> None:
    s = served
    rt = s.json("checkMsgSendRT", "-t", "RtTopic", "-a", "6", "-s", "32")
    assert [r["success"] for r in rt["rows"]] == [True] * 6
    status = wait_for(lambda: route(s, "RtTopic") and s.json("topicStatus", "-t", "RtTopic"), "RtTopic")
    assert sorted(q["maxOffset"] for q in status) == [1, 1, 2, 2]
    body = s.json("queryMsgByOffset", "-t", "RtTopic", "-b", BROKER, "-i", "0", "-o", "0")["message"]["body"]
    assert body == "a" * 32

    before = sum(q["maxOffset"] for q in s.json("topicStatus", "-t", BROKER))
    sends = s.json("sendMsgStatus", "-b", BROKER, "-s", "22", "-c", "3")
    assert len(sends) == 3 and {x["sendStatus"] for x in sends} == {"SEND_OK"}
    assert sum(q["maxOffset"] for q in s.json("topicStatus", "-t", BROKER)) == before + 4  # + the warm-up


# --- stats and offsets -------------------------------------------------------------------------
def test_stats_all_and_broker_consume_stats(served: Served) -> None:
    s = served
    s.rmq("updateTopic", "-c", CLUSTER, "-t", "StatsTopic", "-r", "2", "-w", "2")
    wait_for(lambda: route(s, "StatsTopic"), "StatsTopic in the route")
    for i in range(3):
        s.rmq("sendMessage", "-t", "StatsTopic", "-p", f"stat {i}")
    rows = s.json("statsAll", "-t", "StatsTopic")
    assert [(r["topic"], r["group"], r["inMsg24h"]) for r in rows] == [("StatsTopic", None, 3)]
    active = {r["topic"] for r in s.json("statsAll", "-a")}
    assert "StatsTopic" in active and "OrderTopic" not in active  # generated in 2023
    assert "NO_CONSUMER" in s.rmq("statsAll", "-t", "StatsTopic")

    stats = s.json("brokerConsumeStats", "-b", s.broker)
    topic_b = dispatched(s.summary, "TopicB")
    group_b = [r for r in stats["rows"] if (r["group"], r["topic"]) == ("GroupB", "TopicB")]
    expected = []
    for q in sorted(topic_b):
        records = topic_b[q]
        high = records[-1].queue_offset + 1
        consumer = high // 2
        expected.append((q, high, consumer, records[consumer - 1].store_timestamp))
    got = [(r["queueId"], r["brokerOffset"], r["consumerOffset"], r["lastTimestamp"]) for r in group_b]
    assert got == expected
    assert stats["totalDiff"] >= sum(h - c for _, h, c, _ in expected)
    assert "Diff Total:" in s.rmq("brokerConsumeStats", "-b", s.broker)


def test_offline_reset_and_skip(served: Served) -> None:
    """GroupB has offsets but no online member: the broker answers CONSUMER_NOT_ONLINE and mqadmin
    rewrites the offsets itself (GET_CONSUME_STATS + UPDATE_CONSUMER_OFFSET)."""
    s = served
    topic_b = dispatched(s.summary, "TopicB")
    highs = {q: records[-1].queue_offset + 1 for q, records in topic_b.items()}

    def offsets() -> dict[int, int]:
        rows = s.json("brokerConsumeStats", "-b", s.broker)["rows"]
        return {
            r["queueId"]: r["consumerOffset"]
            for r in rows
            if (r["group"], r["topic"]) == ("GroupB", "TopicB")
        }

    skipped = s.json("skipAccumulatedMessage", "-g", "GroupB", "-t", "TopicB")
    assert skipped["offline"] is True
    assert offsets() == highs

    def persisted(expected: dict[int, int]) -> Callable[[], bool]:
        def check() -> bool:
            table = s.config("consumerOffset.json")["offsetTable"]["TopicB@GroupB"]
            return {int(q): o for q, o in table.items()} == expected

        return check

    wait_for(persisted(highs), "consumerOffset.json with the skipped offsets")
    reset = s.json("resetOffsetByTime", "-g", "GroupB", "-t", "TopicB", "-s", str(START_TIMESTAMP - 1000))
    assert reset["offline"] is True
    assert sorted((r["queueId"], r["rollbackOffset"]) for r in reset["rollback"]) == [
        (q, 0) for q in sorted(highs)
    ]
    wait_for(persisted({q: 0 for q in highs}), "consumerOffset.json with the offsets reset to 0")
    assert offsets() == {}  # brokerConsumeStats lists only queues with a last consumed message
    text = s.rmq("resetOffsetByTime", "-g", "GroupB", "-t", "TopicB", "-s", "now")
    assert "#brokerName" in text and "#rollbackOffset" in text
    wait_for(persisted(highs), "consumerOffset.json with the offsets reset to now")


# --- an online C++ consumer --------------------------------------------------------------------
LIVE = textwrap.dedent(
    r"""
    import json, sys
    from rocketmq.client import Message, Producer, PushConsumer

    ns, group, topic = sys.argv[1:4]
    got = []
    consumer = PushConsumer(group)
    consumer.set_namesrv_addr(ns)
    consumer.subscribe(topic, lambda m: got.append([m.keys.decode(), m.queue_id, m.queue_offset]), "*")
    producer = Producer("PG_LIVE")
    producer.set_namesrv_addr(ns)
    producer.start()
    consumer.start()
    print("STARTED", flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[0] == "send":
            m = Message(topic)
            m.set_keys(words[1])
            m.set_body(words[1])
            print(json.dumps({"sent": producer.send_sync(m).msg_id}), flush=True)
        elif words[0] == "got":
            print(json.dumps({"got": list(got)}), flush=True)
        elif words[0] == "quit":
            break
    consumer.shutdown()
    producer.shutdown()
    print(json.dumps({"bye": True}), flush=True)
    """
)


class LiveClient:
    """A C++ push consumer and producer in a child process, driven line by line over stdin."""

    def __init__(self, root: Path, ns: str, group: str, topic: str):
        script = root / "live.py"
        script.write_text(LIVE)
        home = root / "home"
        home.mkdir(exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, str(script), ns, group, topic],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            cwd=root, env={**os.environ, "HOME": str(home)},
        )  # fmt: skip
        assert self.readline() == "STARTED"

    def readline(self, timeout: float = 30.0) -> str:
        import selectors

        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                raise AssertionError("the C++ client did not answer")
        return self.proc.stdout.readline().strip()

    def ask(self, line: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return json.loads(self.readline())

    def got(self) -> list[list[Any]]:
        return self.ask("got")["got"]

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.ask("quit")
                self.proc.wait(20)
            except (AssertionError, OSError, ValueError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(10)


@pytest.mark.cpp
def test_online_consumer_commands(served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = served
    s.rmq("updateTopic", "-c", CLUSTER, "-t", "LiveTopic", "-r", "4", "-w", "4")
    wait_for(lambda: route(s, "LiveTopic"), "LiveTopic in the route")
    before_sends = int(time.time() * 1000) - 1
    client = LiveClient(tmp_path, s.ns, "CG_LIVE", "LiveTopic")
    try:
        keys = [f"live-{i}" for i in range(8)]
        ids = [client.ask(f"send {k}")["sent"] for k in keys]
        wait_for(lambda: len(client.got()) >= 8, "the C++ consumer to get 8 messages", 40)
        assert sorted(k for k, _, _ in client.got()) == keys

        def caught_up() -> list[dict[str, Any]] | None:
            rows = [
                r for r in s.json("consumerProgress", "-g", "CG_LIVE")["queues"] if r["topic"] == "LiveTopic"
            ]
            return rows if sum(r["consumerOffset"] for r in rows) == 8 else None

        rows = wait_for(caught_up, "CG_LIVE's committed offsets", 20)
        assert sum(r["brokerOffset"] for r in rows) == 8 and all(r["diff"] == 0 for r in rows)

        conn = s.json("consumerConnection", "-g", "CG_LIVE")
        (member,) = conn["connectionSet"]
        client_id = member["clientId"]
        assert client_id.startswith(f"{client.proc.pid}-") and member["language"] == "CPP"
        assert set(conn["subscriptionTable"]) == {"LiveTopic", "%RETRY%CG_LIVE"}
        assert (conn["consumeType"], conn["messageModel"]) == ("CONSUME_PASSIVELY", "CLUSTERING")
        producers = s.json("producerConnection", "-g", "PG_LIVE", "-t", "LiveTopic")
        assert [c["clientId"] for c in producers["connectionSet"]] == [client_id]
        summary = [g for g in s.json("consumerProgress") if g["group"] == "CG_LIVE"]
        assert [(g["count"], g["type"], g["model"]) for g in summary] == [(1, "PUSH", "CLUSTERING")]
        with_ip = s.json("consumerProgress", "-g", "CG_LIVE", "-s", "true")["queues"]
        assert {r["clientIp"] for r in with_ip if r["topic"] == "LiveTopic"} == {client_id.split("@")[0]}

        monkeypatch.chdir(tmp_path)
        status = s.json("consumerStatus", "-g", "CG_LIVE")
        assert [r["clientId"] for r in status["clients"]] == [client_id]
        written = (tmp_path / status["clients"][0]["path"]).read_text()
        assert "#Consumer Subscription#" in written and "LiveTopic" in written
        one = s.json("consumerStatus", "-g", "CG_LIVE", "-i", client_id)["runningInfo"]
        assert {sub["topic"] for sub in one["subscriptionSet"]} == {"LiveTopic", "%RETRY%CG_LIVE"}
        commits = {k: v["commitOffset"] for k, v in one["mqTable"].items() if k.startswith("LiveTopic/")}
        assert sum(commits.values()) == 8

        tracks = s.json("queryMsgByUniqueKey", "-t", "LiveTopic", "-i", ids[0])[0]["tracks"]
        assert {"consumerGroup": "CG_LIVE", "trackType": "CONSUMED", "exceptionDesc": None} in tracks
        # The C++ client leaves CONSUME_MESSAGE_DIRECTLY unanswered: after its 10 s the broker
        # answers CONSUME_MSG_TIMEOUT, as a real one does (mqadmin waits 15 s).
        err = s.rmq(
            "queryMsgByUniqueKey", "-t", "LiveTopic", "-i", ids[0], "-g", "CG_LIVE", "-d", client_id, code=6
        )
        assert "CONSUME_MSG_TIMEOUT(207)" in err and f"consumer <CG_LIVE> <{client_id}> Timeout" in err
        cq = s.json("queryCq", "-t", "LiveTopic", "-q", "0", "-i", "0", "-g", "CG_LIVE")
        assert cq["subscriptionData"]["topic"] == "LiveTopic"

        s.rmq("cloneGroupOffset", "-s", "CG_LIVE", "-d", "CG_COPY", "-t", "LiveTopic")

        def cloned() -> bool:
            table = s.config("consumerOffset.json")["offsetTable"]
            return table.get("LiveTopic@CG_COPY") == table.get("LiveTopic@CG_LIVE") is not None

        wait_for(cloned, "LiveTopic@CG_COPY in consumerOffset.json")
        s.rmq("deleteSubGroup", "-b", s.broker, "-g", "CG_COPY", "-r", "true")
        wait_for(
            lambda: "LiveTopic@CG_COPY" not in s.config("consumerOffset.json")["offsetTable"], "removeOffset"
        )

        reset = s.json("resetOffsetByTime", "-g", "CG_LIVE", "-t", "LiveTopic", "-s", str(before_sends), "-c")
        assert reset["offline"] is False
        assert sorted((r["queueId"], r["offset"]) for r in reset["rows"]) == [(q, 0) for q in range(4)]
        again = wait_for(lambda: len(client.got()) >= 16 and client.got(), "the reset to replay", 40)
        assert Counter(k for k, _, _ in again) == {k: 2 for k in keys}

        skipped = s.json("skipAccumulatedMessage", "-g", "CG_LIVE", "-t", "LiveTopic")
        assert skipped["offline"] is False
        assert sum(r["offset"] for r in skipped["rows"]) == 8
    finally:
        client.close()
    err = wait_for(
        lambda: CliRunner().invoke(app, ["consumerConnection", "-n", s.ns, "-g", "CG_LIVE"]).exit_code == 6,
        "CG_LIVE to go offline",
    )
    assert err


# --- requests relayed to one client ----------------------------------------------------------
class HandClient:
    """A consumer on a plain socket, written with the project's codec: it registers with HEART_BEAT
    (as a Java 4.9.7 client, ``ip@instance``) and answers CONSUME_MESSAGE_DIRECTLY (309) and
    GET_CONSUMER_RUNNING_INFO (307) the way a Java client does, keeping what the broker sent."""

    def __init__(self, broker: str, group: str, topic: str, client_id: str):
        import socket
        import threading

        from rmqcli.remoting import json_body as jb
        from rmqcli.remoting.codec import FrameDecoder, RemotingCommand, encode

        host, port = broker.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.received: list[RemotingCommand] = []
        self.decoder = FrameDecoder()
        self.sub = jb.SubscriptionData(topic=topic, sub_string="*", tags_set=[], sub_version=1)
        data = jb.HeartbeatData(
            client_id=client_id,
            consumer_data_set=[jb.ConsumerData(group_name=group, subscription_data_set=[self.sub])],
        )
        self.sock.sendall(encode(RemotingCommand.request(34, None, jb.encode(data), opaque=1)))
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        from rmqcli.admin.beans import ConsumeMessageDirectlyResult, ConsumerRunningInfo
        from rmqcli.remoting import json_body as jb
        from rmqcli.remoting.codec import encode

        while True:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            for command in self.decoder.feed_commands(chunk):
                if command.is_response:
                    continue
                self.received.append(command)
                if command.code == 309:
                    body = ConsumeMessageDirectlyResult(
                        consume_result="CR_SUCCESS", remark=f"{len(command.body)} bytes", spent_time_mills=3
                    )
                else:
                    body = ConsumerRunningInfo(properties={"PROP_HAND": "yes"}, subscription_set=[self.sub])
                self.sock.sendall(encode(command.response(body=jb.encode(body))))

    def close(self) -> None:
        import socket

        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(5)


def test_requests_relayed_to_a_client(served: Served) -> None:
    from rmqcli.admin.message import decode_messages

    s = served
    client = HandClient(s.broker, "CG_HAND", "TopicA", "10.9.8.7@hand")
    try:
        wait_for(lambda: route(s, "%RETRY%CG_HAND"), "the heartbeat's retry topic")
        sent = s.json("sendMessage", "-t", "TopicA", "-p", "direct body", "-k", "direct")
        result = s.json("queryMsgByUniqueKey", "-t", "TopicA", "-i", sent["msgId"], "-g", "CG_HAND",
                        "-d", "10.9.8.7@hand")  # fmt: skip
        assert (result["consumeResult"], result["spentTimeMills"]) == ("CR_SUCCESS", 3)
        (direct,) = [c for c in client.received if c.code == 309]
        assert direct.ext_fields["brokerName"] == BROKER and direct.ext_fields["msgId"] == sent["offsetMsgId"]
        (msg,) = decode_messages(direct.body)  # the stored record itself
        assert (msg.msg_id, msg.body) == (sent["msgId"], b"direct body")
        assert result["remark"] == f"{len(direct.body)} bytes"

        info = s.json("consumerStatus", "-g", "CG_HAND", "-i", "10.9.8.7@hand")["runningInfo"]
        assert info["properties"] == {"PROP_HAND": "yes"}
        assert [c.ext_fields["clientId"] for c in client.received if c.code == 307] == ["10.9.8.7@hand"]
        err = s.rmq("consumerStatus", "-g", "CG_HAND", "-i", "nobody@0", code=6)
        assert "The Consumer <CG_HAND> <nobody@0> not online" in err
    finally:
        client.close()


# --- clean-ups, on a store of their own --------------------------------------------------------
def _drop_tx_topic(store: Path) -> None:
    """A topic whose config is gone but whose queues are still on disk."""
    path = store / "config" / "topics.json"
    data = json.loads(path.read_text())
    del data["topicConfigTable"]["TxTopic"]
    path.write_text(json.dumps(data))


def test_clean_ups(tmp_path: Path) -> None:
    s = start(tmp_path, _drop_tx_topic)
    try:
        files = sorted(p.name for p in (s.store / "commitlog").iterdir())
        assert len(files) == 3
        low = int(files[-1])
        s.rmq("deleteExpiredCommitLog", "-b", s.broker)  # fileReservedTime 72 h: nothing expired
        assert sorted(p.name for p in (s.store / "commitlog").iterdir()) == files
        s.rmq("updateBrokerConfig", "-b", s.broker, "-k", "fileReservedTime", "-v", "0")
        assert "success" in s.rmq("deleteExpiredCommitLog", "-c", CLUSTER)
        assert sorted(p.name for p in (s.store / "commitlog").iterdir()) == files[-1:]
        status = s.json("brokerStatus", "-b", s.broker)[0]["table"]
        assert status["commitLogMinOffset"] == str(low)

        def expected_min(records: list[SentMessage]) -> int:
            """``deleteExpiredFileByOffset`` then ``correctMinOffset`` over 30-unit files."""
            files = [records[i : i + CQ_UNITS_PER_FILE] for i in range(0, len(records), CQ_UNITS_PER_FILE)]
            while len(files) > 1 and files[0][-1].physical_offset < low:
                files.pop(0)
            return next(
                (m.queue_offset for m in files[0] if m.physical_offset >= low), files[0][0].queue_offset
            )

        topic_a = dispatched(s.summary, "TopicA")
        mins = {q["queueId"]: q["minOffset"] for q in s.json("topicStatus", "-t", "TopicA")}
        assert mins == {q: expected_min(records) for q, records in topic_a.items()}
        assert any(mins.values())

        queues = {(m.topic, m.queue_id) for m in s.summary.sent if m.dispatched}
        last = {
            k: max(m.physical_offset for m in s.summary.sent if (m.topic, m.queue_id) == k) for k in queues
        }
        expired = {k for k, off in last.items() if off < low and k[0] != "SCHEDULE_TOPIC_XXXX"}
        assert expired, "the generated store should leave some queue entirely below the new minimum"
        s.rmq("cleanExpiredCQ", "-c", CLUSTER)
        for topic, queue_id in queues:
            exists = (s.store / "consumequeue" / topic / str(queue_id)).is_dir()
            assert exists == ((topic, queue_id) not in expired), (topic, queue_id)

        assert (s.store / "consumequeue" / "TxTopic").is_dir()
        s.rmq("cleanUnusedTopic", "-b", s.broker)
        assert not (s.store / "consumequeue" / "TxTopic").exists()
        assert (s.store / "consumequeue" / "TopicB").is_dir()
        assert s.server.stop() == 0, s.server.output()
    finally:
        s.server.kill()
