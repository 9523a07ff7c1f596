"""The mqadmin commands end to end over loopback: the real CLI (typer's runner and subprocesses)
against the name servers and brokers of ``rmq serve`` (``tests.admin.adminserver``, protocol.md
C.1-C.5), with mqadmin's text checked against the formats of C.4 and the outputs captured from a
real 4.9.8 cluster (when ../shared is present), replayed by staging the captured broker's state."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rmqcli.cli.commands import ADMIN, resolve
from rmqcli.cli.main import app
from rmqcli.remoting import json_body as jb
from tests.admin.adminserver import AdminServer
from tests.admin.runner import closed_port, local_millis, rmq, rmq_fail, run, run_together
from tests.support import REAL_ROOT as REAL
from tests.support import ROOT

needs_real = pytest.mark.real
SINGLE = (("DefaultCluster", "broker-a", 0),)
DESCRIPTIONS = {name: resolve(name).description for name in ADMIN}  # mqadmin's commandDesc()


@pytest.fixture(scope="module")
def cluster() -> Iterator[AdminServer]:
    with AdminServer() as s:
        yield s


@pytest.fixture
def server(cluster: AdminServer) -> AdminServer:
    """Two brokers of ``DefaultCluster`` shared by the module, with what they received and what
    was staged forgotten: each test uses topics, groups and keys of its own."""
    cluster.reset()
    return cluster


@pytest.fixture(scope="module")
def one_broker() -> Iterator[AdminServer]:
    with AdminServer(SINGLE) as s:
        yield s


@pytest.fixture
def single(one_broker: AdminServer) -> AdminServer:
    """One broker, ``broker-a`` of ``DefaultCluster``, as in the captured clusters; shared by the
    module as ``server`` is."""
    one_broker.reset()
    return one_broker


def chosen_runtime() -> dict[str, str]:
    """A GET_BROKER_RUNTIME_INFO table with the keys mqadmin reads (C.4.1) and chosen values: a
    real broker's depend on its load, the time and the disk."""
    return {
        "brokerVersionDesc": "V4_9_7",
        "brokerVersion": "407",
        "msgPutTotalYesterdayMorning": "0",
        "msgPutTotalTodayMorning": "10",
        "msgPutTotalTodayNow": "25",
        "msgGetTotalYesterdayMorning": "0",
        "msgGetTotalTodayMorning": "4",
        "msgGetTotalTodayNow": "9",
        "sendThreadPoolQueueSize": "0",
        "sendThreadPoolQueueHeadWaitTimeMills": "0",
        "pullThreadPoolQueueSize": "0",
        "pullThreadPoolQueueHeadWaitTimeMills": "0",
        "pageCacheLockTimeMills": "0",
        "earliestMessageTimeStamp": str(int(time.time() * 1000) - 3 * 3600 * 1000),
        "putTps": "12.5 10.0 8.0",
        "getTransferedTps": "3.25 2.0 1.0",
        "commitLogDiskRatio": "0.4512",
        "bootTimestamp": "1700000000000",
    }


def status_rows(text: str) -> list[tuple[int, int, int, int]]:
    """``(queue id, min, max, last updated)`` of each row of a topicStatus output."""
    rows = [line.split(None, 4) for line in text.splitlines()[1:]]
    return [(int(r[1]), int(r[2]), int(r[3]), local_millis(r[4]) if len(r) > 4 else 0) for r in rows]


def stage_topic_status(
    server: AdminServer, broker_name: str, topic: str, rows: list[tuple[int, int, int, int]]
) -> None:
    """What GET_TOPIC_STATS_INFO reports as ``rows``: the topic (unless the broker has it), and per
    queue the messages from its minimum to its maximum offset, all stored at its last-updated time."""
    broker = server.broker(broker_name)
    if topic not in broker.topics:
        server.create_topic(broker, topic, len(rows), len(rows))
    for queue_id, low, high, last in rows:
        if high > low:
            server.store(broker, topic, queue_id, b"m", count=high - low, store_ts=last, first_offset=low)


# --- listing and help (C.1) --------------------------------------------------------------------
def test_no_arguments_lists_every_command_like_mqadmin() -> None:
    proc = run()
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "The most commonly used mqadmin commands are:"
    for name, desc in DESCRIPTIONS.items():
        assert f"   {name:<20} {desc}" in lines
    assert any(line.startswith("   dump-commitlog       ") for line in lines)
    assert any(line.startswith("   verify               ") for line in lines)
    assert lines[-1] == "See 'rmq help <command>' for more information on a specific command."
    assert lines[1].startswith("   updateTopic ")  # mqadmin's registration order


