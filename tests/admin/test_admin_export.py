"""exportConfigs, exportMetadata, exportMetrics end to end (4.9.8 ``tools.command.export``).

Against ``rmq serve`` (one server for the module) holding real data: topics and groups made by
``rmq updateTopic`` / ``updateSubGroup``, messages sent and consumed by the real C++ client (whose
consumer creates its group and retry topic, and stays online for exportMetrics). The files are
read back and checked key by key against what the broker holds, and their text against fastjson's
pretty form. Against the real 4.9.8 NameServer and Broker (``java``): rmq's files and the kit's
``mqadmin`` files for the same broker are the same JSON (and the same bytes) but for the export
time and the tool's own version.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from formats import fastjson
from formats.javahash import chm_order
from formats.javatext import java_double
from rmqcli.admin.export import fastjson_text
from rmqcli.store.write.config import subscription_group_config
from tests.support.broker_drivers import Driver, run_driver
from tests.support.cli import invoke_rmq, one_line_error
from tests.support.components import require
from tests.support.oracle import KIT, real_cluster
from tests.support.serve import ServeProcess, write_conf

UNKNOWN = "[error] Make sure the specified clusterName exists or the name server connected to is correct."
SYSTEM_TOPICS = {"TBW102", "SCHEDULE_TOPIC_XXXX", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "BenchmarkTest"}
CONFIG_KEYS = set(
    "brokerClusterName brokerId brokerName brokerRole fileReservedTime filterServerNums flushDiskType "
    "maxMessageSize messageDelayLevel msgTraceTopicName slaveReadEnable traceOn traceTopicEnable useTLS "
    "autoCreateTopicEnable autoCreateSubscriptionGroup".split()
)
TOPIC_KEYS = [
    "order",
    "perm",
    "readQueueNums",
    "topicFilterType",
    "topicName",
    "topicSysFlag",
    "writeQueueNums",
]
GROUP_KEYS = (
    "brokerId consumeBroadcastEnable consumeEnable consumeFromMinEnable groupName "
    "notifyConsumerIdsChangedEnable retryMaxTimes retryQueueNums whichBrokerWhenConsumeSlowly"
).split()
CONSUMER = "GroupC"  # the C++ consumer's group
# a line of fastjson's pretty form: tabs, "key":value with no space, or a closing bracket
PRETTY_LINE = re.compile(
    r'\t*(?:"[^"]*":(?:\{|\[\]|\{\}|\[.*\]|"[^"]*"|-?\d+(?:\.\d+(?:E-?\d+)?)?|true|false),?|\},?)'
)


def topic(name: str, read: int, write: int, perm: int = 6) -> dict[str, Any]:
    return {
        "order": False,
        "perm": perm,
        "readQueueNums": read,
        "topicFilterType": "SINGLE_TAG",
        "topicName": name,
        "topicSysFlag": 0,
        "writeQueueNums": write,
    }


def group(name: str, retry_queues: int = 1, **changes: Any) -> dict[str, Any]:
    """A 4.9.x ``SubscriptionGroupConfig`` with the broker's defaults, and ``changes``."""
    return {**subscription_group_config(name), "retryQueueNums": retry_queues, **changes}


def stage(ns: str, broker: str, tmp: Path) -> Driver:
    """TopicA (4/4) and GroupA on the cluster, TopicB (read 2, write 3) and GroupB (2 retry queues,
    broadcast off) on the broker; 8 messages to TopicA by the C++ producer, consumed by the C++
    consumer of GroupC, which is left online (returned)."""
    rmq("updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", "TopicA", "-r", "4", "-w", "4")
    rmq("updateTopic", "-n", ns, "-b", broker, "-t", "TopicB", "-r", "2", "-w", "3")
    rmq("updateSubGroup", "-n", ns, "-c", "DefaultCluster", "-g", "GroupA")
    rmq("updateSubGroup", "-n", ns, "-b", broker, "-g", "GroupB", "-q", "2", "-d", "false")
    require("cpp")
    keys = [f"k{i}" for i in range(8)]
    run_driver(tmp, "produce", {"op": "produce", "namesrv": ns, "topic": "TopicA", "keys": keys})
    consumer = Driver(tmp, "consume", {"op": "consume", "namesrv": ns, "topic": "TopicA", "group": CONSUMER})
    consumer.wait_for(lambda ev: {e.get("key") for e in ev} >= set(keys), 60, "the 8 messages consumed")
    return consumer


