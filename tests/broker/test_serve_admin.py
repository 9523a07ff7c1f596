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
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from fixtures.generate import START_TIMESTAMP
from rmqcli.remoting import headers as hd
from rmqcli.remoting.client import RemotingClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support.served import BROKER, CLUSTER, Served, dispatched, queue_perm, route, uniq, wait_for


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
    refusals = {  # each refused with its reason, nothing changed
        "noSuchProperty": "noSuchProperty is not a setting rmq implements",
        "defaultTopicQueueNums": "defaultTopicQueueNums='x' is not valid",
        "storePathRootDir": "storePathRootDir is read only at start: set it in broker.conf and restart",
        "transientStorePoolEnable": "transientStorePoolEnable is not implemented by rmq",
    }
    for key, why in refusals.items():
        err = served.rmq("updateBrokerConfig", "-c", CLUSTER, "-k", key, "-v", "x", code=6)
        assert err.strip().endswith(f"SYSTEM_ERROR(1): updateBrokerConfig refused, nothing changed: {why}")
    after = served.json("getBrokerConfig", "-c", CLUSTER)[0]
    props = dict(after["properties"])
    assert props["fileReservedTime"] == "96" and props["storePathRootDir"] == str(served.store)
    assert "noSuchProperty" not in props and props["defaultTopicQueueNums"] == "8"
    assert json.loads(after["version"])["counter"] == counter + 1
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
    created = route(s, "LifeTopic")  # at once: the broker registered it before it answered, as 4.9.8
    assert created is not None
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