def test_help_command_and_dash_dash_help() -> None:
    text = rmq("help", "updateTopic")
    for flag in (
        "-n, --namesrvAddr",
        "-t, --topic",
        "-c, --clusterName",
        "-b, --brokerAddr",
        "-r, --readQueueNums",
    ):
        assert flag in text
    assert "Update or create topic" in text
    code, err = rmq_fail("help", "nope")
    assert code == 2 and "The sub command nope not exist." in err
    assert "topicList" in rmq("--help")
    assert "--clusterModel" in rmq("topicList", "--help")


# --- topics -------------------------------------------------------------------------------------
def test_update_topic_by_cluster_resolves_masters(server: AdminServer) -> None:
    out = rmq(
        "updateTopic", "-n", server.namesrv, "-c", "DefaultCluster", "-t", "TopicA", "-r", "4", "-w", "4"
    )
    a, b = server.broker("broker-a").addr, server.broker("broker-b").addr
    assert out == (
        f"create topic to {a} success.\ncreate topic to {b} success.\n"
        "TopicConfig [topicName=TopicA, readQueueNums=4, writeQueueNums=4, perm=RW-, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false]"
    )
    assert server.codes("namesrv") == [106]
    assert server.codes(a) == [17] and server.codes(b) == [17]
    assert rmq("topicList", "-n", server.namesrv).splitlines().count("TopicA") == 1
    route = json.loads(rmq("topicRoute", "-n", server.namesrv, "-t", "TopicA", "--json"))
    assert sorted(q["brokerName"] for q in route["queueDatas"]) == ["broker-a", "broker-b"]
    assert {q["writeQueueNums"] for q in route["queueDatas"]} == {4}


def test_update_topic_unknown_cluster_is_mqadmins_message(server: AdminServer) -> None:
    code, err = rmq_fail("updateTopic", "-n", server.namesrv, "-c", "Nope", "-t", "T")
    assert code == 3
    assert "Make sure the specified clusterName exists or the name server connected to is correct." in err


def test_update_topic_needs_b_or_c(server: AdminServer) -> None:
    code, err = rmq_fail("updateTopic", "-n", server.namesrv, "-t", "T")
    assert code == 2 and "-b" in err


def test_update_topic_order_by_cluster_writes_order_conf(server: AdminServer) -> None:
    out = rmq(
        "updateTopic", "-n", server.namesrv, "-c", "DefaultCluster", "-t", "OrderT", "-o", "true", "-w", "2"
    )
    assert "set cluster orderConf. isOrder=true, orderConf=[broker-a:2;broker-b:2]" in out
    assert out.endswith("order=true]")
    assert server.kv["ORDER_TOPIC_CONFIG"]["OrderT"] == "broker-a:2;broker-b:2"
    assert 100 in server.codes("namesrv")
    got = rmq("updateOrderConf", "-n", server.namesrv, "-t", "OrderT", "-m", "get")
    assert got == "get orderConf success. topic=[OrderT], orderConf=[broker-a:2;broker-b:2] "


def test_update_topic_order_by_broker_merges(server: AdminServer) -> None:
    rmq("updateOrderConf", "-n", server.namesrv, "-t", "OT", "-m", "put", "-v", "broker-b:4")
    addr = server.broker("broker-a").addr
    out = rmq("updateTopic", "-n", server.namesrv, "-b", addr, "-t", "OT", "-o", "true", "-w", "3", "-r", "3")
    assert out.startswith(
        f"set broker orderConf. isOrder=true, orderConf=[broker-b:4;broker-a:3]create topic to {addr}"
    )
    assert server.kv["ORDER_TOPIC_CONFIG"]["OT"] == "broker-b:4;broker-a:3"


def test_update_order_conf_put_get_delete(server: AdminServer) -> None:
    n = server.namesrv
    assert rmq("updateOrderConf", "-n", n, "-t", "T", "-m", "put", "-v", "broker-a:4") == (
        "update orderConf success. topic=[T], orderConf=[broker-a:4]"
    )
    assert rmq("updateOrderConf", "-n", n, "-t", "T", "-m", "get").endswith("orderConf=[broker-a:4] ")
    assert rmq("updateOrderConf", "-n", n, "-t", "T", "-m", "delete") == "delete orderConf success. topic=[T]"
    assert rmq("updateOrderConf", "-n", n, "-t", "T", "-m", "get").endswith("orderConf=[None] ")
    assert rmq_fail("updateOrderConf", "-n", n, "-t", "T", "-m", "bogus")[0] == 2