def rmq(*args: str, code: int = 0) -> str:
    result = invoke_rmq(*args)
    assert result.exit_code == code, (args, result.exit_code, result.stdout, result.stderr)
    return result.stdout if code == 0 else result.stderr


def load(path: Path) -> Any:
    return fastjson.loads(path.read_text())


def assert_pretty(path: Path) -> None:
    """fastjson's pretty text: ``{`` alone first, one tab per level, ``"key":value``, no newline at
    the end, and the same text as the parsed document written again."""
    text = path.read_text()
    assert text.startswith("{\n") and text.endswith("\n}") and not text.endswith("\n\n")
    for line in text.split("\n")[1:-1]:
        assert PRETTY_LINE.fullmatch(line), line
    assert fastjson.loads(text) == json.loads(text)  # strict JSON too


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, Path]]:
    root = tmp_path_factory.mktemp("export")
    conf = write_conf(root / "broker.conf")
    with ServeProcess(root / "store", conf) as server:
        consumer = stage(server.namesrv, server.broker, root)
        try:
            yield server, root
        finally:
            consumer.stop()
            server.stop()


def broker_config(ns: str, broker: str) -> dict[str, str]:
    (doc,) = json.loads(rmq("getBrokerConfig", "-n", ns, "-b", broker, "--json"))
    return dict(doc["properties"])


@pytest.mark.cpp
def test_export_configs(served: tuple[ServeProcess, Path]) -> None:
    server, root = served
    out = rmq("exportConfigs", "-n", server.namesrv, "-c", "DefaultCluster", "-f", str(root / "cfg"))
    assert out == f"export {root / 'cfg'}/configs.json success"  # no newline, as mqadmin
    path = root / "cfg" / "configs.json"
    assert_pretty(path)
    doc = load(path)
    assert list(doc) == ["clusterScale", "brokerConfigs"]  # HashMap order
    assert list(doc["clusterScale"].items()) == [
        ("namesrvSize", 1),
        ("slaveBrokerSize", 0),
        ("masterBrokerSize", 1),
    ]
    props = broker_config(server.namesrv, server.broker)
    kept = doc["brokerConfigs"]["broker-a"]
    assert kept == {k: v for k, v in props.items() if k in CONFIG_KEYS}  # every value a string
    assert kept["brokerClusterName"] == "DefaultCluster" and kept["brokerId"] == "0"
    assert [p.name for p in path.parent.iterdir()] == ["configs.json"]  # nothing left beside it
    # --json prints the same document (and writes the file again)
    assert (
        json.loads(
            rmq(
                "exportConfigs",
                "-n",
                server.namesrv,
                "-c",
                "DefaultCluster",
                "-f",
                str(root / "cfg"),
                "--json",
            )
        )
        == doc
    )


@pytest.mark.cpp
def test_export_configs_of_an_unknown_cluster(served: tuple[ServeProcess, Path]) -> None:
    server, root = served
    out = rmq("exportConfigs", "-n", server.namesrv, "-c", "Nope", "-f", str(root / "none"))
    assert out == f"{UNKNOWN}export {root / 'none'}/configs.json success"
    assert (root / "none" / "configs.json").read_text() == (
        '{\n\t"clusterScale":{\n\t\t"namesrvSize":1,\n\t\t"slaveBrokerSize":0,\n\t\t"masterBrokerSize":0\n'
        '\t},\n\t"brokerConfigs":{}\n}'
    )
    # -c is required; a folder that is a file is a one-line error naming it
    assert "--clusterName" in rmq("exportConfigs", "-n", server.namesrv, code=2)
    (root / "afile").write_text("x")
    err = rmq(
        "exportConfigs", "-n", server.namesrv, "-c", "DefaultCluster", "-f", str(root / "afile"), code=1
    )
    assert str(root / "afile") in one_line_error(err)


