"""Group, connection, offset and stats commands end to end over loopback (protocol.md C.4.5, C.4.7,
C.5): the CLI against the name server and brokers of ``rmq serve`` (``tests.admin.adminserver``)
with online clients on real connections, text checked against mqadmin's patterns and the
consumerProgress outputs captured from a real cluster (when ../shared is present), replayed by
staging the captured broker's messages and offsets."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from rmqcli.admin.beans import ConsumerRunningInfo, ProcessQueueInfo
from rmqcli.cli.commands import ADMIN
from rmqcli.remoting import json_body as jb
from tests.admin.adminserver import AdminServer, BrokerNode
from tests.admin.runner import closed_port, local_millis, rmq, rmq_fail, run_together
from tests.support import REAL_ROOT as REAL

needs_real = pytest.mark.real


SINGLE = (("DefaultCluster", "broker-a", 0),)


@pytest.fixture
def single() -> Iterator[AdminServer]:
    with AdminServer(SINGLE) as s:
        yield s


@pytest.fixture
def server() -> Iterator[AdminServer]:
    with AdminServer() as s:
        yield s


def stage_group(server: AdminServer, broker: BrokerNode, group: str, rows: list[list[str]]) -> None:
    """What a ``consumerProgress -g`` capture shows: the group's retry topic, the topics with their
    messages (the one before the consumer offset stored at #LastTime; at 0 for N/A) and the offsets."""
    if f"%RETRY%{group}" not in broker.topics:
        server.create_topic(broker, f"%RETRY%{group}", 1, 1)
    topics: dict[str, list[list[str]]] = {}
    for row in rows:
        topics.setdefault(row[0], []).append(row)
    for topic, queue_rows in topics.items():
        if topic not in broker.topics:
            server.create_topic(broker, topic, len(queue_rows), len(queue_rows))
        for r in queue_rows:
            queue_id, high = int(r[2]), int(r[3])
            stored = broker.controller.store.max_offset(topic, queue_id)
            if stored == 0 and high > 0:
                last = 0 if r[6] == "N/A" else local_millis(r[6] + " " + r[7])
                server.store(broker, topic, queue_id, b"m", count=high, store_ts=last)
            else:
                assert stored == high, (topic, queue_id, stored, high)  # captures agree on shared topics
        server.commit(broker, group, topic, {int(r[2]): int(r[4]) for r in queue_rows})


# --- subscription groups -----------------------------------------------------------------------
def test_update_get_delete_sub_group(server: AdminServer) -> None:
    n = server.namesrv
    a, b = server.broker("broker-a"), server.broker("broker-b")
    out = rmq("updateSubGroup", "-n", n, "-c", "DefaultCluster", "-g", "G1", "-r", "3", "-d", "true")
    assert out == (
        f"create subscription group to {a.addr} success.\ncreate subscription group to {b.addr} success.\n"
        "SubscriptionGroupConfig [groupName=G1, consumeEnable=true, consumeFromMinEnable=false, "
        "consumeBroadcastEnable=true, retryQueueNums=1, retryMaxTimes=3, brokerId=0, "
        "whichBrokerWhenConsumeSlowly=1, notifyConsumerIdsChangedEnable=true]"
    )
    assert a.groups["G1"]["retryMaxTimes"] == 3 and b.groups["G1"]["consumeBroadcastEnable"]
    assert 200 in server.codes(a.addr)
    text = rmq("getConsumerConfig", "-n", n, "-g", "G1")
    banner = "=============================DefaultCluster:broker-{}=============================\n"
    block = (
        "groupName                               =  G1\nconsumeEnable                           =  true\n"
        "consumeFromMinEnable                    =  false\nconsumeBroadcastEnable                  =  true\n"
        "retryQueueNums                          =  1\nretryMaxTimes                           =  3\n"
        "brokerId                                =  0\nwhichBrokerWhenConsumeSlowly            =  1\n"
        "notifyConsumerIdsChangedEnable          =  true\n"
    )
    # one banner and block per broker, in either order, and nothing else
    chunks = [chunk for chunk in re.split(r"(?m)^(?==+DefaultCluster:)", text) if chunk]
    assert sorted(chunks) == [banner.format("a") + block, banner.format("b") + block], text
    assert rmq("getConsumerConfig", "-n", n, "-g", "nope") == ""
    out = rmq("deleteSubGroup", "-b", a.addr, "-g", "G1", "-r", "true")
    assert out == f"delete subscription group [G1] from broker [{a.addr}] success.\n"
    assert "G1" not in a.groups and "G1" in b.groups
    server.create_topic(b, "%RETRY%G1", 1, 1)
    out = rmq("deleteSubGroup", "-n", n, "-c", "DefaultCluster", "-g", "G1")
    assert out == (
        f"delete subscription group [G1] from broker [{a.addr}] in cluster [DefaultCluster] success.\n"
        f"delete subscription group [G1] from broker [{b.addr}] in cluster [DefaultCluster] success.\n"
        "delete topic [%RETRY%G1] from cluster [DefaultCluster] success.\n"
        "delete topic [%RETRY%G1] from NameServer success.\n"
        "delete topic [%DLQ%G1] from cluster [DefaultCluster] success.\n"
        "delete topic [%DLQ%G1] from NameServer success.\n"
    )
    assert "%RETRY%G1" not in server.namesrvs[0].topics and "G1" not in b.groups
    code, err = rmq_fail("updateSubGroup", "-g", "G1")
    assert code == 2


# --- consumerProgress ---------------------------------------------------------------------------
def test_consumer_progress_format_and_errors(single: AdminServer) -> None:
    n, broker = single.namesrv, single.broker("broker-a")
    stage_group(
        single,
        broker,
        "G",
        [
            "T broker-a 0 10 4 6 2024-01-02 03:04:05".split(),
            "T broker-a 1 3 3 0 N/A".split(),
        ],
    )
    single.create_topic(broker, "T2", 1, 1)  # 90 messages stored now and consumed: 1.50 TPS
    single.store(broker, "T2", 0, b"m", count=90)
    single.commit(broker, "G", "T2", {0: 90})
    out = rmq("consumerProgress", "-n", n, "-g", "G")
    head = f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#Broker Offset':<20}  "
    head += f"{'#Consumer Offset':<20}  "
    assert out.splitlines()[0] == head + f"{'#Diff':<20}  #LastTime"
    assert (
        out.splitlines()[1]
        == f"{'T':<64}  {'broker-a':<32}  {0:<4}  {10:<20}  {4:<20}  {6:<20}  2024-01-02 03:04:05"
    )
    assert out.splitlines()[3].startswith(
        f"{'T2':<64}  {'broker-a':<32}  {0:<4}  {90:<20}  {90:<20}  {0:<20}  "
    )
    assert out.endswith("\nConsume TPS: 1.50\nDiff Total: 6\n")
    assert json.loads(rmq("consumerProgress", "-n", n, "-g", "G", "--json"))["diffTotal"] == 6
    code, err = rmq_fail("consumerProgress", "-n", n, "-g", "Missing")
    assert code == 3 and "TOPIC_NOT_EXIST(17)" in err and "%RETRY%Missing" in err
    single.create_topic(broker, "%RETRY%Idle", 1, 1)
    code, err = rmq_fail("consumerProgress", "-n", n, "-g", "Idle")
    assert code == 6 and "CONSUMER_NOT_ONLINE(206): Not found the consumer group consume stats" in err
    info = ConsumerRunningInfo(
        mq_table={
            jb.MessageQueue(broker_name="broker-a", queue_id=1, topic="T"): ProcessQueueInfo(commit_offset=3)
        }
    )
    single.add_consumer("G", "10.1.2.3@77", {"T": "*"}, running_info=info)
    lines = rmq("consumerProgress", "-n", n, "-g", "G", "-s", "true").splitlines()
    assert lines[0] == head + f"{'#Client IP':<20} {'#Diff':<20}  #LastTime"
    assert lines[1].split()[5] == "N/A" and lines[2].split()[5] == "10.1.2.3"


@needs_real
@pytest.mark.parametrize("fixture", ["basic-1", "ipv6"])
def test_consumer_progress_matches_captures(fixture: str) -> None:
    base = REAL / fixture / "mqadmin"
    with AdminServer(SINGLE) as server:
        broker = server.broker("broker-a")
        for group in ("GroupA", "GroupB", "GroupRetry"):
            expected = (base / f"consumerProgress_{group}.txt").read_text()
            rows = [
                line.split()
                for line in expected.splitlines()[1:]
                if line and not line.startswith(("Consume", "Diff"))
            ]
            stage_group(server, broker, group, rows)
        topics = (base / "topicList.txt").read_text().splitlines()
        for topic in topics:
            if topic not in broker.topics:
                server.create_topic(broker, topic, 4, 4)
        server.set_topic_order(topics)
        for group in ("GroupA", "GroupB", "GroupRetry"):
            expected = (base / f"consumerProgress_{group}.txt").read_text()
            assert rmq("consumerProgress", "-n", server.namesrv, "-g", group) == expected
        assert (
            rmq("consumerProgress", "-n", server.namesrv) == (base / "consumerProgress_all.txt").read_text()
        )


def test_consumer_progress_all_online_group(single: AdminServer) -> None:
    broker = single.broker("broker-a")
    stage_group(single, broker, "G", ["T broker-a 0 10 4 6 N/A".split()])
    single.add_consumer("G", "10.0.0.1@1", {"T": "*"}, version=401)
    single.add_consumer("P", "10.0.0.2@1", {"T": "*"}, consume_type="CONSUME_ACTIVELY")
    lines = rmq("consumerProgress", "-n", single.namesrv).splitlines()
    rows = {line.split()[0]: line for line in lines[1:]}
    assert rows["G"] == f"{'G':<64}  {1:<6}  {'V4_9_4':<24} {'PUSH':<5}  {'CLUSTERING':<14}  {0:<7}  6"
    assert rows["P"] == f"{'P':<64}  {1:<6}  {'V4_9_7':<24} {'PULL':<5}  {'':<14}  {0:<7}  0"
    assert json.loads(rmq("consumerProgress", "-n", single.namesrv, "--json"))


# --- connections and status -----------------------------------------------------------------------
def test_consumer_and_producer_connection(single: AdminServer) -> None:
    n, broker = single.namesrv, single.broker("broker-a")
    client = single.add_consumer("G", "10.0.0.1@1", {"T": "TagA || TagB"})
    out = rmq("consumerConnection", "-n", n, "-g", "G")
    assert out == (
        f"{'#ClientId':<36} {'#ClientAddr':<22} {'#Language':<10} #Version\n"
        f"{'10.0.0.1@1':<36} {client.addr_at(broker):<22} {'JAVA':<10} V4_9_7\n"
        "\nBelow is subscription:\n"
        f"{'#Topic':<20} #SubExpression\n{'T':<20} TagA || TagB\n\n"
        "ConsumeType: CONSUME_PASSIVELY\nMessageModel: CLUSTERING\n"
        "ConsumeFromWhere: CONSUME_FROM_LAST_OFFSET\n"
    )
    assert rmq("consumerConnection", "-b", broker.addr, "-g", "G") == out
    code, err = rmq_fail("consumerConnection", "-b", broker.addr, "-g", "Other")
    assert code == 6 and "CONSUMER_NOT_ONLINE(206): the consumer group[Other] not online" in err
    producer = single.online("10.0.0.9@9", producer_group="PG", version=333)
    out = rmq("producerConnection", "-n", n, "-g", "PG", "-t", "TBW102")
    assert out == f"0001  {'10.0.0.9@9':<32} {producer.addr_at(broker):<22} {'JAVA':<8} V4_6_0\n"
    assert json.loads(rmq("producerConnection", "-n", n, "-g", "PG", "-t", "TBW102", "--json"))
    code, err = rmq_fail("producerConnection", "-n", n, "-g", "None", "-t", "TBW102")
    assert code == 6 and "the producer group[None] not exist" in err


def test_consumer_status(single: AdminServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    mq = jb.MessageQueue(broker_name="broker-a", queue_id=0, topic="T")
    info = ConsumerRunningInfo(
        properties={"consumeType": "CONSUME_PASSIVELY"},
        mq_table={mq: ProcessQueueInfo(commit_offset=7)},
        subscription_set=[jb.SubscriptionData(topic="T", sub_string="*")],
    )
    single.add_consumer("G", "10.0.0.1@1", {"T": "*"}, running_info=info)
    single.add_consumer("G", "10.0.0.2@1", {"T": "*"}, running_info=info)
    lines = rmq("consumerStatus", "-n", single.namesrv, "-g", "G").splitlines()
    assert lines[0] == f"{'#Index':<10} {'#ClientId':<40} {'#Version':<20} #ConsumerRunningInfoFile"
    assert lines[1].split()[:3] == ["1", "10.0.0.1@1", "V4_9_7"]
    assert lines[-3:] == ["Same subscription in the same group of consumer", "", "Rebalance OK"]
    path = tmp_path / lines[1].split()[3]
    assert path.read_text().startswith("#Consumer Properties#\nconsumeType")
    one = rmq("consumerStatus", "-n", single.namesrv, "-g", "G", "-i", "10.0.0.1@1")
    assert one == path.read_text() and f"{'T':<32} {'broker-a':<32} {0:<4} {7:<20}\n" in one
    assert json.loads(rmq("consumerStatus", "-n", single.namesrv, "-g", "G", "--json"))["sameSubscription"]


# --- offsets --------------------------------------------------------------------------------------
def _two_queue_topic(server: AdminServer, broker: BrokerNode) -> None:
    server.create_topic(broker, "T", 2, 2)
    for i in range(3):
        server.store(broker, "T", 0, b"m%d" % i, {"TAGS": "a"}, store_ts=1_000 + i)
    server.store(broker, "T", 1, b"x", {}, store_ts=5_000)
    server.create_topic(broker, "%RETRY%G", 1, 1)
    server.commit(broker, "G", "T", {0: 1, 1: 0})


def test_reset_offset_online_and_offline_fallback(single: AdminServer) -> None:
    n, broker = single.namesrv, single.broker("broker-a")
    _two_queue_topic(single, broker)
    # offline: the broker answers CONSUMER_NOT_ONLINE, mqadmin rewrites offsets itself
    out = rmq("resetOffsetByTime", "-n", n, "-g", "G", "-t", "T", "-s", "1001")
    assert out.splitlines()[0] == (
        "rollback consumer offset by specified consumerGroup[G], topic[T], force[true], "
        "timestamp(string)[1001], timestamp(long)[1001]"
    )
    head = f"{'#brokerName':<20}  {'#queueId':<20}  {'#brokerOffset':<20}  {'#consumerOffset':<20}  "
    assert out.splitlines()[1] == head + f"{'#timestampOffset':<20}  {'#rollbackOffset':<20}"
    rows = sorted(line.split() for line in out.splitlines()[2:])
    assert rows == [["broker-a", "0", "3", "1", "1", "1"], ["broker-a", "1", "1", "0", "0", "0"]]
    codes = single.codes(broker.addr)
    assert codes[:2] == [222, 208] and 29 in codes and codes.count(15) == 2
    out = rmq("skipAccumulatedMessage", "-n", n, "-g", "G", "-t", "T", "-f", "false")
    assert out.splitlines()[0].startswith("#brokerName          ")
    assert broker.offsets("T", "G") == {0: 1, 1: 0}
    rmq("skipAccumulatedMessage", "-n", n, "-g", "G", "-t", "T")
    assert broker.offsets("T", "G") == {0: 3, 1: 1}
    # online: the broker computes the table
    single.add_consumer("G", "10.0.0.1@1", {"T": "*"})
    out = rmq("resetOffsetByTime", "-n", n, "-g", "G", "-t", "T", "-s", "1970-01-01#00:00:00:000")
    lines = out.splitlines()
    assert lines[0].startswith("rollback consumer offset by specified group[G], topic[T], force[true], ")
    assert lines[1] == f"{'#brokerName':<40}  {'#queueId':<40}  {'#offset':<40}"
    assert sorted(line.split() for line in lines[2:]) == [["broker-a", "0", "0"], ["broker-a", "1", "0"]]
    assert lines[2] == f"{'broker-a':<40}  {lines[2].split()[1]:<40}  {0:<40}"
    data = json.loads(rmq("skipAccumulatedMessage", "-n", n, "-g", "G", "-t", "T", "--json"))
    assert sorted(r["offset"] for r in data["rows"]) == [1, 3] and data["offline"] is False
    code, err = rmq_fail("resetOffsetByTime", "-n", n, "-g", "G", "-t", "T", "-s", "yesterday")
    assert code == 2
    code, err = rmq_fail("resetOffsetByTime", "-n", n, "-g", "G", "-t", "NoSuch", "-s", "now")
    assert code == 3 and "TOPIC_NOT_EXIST" in err


def test_clone_group_offset_stats_and_broker_consume_stats(single: AdminServer) -> None:
    n, broker = single.namesrv, single.broker("broker-a")
    _two_queue_topic(single, broker)
    rmq("updateSubGroup", "-b", broker.addr, "-g", "G")  # GET_BROKER_CONSUME_STATS lists groups
    out = rmq("cloneGroupOffset", "-n", n, "-s", "G", "-d", "H", "-t", "T")
    assert out == "clone group offset success. srcGroup[G], destGroup=[H], topic[T]"
    assert broker.offsets("T", "H") == {0: 1, 1: 0}
    out = rmq("brokerConsumeStats", "-b", broker.addr)
    assert out.splitlines()[1] == (
        f"{'T':<64}  {'G':<64}  {'broker-a':<32}  {0:<4}  {3:<20}  {1:<20}  {2:<20}  "
        + datetime.fromtimestamp(1.0).strftime("%Y-%m-%d %H:%M:%S")
    )
    assert out.endswith("\n\nDiff Total: 3\n") and out.count("\n") == 4  # queue 1 has no last time
    assert rmq("brokerConsumeStats", "-b", broker.addr, "-l", "5").count("\n") == 3
    # the broker's stats count what was stored and consumed in the last minute, hour and day: queue 1
    # gets 7 messages half an hour ago, which G consumes, and 150 now (2.50 a second over the minute)
    now = int(time.time() * 1000)
    single.store(broker, "T", 1, b"h", count=7, store_ts=now - 1_800_000)
    single.store(broker, "T", 1, b"n", count=150, store_ts=now)
    single.commit(broker, "G", "T", {1: 8})
    lines = rmq("statsAll", "-n", n, "-t", "T").splitlines()
    assert lines[0] == (
        f"{'#Topic':<64}  {'#Consumer Group':<64} {'#Accumulation':>12} {'#InTPS':>11} {'#OutTPS':>11} "
        f"{'#InMsg24Hour':>14} {'#OutMsg24Hour':>14}"
    )
    assert sorted(lines[1:]) == sorted(
        [  # G: 2 + 150 behind; H (no retry topic, so no consume stats) accumulates nothing
            f"{'T':<64}  {'G':<64} {152:>12} {2.5:>11.2f} {0.0:>11.2f} {157:>14} {7:>14}",
            f"{'T':<64}  {'H':<64} {0:>12} {2.5:>11.2f} {0.0:>11.2f} {157:>14} {0:>14}",
        ]
    )
    everything = rmq("statsAll", "-n", n)
    assert (
        f"{'TBW102':<64}  {'':<64} {0:>12} {0.0:>11.2f} {'':>11} {0:>14} {'NO_CONSUMER':>14}\n" in everything
    )
    assert rmq("statsAll", "-n", n, "-a").count("\n") == 3  # header + T's two groups (active)


def test_every_group_command_has_json(
    single: AdminServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    broker = single.broker("broker-a")
    _two_queue_topic(single, broker)
    single.add_consumer("G", "10.0.0.1@1", {"T": "*"})
    single.online("c", producer_group="PG")
    calls = [
        ["updateSubGroup", "-c", "DefaultCluster", "-g", "G"],
        ["getConsumerConfig", "-g", "G"],
        ["consumerProgress", "-g", "G"],
        ["consumerConnection", "-g", "G"],
        ["producerConnection", "-g", "PG", "-t", "T"],
        ["consumerStatus", "-g", "G"],
        ["resetOffsetByTime", "-g", "G", "-t", "T", "-s", "now"],
        ["skipAccumulatedMessage", "-g", "G", "-t", "T"],
        ["cloneGroupOffset", "-s", "G", "-d", "H", "-t", "T"],
        ["statsAll"],
        ["brokerConsumeStats", "-b", broker.addr],
        ["deleteSubGroup", "-c", "DefaultCluster", "-g", "G"],
        ["producer", "-b", broker.addr],
    ]
    for args in calls:
        json.loads(rmq(*args, "-n", single.namesrv, "--json"))
    # startMonitoring's --json is one document per report, a line each
    rounds = rmq("startMonitoring", "-n", single.namesrv, "--delay", "0", "--rounds", "1", "--json")
    reports = [json.loads(line) for line in rounds.splitlines()]
    assert reports and all("kind" in r for r in reports)
    streamed = {"startMonitoring"}
    declared = {n for n, where in ADMIN.items() if where.startswith("admin.group:")}
    assert {c[0] for c in calls} | streamed == declared


def test_network_errors_and_subprocess(single: AdminServer) -> None:
    port = closed_port()
    code, err = rmq_fail("consumerProgress", "-n", f"127.0.0.1:{port}", "-g", "G")
    assert code == 5 and f"127.0.0.1:{port}" in err
    code, err = rmq_fail("brokerConsumeStats", "-b", f"127.0.0.1:{port}")
    assert code == 5 and f"127.0.0.1:{port}" in err
    created, progress = run_together(
        ["updateSubGroup", "-c", "DefaultCluster", "-g", "S"],
        ["consumerProgress", "-g", "S"],  # no %RETRY%S topic: no route
        env={"NAMESRV_ADDR": single.namesrv},
    )
    assert created.returncode == 0 and created.stdout.startswith("create subscription group to "), (
        created.stderr
    )
    assert progress.returncode == 3 and progress.stdout == "" and progress.stderr.startswith("rmq: error: ")