def test_update_topic_perm(server: AdminServer) -> None:
    n, addr = server.namesrv, server.broker("broker-a").addr
    rmq("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "P", "-r", "2", "-w", "2")
    out = rmq("updateTopicPerm", "-n", n, "-b", addr, "-t", "P", "-p", "4")
    assert out == (
        f"update topic perm from 6 to 4 in {addr} success.\n"
        "TopicConfig [topicName=P, readQueueNums=2, writeQueueNums=2, perm=R--, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false]\n"
    )
    assert server.broker("broker-a").topics["P"]["perm"] == 4
    assert (
        rmq("updateTopicPerm", "-n", n, "-c", "DefaultCluster", "-t", "P", "-p", "6").count("success.") == 2
    )
    assert rmq("updateTopicPerm", "-n", n, "-c", "DefaultCluster", "-t", "P", "-p", "6") == (
        "new perm equals to the old one!\n"
    )


def test_delete_topic_reaches_masters_and_every_namesrv() -> None:
    with AdminServer(namesrv_count=2) as server:
        n = server.namesrv
        rmq("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "Gone")
        server.reset()
        out = rmq("deleteTopic", "-n", n, "-c", "DefaultCluster", "-t", "Gone")
        assert out == (
            "delete topic [Gone] from cluster [DefaultCluster] success.\n"
            "delete topic [Gone] from NameServer success.\n"
        )
        assert server.codes("namesrv") == [106, 216, 216]
        for b in server.brokers:
            assert server.codes(b.addr) == [215] and "Gone" not in b.topics
        assert "Gone" not in rmq("topicList", "-n", n).splitlines()
        code, err = rmq_fail("topicRoute", "-n", n, "-t", "Gone")
        assert code == 3 and "TOPIC_NOT_EXIST(17)" in err and "No topic route info" in err


def test_topic_list_cluster_mode(server: AdminServer) -> None:
    n = server.namesrv
    rmq("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "TopicL")
    a = server.broker("broker-a")
    server.create_topic(a, "%RETRY%G1", 1, 1)
    for group in ("G1", "G2"):  # groups with offsets consume the topic (QUERY_TOPIC_CONSUME_BY_WHO)
        server.commit(a, group, "TopicL", {0: 0})
    before = server.connections["namesrv"]
    out = rmq("topicList", "-n", n, "-c").splitlines()
    assert out[0] == f"{'#Cluster Name':<20}  {'#Topic':<48}  {'#Consumer Group':<48}"
    assert f"{'DefaultCluster':<20}  {'TopicL':<64}  {'G1':<64}" in out
    assert f"{'DefaultCluster':<20}  {'TopicL':<64}  {'G2':<64}" in out
    assert f"{'DefaultCluster':<20}  {'TBW102':<64}  {'':<64}" in out
    assert not any("%RETRY%" in line for line in out)
    assert server.connections["namesrv"] - before == 1  # one connection for 206, 106 and every 105
    rows = json.loads(rmq("topicList", "-n", n, "-c", "--json"))
    assert {"cluster": "DefaultCluster", "topic": "TopicL", "group": "G2"} in rows


def test_topic_route_pretty_matches_mqadmin_sample(single: AdminServer) -> None:
    addr = single.broker("broker-a").addr
    rmq("updateTopic", "-b", addr, "-t", "TopicTest", "-r", "4", "-w", "4")
    expected = (
        '{\n\t"brokerDatas":[\n\t\t{\n\t\t\t"brokerAddrs":{0:"ADDR"\n\t\t\t},\n\t\t\t"brokerName":"broker-a",\n'
        '\t\t\t"cluster":"DefaultCluster"\n\t\t}\n\t],\n\t"filterServerTable":{},\n\t"queueDatas":[\n\t\t{\n'
        '\t\t\t"brokerName":"broker-a",\n\t\t\t"perm":6,\n\t\t\t"readQueueNums":4,\n\t\t\t"topicSysFlag":0,\n'
        '\t\t\t"writeQueueNums":4\n\t\t}\n\t]\n}\n'
    ).replace("ADDR", addr)
    assert rmq("topicRoute", "-n", single.namesrv, "-t", "TopicTest") == expected


def test_topic_route_list_form(server: AdminServer) -> None:
    n = server.namesrv
    rmq("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "L", "-r", "4", "-w", "2")
    lines = rmq("topicRoute", "-n", n, "-t", "L", "-l").splitlines()
    fmt = "{:<45} {:<32} {:<50} {:<10} {:<11} {:<5}"
    assert lines[0] == fmt.format(
        "#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm"
    )
    a = server.broker("broker-a").addr
    assert lines[1] == fmt.format("DefaultCluster", "broker-a", f"{{0={a}}}", 4, 2, 6)
    assert lines[3] == "-" * 158
    assert lines[4] == fmt.format("Total:", 2, "", 8, 4, "")


def test_topic_status_two_brokers_one_connection_each(server: AdminServer) -> None:
    n = server.namesrv
    rmq("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "S", "-r", "2", "-w", "2")
    stage_topic_status(server, "broker-b", "S", [(0, 1, 7, local_millis("2024-01-02 03:04:05,678"))])
    before = dict(server.connections)
    lines = rmq("topicStatus", "-n", n, "-t", "S").splitlines()
    assert lines == [
        "#Broker Name                      #QID  #Min Offset           #Max Offset             #Last Updated",
        "broker-a                          0     0                     0                       ",
        "broker-a                          1     0                     0                       ",
        "broker-b                          0     1                     7                       2024-01-02 03:04:05,678",  # noqa: E501
        "broker-b                          1     0                     0                       ",
    ]
    for who in ("namesrv", server.broker("broker-a").addr, server.broker("broker-b").addr):
        assert server.connections.get(who, 0) - before.get(who, 0) == 1


def test_topic_cluster_list(server: AdminServer) -> None:
    rmq("updateTopic", "-n", server.namesrv, "-c", "DefaultCluster", "-t", "C")
    assert rmq("topicClusterList", "-n", server.namesrv, "-t", "C") == "DefaultCluster\n"
    assert json.loads(rmq("topicClusterList", "-n", server.namesrv, "-t", "C", "--json")) == [
        "DefaultCluster"
    ]


def test_allocate_mq_shares_every_readable_queue(server: AdminServer) -> None:
    rmq("updateTopic", "-n", server.namesrv, "-c", "DefaultCluster", "-t", "A", "-r", "3", "-w", "3")
    out = rmq("allocateMQ", "-n", server.namesrv, "-t", "A", "-i", "10.0.0.1,10.0.0.2,10.0.0.3,10.0.0.4")
    assert out.startswith('{"result":{') and out.endswith("}}\n")
    result = jb.fastjson.loads(out)["result"] if hasattr(jb, "fastjson") else json.loads(out)["result"]
    queues = [(q["brokerName"], q["queueId"]) for mqs in result.values() for q in mqs]
    assert sorted(queues) == sorted((b, i) for b in ("broker-a", "broker-b") for i in range(3))
    assert sorted(len(v) for v in result.values()) == [1, 1, 2, 2]


# --- cluster, brokers, name servers ------------------------------------------------------------
def test_cluster_list_format(server: AdminServer) -> None:
    for broker in server.brokers:
        broker.runtime = chosen_runtime()
    lines = rmq("clusterList", "-n", server.namesrv).splitlines()
    assert lines[0] == (
        "#Cluster Name     #Broker Name            #BID  #Addr                  #Version         "
        "       #InTPS(LOAD)       #OutTPS(LOAD) #PCWait(ms) #Hour #SPACE"
    )
    a = server.broker("broker-a").addr
    assert lines[1] == (
        f"{'DefaultCluster':<16}  {'broker-a':<22}  {'0':<4}  {a:<22} {'V4_9_7':<16} "
        f"{'    12.50(0,0ms)':>19} {'     3.25(0,0ms)':>19} {'0':>10} {' 3.00':>5} {'0.4512':>6}"
    )
    assert lines[2].startswith(f"{'DefaultCluster':<16}  broker-b ")
    more = rmq("clusterList", "-n", server.namesrv, "-m").splitlines()
    assert more[0] == (
        f"{'#Cluster Name':<16}  {'#Broker Name':<32} {'#InTotalYest':>14} {'#OutTotalYest':>14} "
        f"{'#InTotalToday':>14} {'#OutTotalToday':>14}"
    )
    assert more[1] == f"{'DefaultCluster':<16}  {'broker-a':<32} {10:>14} {4:>14} {15:>14} {5:>14}"


def test_cluster_list_interval_repeats(server: AdminServer) -> None:
    out = rmq("clusterList", "-n", server.namesrv, "-i", "1", "--rounds", "2")
    assert out.count("#Cluster Name") == 2
    assert server.codes("namesrv") == [106, 106]


def test_cluster_with_a_slave() -> None:
    spec = [("DefaultCluster", "broker-a", 0), ("DefaultCluster", "broker-a", 1)]
    with AdminServer(spec) as server:
        n = server.namesrv
        master, slave = server.broker("broker-a").addr, server.broker("broker-a", 1).addr
        rmq("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "T")
        assert server.codes(master) == [17] and server.codes(slave) == []
        config = rmq("getBrokerConfig", "-n", n, "-c", "DefaultCluster")
        assert f"============Master: {master}============\n" in config
        assert f"============My Master: {master}=====Slave: {slave}============\n" in config
        status = rmq("brokerStatus", "-n", n, "-c", "DefaultCluster").splitlines()
        assert f"{slave:<24} {'brokerVersionDesc':<32}: V4_9_7" in status
        ids = [line.split()[2] for line in rmq("clusterList", "-n", n).splitlines()[1:]]
        assert ids == ["0", "1"]


def test_broker_status_and_config(server: AdminServer) -> None:
    addr = server.broker("broker-a").addr
    lines = rmq("brokerStatus", "-b", addr).splitlines()  # -b needs no name server
    assert lines == sorted(lines, key=lambda s: s.split(":")[0].rstrip())
    assert f"{'brokerVersionDesc':<32}: V4_9_7" in lines
    assert f"{'pullThreadPoolQueueHeadWaitTimeMills':<32}: 0" in lines
    assert rmq("updateBrokerConfig", "-b", addr, "-k", "deleteWhen", "-v", "04") == (
        f"update broker config success, {addr}\n"
    )
    config = rmq("getBrokerConfig", "-b", addr)
    assert config.startswith(f"============{addr}============\n")
    assert f"{'deleteWhen':<50}=  04\n" in config and config.endswith("\n\n")
    data = json.loads(rmq("getBrokerConfig", "-b", addr, "--json"))
    assert ["deleteWhen", "04"] in data[0]["properties"]


def test_write_perm_on_every_namesrv() -> None:
    with AdminServer(namesrv_count=2) as server:
        n = server.namesrv
        count = sum("broker-a" in queues for queues in server.namesrvs[0].topics.values())
        assert count == len(server.broker("broker-a").topics)  # the topics broker-a registered
        out = rmq("wipeWritePerm", "-n", n, "-b", "broker-a").splitlines()
        assert out == [
            f"wipe write perm of broker[broker-a] in name server[127.0.0.1:{p}] OK, {count}"
            for p in server.namesrv_ports
        ]
        for ns in server.namesrvs:
            assert all(q["broker-a"].perm & 2 == 0 for q in ns.topics.values() if "broker-a" in q)
            assert all(q["broker-b"].perm & 2 == 2 for q in ns.topics.values() if "broker-b" in q)
        out = rmq("addWritePerm", "-n", n, "-b", "broker-a").splitlines()
        first = f"127.0.0.1:{server.namesrv_ports[0]}"
        assert out[0] == f"add write perm of broker[broker-a] in name server[{first}] OK, {count}"
        assert all(q["broker-a"].perm & 2 == 2 for q in server.namesrvs[1].topics.values() if "broker-a" in q)
        assert server.codes("namesrv") == [205, 205, 327, 327]


def test_namesrv_config_and_kv(server: AdminServer) -> None:
    n = server.namesrv
    assert rmq("updateNamesrvConfig", "-n", n, "-k", "orderMessageEnable", "-v", "true") == (
        f"update name server config success![{n}]\norderMessageEnable : true\n"
    )
    out = rmq("getNamesrvConfig", "-n", n)
    assert out.startswith(f"============{n}============\n")
    assert f"{'orderMessageEnable':<50}=  true\n" in out
    out = rmq("updateNamesrvConfig", "-k", "x", "-v", "y", env={"NAMESRV_ADDR": n})
    assert out == "update name server config success!\nx : y\n"  # no -n: no list, as mqadmin
    assert rmq("updateKvConfig", "-n", n, "-s", "NS", "-k", "k", "-v", "v") == (
        "create or update kv config to namespace success.\n"
    )
    assert server.kv["NS"] == {"k": "v"}
    assert (
        rmq("deleteKvConfig", "-n", n, "-s", "NS", "-k", "k") == "delete kv config from namespace success.\n"
    )
    assert server.kv.get("NS", {}) == {}


@pytest.mark.parametrize(
    ("command", "code"), [("cleanExpiredCQ", 306), ("deleteExpiredCommitLog", 329), ("cleanUnusedTopic", 316)]
)
def test_clean_commands(server: AdminServer, command: str, code: int) -> None:
    assert rmq(command, "-n", server.namesrv, "-c", "DefaultCluster") == "success"
    for b in server.brokers:
        assert server.codes(b.addr) == [code]
    assert rmq(command, "-b", server.broker("broker-b").addr) == "success"
    server.fail[code] = (1, "disk busy")
    result = CliRunner().invoke(app, [command, "-n", server.namesrv])
    assert result.exit_code == 6 and result.stdout == "false\n"
    assert "SYSTEM_ERROR(1): disk busy" in result.stderr


# --- errors, environment, JSON ----------------------------------------------------------------
def test_namesrv_from_environment(server: AdminServer) -> None:
    assert "TBW102" in rmq("topicList", env={"NAMESRV_ADDR": server.namesrv}).splitlines()


def test_no_namesrv_is_a_usage_error() -> None:
    code, err = rmq_fail("topicList", env={"NAMESRV_ADDR": ""})
    assert code == 2 and "NAMESRV_ADDR" in err and "-n" in err


def test_unreachable_namesrv_exits_5_naming_it() -> None:
    port = closed_port()
    code, err = rmq_fail("clusterList", "-n", f"127.0.0.1:{port}")
    assert code == 5 and f"127.0.0.1:{port}" in err and err.count("\n") == 1


def test_second_namesrv_is_tried(server: AdminServer) -> None:
    n = f"127.0.0.1:{closed_port()};{server.namesrv}"
    assert "TBW102" in rmq("topicList", "-n", n).splitlines()


def test_broker_error_exits_6_with_code_and_remark(server: AdminServer) -> None:
    code, err = rmq_fail(
        "updateTopic", "-n", server.namesrv, "-c", "DefaultCluster", "-t", "SCHEDULE_TOPIC_XXXX"
    )
    assert code == 6 and "SYSTEM_ERROR(1)" in err and "conflict with system topic" in err
    code, err = rmq_fail("updateTopic", "-b", server.broker("broker-a").addr, "-t", "bad topic!")
    assert code == 6 and "illegal characters" in err


def test_unknown_code_is_not_supported(server: AdminServer) -> None:
    from rmqcli.remoting.client import SyncClient
    from rmqcli.remoting.codec import RemotingCommand

    with SyncClient() as client:
        for addr in (server.namesrv, server.broker("broker-a").addr):
            response = client.invoke(addr, RemotingCommand.request(9999))
            assert response.code == 3 and response.remark == " request type 9999 not supported"


JSON_COMMANDS = [
    ["topicList"],
    ["topicList", "-c"],
    ["topicRoute", "-t", "TBW102"],
    ["topicRoute", "-t", "TBW102", "-l"],
    ["topicStatus", "-t", "TBW102"],
    ["topicClusterList", "-t", "TBW102"],
    ["allocateMQ", "-t", "TBW102", "-i", "a,b"],
    ["clusterList"],
    ["clusterList", "-m"],
    ["brokerStatus", "-c", "DefaultCluster"],
    ["haStatus", "-c", "DefaultCluster"],
    ["getBrokerMemberGroup", "-c", "DefaultCluster", "-b", "broker-a"],
    ["getBrokerConfig", "-c", "DefaultCluster"],
    ["getNamesrvConfig"],
    ["updateNamesrvConfig", "-k", "a", "-v", "b"],
    ["updateKvConfig", "-s", "NS", "-k", "a", "-v", "b"],
    ["deleteKvConfig", "-s", "NS", "-k", "a"],
    ["updateOrderConf", "-t", "TBW102", "-m", "get"],
    ["updateTopic", "-c", "DefaultCluster", "-t", "J"],
    ["updateTopicPerm", "-c", "DefaultCluster", "-t", "J", "-p", "4"],
    ["updateBrokerConfig", "-c", "DefaultCluster", "-k", "deleteWhen", "-v", "05"],
    ["wipeWritePerm", "-b", "broker-a"],
    ["addWritePerm", "-b", "broker-a"],
    ["cleanExpiredCQ"],
    ["deleteExpiredCommitLog"],
    ["cleanUnusedTopic"],
    ["deleteTopic", "-c", "DefaultCluster", "-t", "J"],
    ["clusterRT", "-a", "2", "--rounds", "1"],
]


# commands whose --json is checked where a broker answers them (rmq serve is not in controller mode)
JSON_ELSEWHERE = {"getBrokerEpoch": "tests/admin/test_admin_epochs_real.py"}


def test_every_command_has_json(server: AdminServer) -> None:
    covered = set(JSON_ELSEWHERE)
    for args in JSON_COMMANDS:
        covered.add(args[0])
        json.loads(rmq(*args, "-n", server.namesrv, "--json"))
    for test in JSON_ELSEWHERE.values():
        assert "--json" in (ROOT / test).read_text()
    part_a = {name for name, where in ADMIN.items() if where.startswith(("admin.topic:", "admin.broker:"))}
    assert covered == part_a


# --- real subprocesses -------------------------------------------------------------------------
def test_subprocesses(server: AdminServer) -> None:
    n = server.namesrv
    proc = run("updateTopic", "-n", n, "-c", "DefaultCluster", "-t", "Sub", "-r", "2", "-w", "2")
    assert proc.returncode == 0 and proc.stdout.count("success.") == 2, proc.stderr
    port = closed_port()
    listed, route, clusters, refused, missing = run_together(
        ["topicList"],  # the name server from NAMESRV_ADDR
        ["topicRoute", "-n", n, "-t", "Sub"],
        ["clusterList", "-n", n, "--json"],
        ["topicStatus", "-n", f"127.0.0.1:{port}", "-t", "Sub"],
        ["topicRoute", "-n", n, "-t", "Missing"],
        env={"NAMESRV_ADDR": n},
    )
    assert listed.returncode == 0 and "Sub" in listed.stdout.splitlines()
    assert route.returncode == 0 and route.stdout.startswith('{\n\t"brokerDatas":[')
    assert clusters.returncode == 0 and len(json.loads(clusters.stdout)) == 2
    assert refused.returncode == 5 and refused.stdout == ""
    assert refused.stderr == f"rmq: error: 127.0.0.1:{port}: connection refused\n"
    assert (
        missing.returncode == 3
        and missing.stderr.startswith("rmq: error: ")
        and "TOPIC_NOT_EXIST(17)" in missing.stderr
    )
    assert "Traceback" not in missing.stderr and missing.stderr.count("\n") == 1


# --- the outputs captured from a real 4.9.8 cluster (C.4) ---------------------------------------
def _real(pattern: str) -> list[Path]:
    return sorted(REAL.glob(pattern)) if REAL.is_dir() else []


@pytest.fixture(scope="module")
def replayed() -> Iterator[Callable[[Path], AdminServer]]:
    """One broker per capture directory, holding what every topicStatus capture in it shows."""
    servers: dict[Path, AdminServer] = {}

    def server_for(directory: Path) -> AdminServer:
        if directory not in servers:
            server = servers[directory] = AdminServer(SINGLE)
            for path in sorted(directory.glob("topicStatus_*.txt")):
                text = path.read_text()
                if text.startswith("#Broker Name"):
                    topic = path.stem.removeprefix("topicStatus_")
                    stage_topic_status(server, "broker-a", topic, status_rows(text))
        return servers[directory]

    yield server_for
    for server in servers.values():
        server.stop()


@needs_real
@pytest.mark.parametrize(
    "path", _real("*/mqadmin/**/topicStatus_*.txt"), ids=lambda p: str(p.relative_to(REAL))
)
def test_topic_status_matches_capture(path: Path, replayed: Callable[[Path], AdminServer]) -> None:
    expected = path.read_text()
    topic = path.stem.removeprefix("topicStatus_")
    server = replayed(path.parent)
    if not expected.startswith("#Broker Name"):  # mqadmin failed: the topic had no route
        assert f"No topic route info in name server for the topic: {topic}" in expected
        code, err = rmq_fail("topicStatus", "-n", server.namesrv, "-t", topic)
        assert (
            code == 3
            and f"TOPIC_NOT_EXIST(17): No topic route info in name server for the topic: {topic}" in err
        )
        return
    assert all(line.startswith("broker-a ") for line in expected.splitlines()[1:])
    assert rmq("topicStatus", "-n", server.namesrv, "-t", topic) == expected


@needs_real
@pytest.mark.parametrize("path", _real("*/mqadmin/**/topicList.txt"), ids=lambda p: str(p.relative_to(REAL)))
def test_topic_list_matches_capture(path: Path) -> None:
    expected = path.read_text()
    with AdminServer(SINGLE) as server:
        broker = server.broker("broker-a")
        for topic in expected.splitlines():
            if topic not in broker.topics:
                server.create_topic(broker, topic, 1, 1)
        server.set_topic_order(expected.splitlines())
        assert rmq("topicList", "-n", server.namesrv) == expected


def _parse_status(text: str) -> dict[str, str]:
    table = {}
    for line in text.splitlines():
        key, _, value = line.partition(": ")
        table[key.rstrip()] = value
    return table


@needs_real
@pytest.mark.parametrize(
    "path", _real("*/mqadmin/**/brokerStatus.txt"), ids=lambda p: str(p.relative_to(REAL))
)
def test_broker_status_and_cluster_list_match_capture(path: Path, single: AdminServer) -> None:
    expected = path.read_text()
    broker = single.broker("broker-a")
    if "Exception" in expected:
        # ipv6's: mqadmin asked 127.0.0.1:10911 while the broker listened on [::1] only
        # (listening-sockets.txt) and failed to connect; rmq asked where nothing listens fails too,
        # with one line naming the address and exit 5 (unreachable), no stack trace
        assert "RemotingConnectException: connect to 127.0.0.1:10911 failed" in expected
        port = closed_port()
        code, err = rmq_fail("brokerStatus", "-b", f"127.0.0.1:{port}")
        assert code == 5 and err == f"rmq: error: 127.0.0.1:{port}: connection refused\n"
        # no brokerStatus to stage from: the broker's table as its clusterList row shows it (4.9.8,
        # no traffic, no page-cache wait, 0.24 of the disk, no message stamp)
        broker.runtime = {
            **chosen_runtime(),
            "brokerVersionDesc": "V4_9_8",
            "brokerVersion": "409",
            "putTps": "0.0 0.0 0.0",
            "getTransferedTps": "0.0 0.0 0.0",
            "commitLogDiskRatio": "0.24",
            "earliestMessageTimeStamp": "-1",
        }
    else:
        broker.runtime = _parse_status(expected)
        ours = rmq("brokerStatus", "-b", broker.addr)
        # the capture replaced a store path inside one key by "<path>" after printing
        assert [x for x in ours.splitlines() if "<path>" not in x] == [
            x for x in expected.splitlines() if "<path>" not in x
        ]
    captured = (path.parent / "clusterList.txt").read_text().splitlines()
    got = rmq("clusterList", "-n", single.namesrv).splitlines()
    assert got[0] == captured[0]
    theirs, mine = captured[1].split(), got[1].split()
    assert mine[3] == broker.addr and len(mine) == len(theirs)
    # the two captures were taken moments apart: TPS and #Hour values may differ, not the layout
    assert [mine[i] for i in (0, 1, 2, 4, 7)] == [theirs[i] for i in (0, 1, 2, 4, 7)]
    # #Addr is padded to 22 columns: a longer or shorter address moves its own end, not the next
    shift = len(broker.addr) - len(theirs[3])
    ends = [m.end() for m in re.finditer(r"\S+", captured[1])]
    assert [m.end() for m in re.finditer(r"\S+", got[1])] == ends[:3] + [ends[3] + shift] + ends[4:]


@needs_real
@pytest.mark.parametrize("path", _real("*/mqadmin/updateTopic.txt"), ids=lambda p: str(p.relative_to(REAL)))
def test_update_topic_matches_capture(path: Path, single: AdminServer) -> None:
    expected = path.read_text()
    # ipv6's capture starts with the clusterList its script read the broker's address from
    # (::1:10911, the broker listened on [::1] only): that table, then updateTopic's lines
    start = expected.index("create topic to ")
    head, expected = expected[:start].splitlines(), expected[start:]
    captured = expected.removeprefix("create topic to ").split(" success.")[0]
    if head:
        listed = (path.parent / "clusterList.txt").read_text().splitlines()
        assert len(head) == 2 and head[0] == listed[0] and head[1].split()[:5] == listed[1].split()[:5]
        assert head[1].split()[3] == captured == "::1:10911"
    else:
        assert captured == "127.0.0.1:10911"
    addr = single.broker("broker-a").addr
    out = []
    for chunk in expected.split("TopicConfig [")[1:]:
        fields = dict(kv.split("=") for kv in chunk.split("]")[0].split(", "))
        out.append(
            rmq(
                "updateTopic",
                "-b",
                addr,
                "-t",
                fields["topicName"],
                "-r",
                fields["readQueueNums"],
                "-w",
                fields["writeQueueNums"],
            )  # fmt: skip
        )
    assert "".join(out) == expected.replace(captured, addr)


@needs_real
def test_expired_fixture_commands_match_capture(single: AdminServer) -> None:
    base = REAL / "expired" / "mqadmin"
    addr = single.broker("broker-a").addr
    assert rmq("cleanExpiredCQ", "-b", addr) == (base / "cleanExpiredCQ.txt").read_text()
    assert rmq("deleteExpiredCommitLog", "-b", addr) == (base / "deleteExpiredCommitLog.txt").read_text()
    expected = (base / "updateBrokerConfig.txt").read_text().replace("127.0.0.1:10911", addr)
    assert rmq("updateBrokerConfig", "-b", addr, "-k", "fileReservedTime", "-v", "1") == expected