@pytest.mark.cpp
def test_export_metadata_of_the_cluster(served: tuple[ServeProcess, Path]) -> None:
    server, root = served
    before = int(time.time() * 1000)
    out = rmq("exportMetadata", "-n", server.namesrv, "-c", "DefaultCluster", "-f", str(root / "md"))
    assert out == f"export {root / 'md'}/metadata.json success\n"  # with a newline here
    path = root / "md" / "metadata.json"
    assert_pretty(path)
    doc = load(path)
    assert list(doc) == ["exportTime", "topicConfigTable", "subscriptionGroupTable"]
    assert before <= doc["exportTime"] <= int(time.time() * 1000)
    topics, groups = doc["topicConfigTable"], doc["subscriptionGroupTable"]
    assert topics["TopicA"] == topic("TopicA", 4, 4) and topics["TopicB"] == topic("TopicB", 2, 3)
    assert all(list(t) == TOPIC_KEYS for t in topics.values())
    assert not SYSTEM_TOPICS & set(topics) and not [t for t in topics if t.startswith(("%RETRY%", "%DLQ%"))]
    assert groups["GroupA"] == group("GroupA", consumeBroadcastEnable=False, consumeFromMinEnable=False)
    assert groups["GroupB"] == group("GroupB", 2, consumeBroadcastEnable=False, consumeFromMinEnable=False)
    assert all(list(g) == GROUP_KEYS for g in groups.values())
    assert not {"TOOLS_CONSUMER", "SELF_TEST_C_GROUP", "CID_RMQ_SYS_TRANS", "DEFAULT_CONSUMER"} & set(groups)
    assert groups[CONSUMER]["groupName"] == CONSUMER  # created by the C++ consumer's heartbeat
    # -t and -g: only that table, in topic.json / subscriptionGroup.json; -s keeps retry topics
    out = rmq(
        "exportMetadata", "-n", server.namesrv, "-c", "DefaultCluster", "-t", "-s", "-f", str(root / "md")
    )
    assert out == f"export {root / 'md'}/topic.json success\n"
    only = load(root / "md" / "topic.json")
    assert list(only) == ["exportTime", "topicConfigTable"]
    assert set(only["topicConfigTable"]) - set(topics) == {f"%RETRY%{CONSUMER}"}
    rmq("exportMetadata", "-n", server.namesrv, "-c", "DefaultCluster", "-g", "-f", str(root / "md"))
    only = load(root / "md" / "subscriptionGroup.json")
    assert list(only) == ["exportTime", "subscriptionGroupTable"] and only["subscriptionGroupTable"] == groups
    doc = json.loads(
        rmq("exportMetadata", "-n", server.namesrv, "-c", "DefaultCluster", "-f", str(root / "md"), "--json")
    )
    assert doc["topicConfigTable"] == topics and doc["subscriptionGroupTable"] == groups


@pytest.mark.cpp
def test_export_metadata_of_a_broker(served: tuple[ServeProcess, Path]) -> None:
    server, root = served
    from rmqcli.store.configfiles import load_config

    out = rmq("exportMetadata", "-b", server.broker, "-t", "-f", str(root / "b"))  # no name server needed
    assert out == f"export {root / 'b'}/topic.json success"  # no newline with -b
    doc = load(root / "b" / "topic.json")
    assert list(doc) == ["dataVersion", "topicConfigTable"]
    on_disk = load_config(server.store / "config", "topics.json").data
    assert doc["dataVersion"] == {k: on_disk["dataVersion"][k] for k in ("counter", "timestamp")}
    assert doc["topicConfigTable"]["TopicB"] == topic("TopicB", 2, 3)
    assert not SYSTEM_TOPICS & set(doc["topicConfigTable"])
    out = rmq("exportMetadata", "-b", server.broker, "-g", "-t", "-f", str(root / "b2"))  # -t wins
    assert out.endswith("/topic.json success") and not (root / "b2" / "subscriptionGroup.json").exists()
    out = rmq("exportMetadata", "-b", server.broker, "-g", "-f", str(root / "b"))
    assert out == f"export {root / 'b'}/subscriptionGroup.json success"
    doc = load(root / "b" / "subscriptionGroup.json")
    assert list(doc) == ["dataVersion", "subscriptionGroupTable"]
    assert "GroupB" in doc["subscriptionGroupTable"] and "TOOLS_CONSUMER" not in doc["subscriptionGroupTable"]
    assert_pretty(root / "b" / "subscriptionGroup.json")
    # -b alone exports nothing and prints nothing; neither -b nor -c is a usage error
    assert rmq("exportMetadata", "-b", server.broker, "-f", str(root / "b3")) == ""
    assert not (root / "b3").exists()
    assert "-c/--clusterName" in one_line_error(rmq("exportMetadata", "-n", server.namesrv, code=2))


@pytest.mark.cpp
def test_export_metadata_of_an_unknown_cluster(served: tuple[ServeProcess, Path]) -> None:
    server, root = served
    out = rmq("exportMetadata", "-n", server.namesrv, "-c", "Nope", "-f", str(root / "none"))
    assert out == f"{UNKNOWN}export {root / 'none'}/metadata.json success\n"
    doc = load(root / "none" / "metadata.json")
    assert list(doc) == ["exportTime", "topicConfigTable", "subscriptionGroupTable"]
    assert doc["topicConfigTable"] == {} and doc["subscriptionGroupTable"] == {}


@pytest.mark.cpp
def test_export_metrics(served: tuple[ServeProcess, Path]) -> None:
    server, root = served
    out = rmq("exportMetrics", "-n", server.namesrv, "-c", "DefaultCluster", "-f", str(root / "mx"))
    assert out == f"export {root / 'mx'}/metrics.json success"
    path = root / "mx" / "metrics.json"
    assert_pretty(path)
    doc = load(path)
    assert list(doc) == ["totalData", "evaluateReport"]
    report = doc["evaluateReport"]["broker-a"]
    assert list(report) == ["runtimeVersion", "runtimeQuota", "runtimeEnv"]
    quota = report["runtimeQuota"]
    metadata = json.loads(
        rmq("exportMetadata", "-n", server.namesrv, "-c", "DefaultCluster", "-f", str(root / "mx"), "--json")
    )
    assert quota["topicSize"] == len(metadata["topicConfigTable"])
    assert quota["groupSize"] == len(metadata["subscriptionGroupTable"])
    kv = json.loads(rmq("brokerStatus", "-n", server.namesrv, "-b", server.broker, "--json"))[0]["table"]
    assert quota["diskRatio"] == {
        "commitLogDiskRatio": kv["commitLogDiskRatio"],
        "consumeQueueDiskRatio": kv["consumeQueueDiskRatio"],
    }
    in_day = int(kv["msgPutTotalTodayMorning"]) - int(kv["msgPutTotalYesterdayMorning"])
    assert (
        quota["oneDayNum"]["normalOneDayInNum"]
        == in_day
        == doc["totalData"]["totalOneDayNum"]["normalOneDayInNum"]
    )
    assert set(quota["tps"]) == {"normalInTps", "normalOutTps", "transInTps", "scheduleInTps"}
    assert all(isinstance(v, float) for v in quota["tps"].values())
    assert all(isinstance(v, float) for v in doc["totalData"]["totalTps"].values())
    assert '"totalNormalInTps":' in path.read_text() and re.search(r'"transInTps":\d+\.\d', path.read_text())
    assert report["runtimeVersion"]["rocketmqVersion"] == "V4_9_7"  # the tool's own version (rmq: 407)
    # the average record size of what was put, as StoreStatsService counts it; CPUs as the broker's
    total, puts = int(kv["putMessageSizeTotal"]), int(kv["putMessageTimesTotal"])
    assert puts > 0 and quota["messageAverageSize"] == kv["putMessageAverageSize"]
    assert float(quota["messageAverageSize"]) == total / puts
    assert report["runtimeEnv"] == {"cpuNum": str(os.cpu_count())}
    (info,) = report["runtimeVersion"]["clientInfo"]  # the C++ consumer of GroupC is online
    assert re.fullmatch(r"CPP%V\d_\d_\d", info), info
    assert re.search(r'"clientInfo":\["CPP%V\d_\d_\d"\]', path.read_text())  # a HashSet: one line
    assert json.loads(
        rmq("exportMetrics", "-n", server.namesrv, "-c", "DefaultCluster", "-f", str(root / "mx"), "--json")
    )["evaluateReport"].keys() == {"broker-a"}


@pytest.mark.cpp
def test_export_metrics_of_an_unknown_cluster(served: tuple[ServeProcess, Path]) -> None:
    """mqadmin fails with a NullPointerException (and exits 0); rmq says why and exits 3."""
    server, root = served
    result = invoke_rmq("exportMetrics", "-n", server.namesrv, "-c", "Nope", "-f", str(root / "nm"))
    assert result.exit_code == 3 and result.stdout == ""
    assert "cluster [Nope] not exist" in one_line_error(result.stderr)
    assert not (root / "nm").exists()


def test_java_orders_and_numbers() -> None:
    """The key order of the real 4.9.8 configs.json (a ``Properties``: a ConcurrentHashMap of 16
    keys, resized once) and fastjson's doubles."""
    put = [
        "brokerClusterName", "brokerId", "brokerName", "brokerRole", "fileReservedTime", "filterServerNums",
        "flushDiskType", "maxMessageSize", "messageDelayLevel", "msgTraceTopicName", "slaveReadEnable",
        "traceOn", "traceTopicEnable", "useTLS", "autoCreateTopicEnable", "autoCreateSubscriptionGroup",
    ]  # fmt: skip
    real = [
        "brokerId", "traceOn", "flushDiskType", "msgTraceTopicName", "traceTopicEnable", "messageDelayLevel",
        "autoCreateTopicEnable", "brokerRole", "slaveReadEnable", "fileReservedTime", "brokerClusterName",
        "brokerName", "filterServerNums", "maxMessageSize", "useTLS", "autoCreateSubscriptionGroup",
    ]  # fmt: skip
    assert chm_order(put) == real
    assert [java_double(x) for x in (0.0, 346.5, 1e7, 0.0005, 12345678.9, float("nan"))] == [
        "0.0",
        "346.5",
        "1.0E7",
        "5.0E-4",
        "1.23456789E7",
        "null",
    ]
    assert fastjson_text({"a": {}, "b": {"c": 1.5}}) == '{\n\t"a":{},\n\t"b":{\n\t\t"c":1.5\n\t}\n}'


# --- the real 4.9.8 broker and mqadmin ---------------------------------------------------------------
@contextmanager
def real_kit(tmp: Path) -> Iterator[tuple[str, str, dict[str, str]]]:
    """The kit's NameServer and a Broker ``broker-a`` of ``DefaultCluster`` on free loopback ports;
    yields the two addresses and an environment for the kit's mqadmin."""
    with real_cluster(tmp) as real:
        yield real.namesrv, real.broker, real.env()


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, dict[str, str], Path]]:
    require("java")
    tmp = tmp_path_factory.mktemp("real-export")
    with real_kit(tmp) as (ns, broker, env):
        consumer = stage(ns, broker, tmp)
        try:
            yield ns, broker, env, tmp
        finally:
            consumer.stop()


def both(real: tuple[str, str, dict[str, str], Path], name: str, *args: str) -> tuple[str, str, Path, Path]:
    """The same export by the kit's mqadmin and by rmq, each into its own folder: both stdouts
    (mqadmin's JVM notices dropped) and both folders."""
    ns, _, env, tmp = real
    theirs, ours = tmp / f"mqadmin-{name}", tmp / f"rmq-{name}"
    proc = subprocess.run(
        [str(KIT / "bin" / "mqadmin"), *args, "-n", ns, "-f", str(theirs)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    out = proc.stdout[proc.stdout.find("export ") :] if "export " in proc.stdout else proc.stdout
    return out, rmq(*args, "-n", ns, "-f", str(ours)), theirs, ours


def both_settled(
    real: tuple[str, str, dict[str, str], Path], name: str, *args: str
) -> tuple[str, str, Path, Path]:
    """``both``, taken again (up to 3 times) while the broker's ``dataVersion`` moved between the
    two exports: the online consumer's heartbeats may still change the broker's tables."""
    for attempt in range(3):
        out = both(real, f"{name}-{attempt}", *args)
        versions = [
            [load(p).get("dataVersion") for p in sorted(folder.iterdir())] for folder in (out[2], out[3])
        ]
        if versions[0] == versions[1]:
            break
    return out


def same_files(theirs: Path, ours: Path, volatile: str = "exportTime") -> None:
    names = sorted(p.name for p in theirs.iterdir())
    assert names == sorted(p.name for p in ours.iterdir()) and names
    for name in names:
        a, b = (theirs / name).read_text(), (ours / name).read_text()
        assert {k: v for k, v in load(theirs / name).items() if k != volatile} == {
            k: v for k, v in load(ours / name).items() if k != volatile
        }
        pattern = re.compile(rf'"{volatile}":\d+')
        assert pattern.sub("", a) == pattern.sub("", b)  # the same bytes, key order included


@pytest.mark.cpp
@pytest.mark.java
def test_export_configs_matches_mqadmin(real: tuple[str, str, dict[str, str], Path]) -> None:
    theirs_out, ours_out, theirs, ours = both(real, "configs", "exportConfigs", "-c", "DefaultCluster")
    assert (
        theirs_out.replace(str(theirs), "F")
        == ours_out.replace(str(ours), "F")
        == "export F/configs.json success"
    )
    same_files(theirs, ours)
    assert len(load(ours / "configs.json")["brokerConfigs"]["broker-a"]) == 16


@pytest.mark.cpp
@pytest.mark.java
def test_export_metadata_matches_mqadmin(real: tuple[str, str, dict[str, str], Path]) -> None:
    _, broker, _, _ = real
    cases = {
        "cluster": ("exportMetadata", "-c", "DefaultCluster"),
        "topics": ("exportMetadata", "-b", broker, "-t", "-s"),
        "groups": ("exportMetadata", "-b", broker, "-g"),
    }
    for name, args in cases.items():
        theirs_out, ours_out, theirs, ours = both_settled(real, name, *args)
        assert theirs_out.replace(str(theirs), "F") == ours_out.replace(str(ours), "F"), name
        same_files(theirs, ours)
    doc = load(sorted(ours.parent.glob("rmq-cluster-*"))[-1] / "metadata.json")
    assert doc["topicConfigTable"]["TopicB"] == topic("TopicB", 2, 3)
    assert set(doc["topicConfigTable"]) == {"TopicA", "TopicB"}  # the broker's own topics are system ones
    assert (
        f"%RETRY%{CONSUMER}"
        in load(sorted(ours.parent.glob("rmq-topics-*"))[-1] / "topic.json")["topicConfigTable"]
    )


@pytest.mark.cpp
@pytest.mark.java
def test_export_metrics_has_mqadmins_shape(real: tuple[str, str, dict[str, str], Path]) -> None:
    _, _, theirs, ours = both(real, "metrics", "exportMetrics", "-c", "DefaultCluster")
    a, b = load(theirs / "metrics.json"), load(ours / "metrics.json")

    def paths(doc: Any, prefix: str = "") -> set[str]:
        if isinstance(doc, dict):
            return {p for k, v in doc.items() for p in paths(v, f"{prefix}/{k}")} | {prefix}
        return {prefix}

    assert paths(a) == paths(b)
    for x in (a, b):
        x["evaluateReport"]["broker-a"]["runtimeVersion"].pop("rocketmqVersion")
    qa, qb = (d["evaluateReport"]["broker-a"] for d in (a, b))
    assert qa["runtimeVersion"] == qb["runtimeVersion"]  # the consumer's clientInfo
    assert qa["runtimeEnv"] == qb["runtimeEnv"]
    for key in ("topicSize", "groupSize", "oneDayNum", "messageAverageSize"):
        assert qa["runtimeQuota"][key] == qb["runtimeQuota"][key], key


def test_several_masters_merge_and_count_slaves(tmp_path: Path) -> None:
    """Two masters (one with a slave) of one cluster and a broker of another, in this process:
    queue numbers summed by topic name, retry queues by group name, slaves counted."""
    from tests.admin.adminserver import AdminServer

    brokers = (("C1", "broker-a", 0), ("C1", "broker-a", 1), ("C1", "broker-b", 0), ("C2", "broker-c", 0))
    with AdminServer(brokers) as s:
        ns = s.namesrv
        rmq("updateTopic", "-n", ns, "-c", "C1", "-t", "TopicM", "-r", "4", "-w", "3")
        rmq("updateTopic", "-n", ns, "-c", "C2", "-t", "TopicOther")
        rmq("updateSubGroup", "-n", ns, "-c", "C1", "-g", "GroupM", "-q", "3")
        rmq("exportConfigs", "-n", ns, "-c", "C1", "-f", str(tmp_path))
        doc = load(tmp_path / "configs.json")
        assert doc["clusterScale"] == {"namesrvSize": 1, "masterBrokerSize": 2, "slaveBrokerSize": 1}
        assert set(doc["brokerConfigs"]) == {"broker-a", "broker-b"}
        assert doc["brokerConfigs"]["broker-b"]["brokerName"] == "broker-b"
        rmq("exportMetadata", "-n", ns, "-c", "C1", "-f", str(tmp_path))
        doc = load(tmp_path / "metadata.json")
        assert doc["topicConfigTable"]["TopicM"] == topic("TopicM", 8, 6)
        assert "TopicOther" not in doc["topicConfigTable"]
        assert doc["subscriptionGroupTable"]["GroupM"]["retryQueueNums"] == 6
        rmq("exportMetrics", "-n", ns, "-c", "C1", "-f", str(tmp_path))
        doc = load(tmp_path / "metrics.json")
        assert set(doc["evaluateReport"]) == {"broker-a", "broker-b"}
        # one request per master: the slave is never asked
        slave = s.broker("broker-a", 1).addr
        assert 26 not in s.codes(slave) and 21 not in s.codes(slave)
