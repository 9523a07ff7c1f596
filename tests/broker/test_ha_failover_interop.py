"""Mixed master–slave groups of ``rmq serve`` and real Apache RocketMQ brokers losing their master:
the slave learns the master's topics, groups and offsets within one ``SlaveSynchronize`` round (a
4.9.8 slave fetches the topics over the master's VIP channel, listenPort − 2), and after kill -9 of
the master a real Java consumer receives every acknowledged message from the slave. The NameServer
is the real one, so that it outlives the master. Skipped without Java 17 or the kits."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from formats import fastjson
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support.oracle import KIT, Jvm, broker_port, kit_env
from tests.support.popwire import call
from tests.support.serve import ServeProcess, free_port, wait_until, write_conf
from tests.support.stores import ends_meet

pytestmark = pytest.mark.java

FILE = 1024 * 1024
COUNT = 2000
TOPIC_FIELDS = (
    "topicName",
    "readQueueNums",
    "writeQueueNums",
    "perm",
    "topicFilterType",
    "topicSysFlag",
    "order",
)
ROUND = 10  # seconds: 4.9.8's SlaveSynchronize and rmq's run every 10 s


def real_conf(path: Path, **keys: object) -> Path:
    common = {
        "brokerClusterName": "FailCluster", "brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1",
        "flushDiskType": "ASYNC_FLUSH", "autoCreateTopicEnable": "true", "diskMaxUsedSpaceRatio": "95",
        "mappedFileSizeCommitLog": str(FILE), "messageDelayLevel": "1s 2s 3s",
    }  # fmt: skip
    common.update({k: str(v) for k, v in keys.items()})
    path.write_text("".join(f"{k}={v}\n" for k, v in common.items()))
    return path


def clienttest(ns: str, topic: str, count: int, mode: str, env: dict[str, str], cwd: Path) -> str:
    """``bin/clienttest NS TOPIC COUNT MODE``: ``push`` sends COUNT and consumes them with a new
    group (its offsets committed to the master at its shutdown); ``consume`` waits for COUNT
    distinct messages of the topic with a new group. Exit 0 when all arrived."""
    done = subprocess.run(
        [str(KIT / "bin" / "clienttest"), ns, topic, str(count), mode, "90"],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=240,
    )  # fmt: skip
    out = done.stdout + done.stderr[-2000:]
    assert done.returncode == 0, out
    return out


def delayed_send(broker: str, topic: str) -> None:
    """One message of delay level 1: the master's delayOffset.json moves when it is due."""
    header = hd.SendMessageRequestHeaderV2(
        a="PG_FAIL", b=topic, c="TBW102", d=4, e=0, f=0, g=int(time.time() * 1000), h=0,
        i=f"DELAY\x011\x02UNIQ_KEY\x01D{time.time_ns()}\x02WAIT\x01true\x02",
    )  # fmt: skip
    assert call(broker, RC.SEND_MESSAGE_V2, header, b"delayed").code == RS.SUCCESS


def live_tables(broker: str) -> dict[str, object]:
    """The master's topics, consumer offsets and delay offsets, as its slave fetches them."""
    topics = fastjson.loads(call(broker, RC.GET_ALL_TOPIC_CONFIG).body)["topicConfigTable"]
    offsets = fastjson.loads(call(broker, RC.GET_ALL_CONSUMER_OFFSET).body)["offsetTable"]
    delays = fastjson.loads(call(broker, RC.GET_ALL_DELAY_OFFSET).body)["offsetTable"]
    return {"topics": topics, "offsets": offsets, "delays": delays}


def file_tables(store: Path) -> dict[str, object]:
    """The same three tables from a slave's ``config/*.json``."""
    config = store / "config"
    read = {name: fastjson.loads(p.read_text()) for name in ("topics", "consumerOffset", "delayOffset")
            if (p := config / f"{name}.json").is_file() and p.read_text().strip()}  # fmt: skip
    return {
        "topics": read.get("topics", {}).get("topicConfigTable", {}),
        "offsets": read.get("consumerOffset", {}).get("offsetTable", {}),
        "delays": read.get("delayOffset", {}).get("offsetTable", {}),
    }


def comparable(tables: dict[str, object], topic: str) -> dict[str, object]:
    """What must be equal: every topic's fields as 4.9.8's TopicConfig has them, the offsets of
    ``topic``'s groups (keys as JSON text), every delay level's offset."""
    topics = tables["topics"]
    offsets = tables["offsets"]
    delays = tables["delays"]
    assert isinstance(topics, dict) and isinstance(offsets, dict) and isinstance(delays, dict)
    return {
        "topics": {name: {k: c.get(k) for k in TOPIC_FIELDS} for name, c in topics.items()},
        "offsets": {
            k: {str(q): int(o) for q, o in v.items()} for k, v in offsets.items() if k.startswith(topic)
        },
        "delays": {str(level): int(o) for level, o in delays.items()},
    }


def synced_within_a_round(master: str, slave_store: Path, topic: str) -> dict[str, object]:
    """Wait (at most a round and a half) for the slave's files to equal the master's tables."""
    expected: dict[str, object] = {}

    def same() -> bool:
        expected.update(comparable(live_tables(master), topic))
        return comparable(file_tables(slave_store), topic) == expected

    try:
        wait_until(
            same, ROUND * 1.5 + 2, "the slave's topics, offsets and delay offsets equal the master's", 0.5
        )
    except AssertionError:
        assert comparable(file_tables(slave_store), topic) == expected
    return expected


def stable(master: str, topic: str) -> None:
    """The master's offsets stop moving (the consumer's last commit, the delayed message due)."""
    last: list[object] = [None]

    def settled() -> bool:
        now = comparable(live_tables(master), topic)
        same, last[0] = now == last[0], now
        return same and bool(now["delays"]) and bool(now["offsets"])

    wait_until(settled, 30, "the master's offsets settled", 1.0)


def test_rmq_master_and_real_4_9_8_slave_the_slave_serves_everything_after_kill_9(tmp_path: Path) -> None:
    env = kit_env(tmp_path)
    ns_port, slave_port = free_port(), broker_port()
    ns = f"127.0.0.1:{ns_port}"
    topic = "TopicFailA"
    master_conf = write_conf(
        tmp_path / "master.conf", brokerName="fail-a", brokerClusterName="FailCluster",
        brokerRole="SYNC_MASTER", mappedFileSizeCommitLog=str(FILE), brokerIP1="127.0.0.1",
        messageDelayLevel="1s 2s 3s",
    )  # fmt: skip
    master = ServeProcess(
        tmp_path / "rmq-master", master_conf, ["--no-namesrv", "--namesrv", ns, "--verbose"]
    )
    slave_store = tmp_path / "real-slave"
    slave_conf = real_conf(
        tmp_path / "slave.conf", brokerName="fail-a", brokerId=1, brokerRole="SLAVE", listenPort=slave_port,
        storePathRootDir=slave_store, namesrvAddr=ns,
    )  # fmt: skip
    namesrv = Jvm([str(KIT / "bin" / "namesrv"), "-p", str(ns_port)], tmp_path / "namesrv.out", env)
    slave = Jvm([str(KIT / "bin" / "broker"), "-c", str(slave_conf)], tmp_path / "slave.out", env)
    try:
        namesrv.wait_for("The Name Server boot success")
        master.start()
        slave.wait_for("boot success")
        wait_until(
            lambda: "master transfer data from" in master.output(), 60, "the real slave's first report"
        )
        out = clienttest(ns, topic, COUNT, "push", env, tmp_path)
        assert f"RESULT sent={COUNT} sendOk={COUNT} received=" in out and f"distinct={COUNT}" in out, out
        delayed_send(master.broker, topic)
        stable(master.broker, topic)
        synced = synced_within_a_round(master.broker, slave_store, topic)
        assert topic in synced["topics"] and synced["offsets"] and synced["delays"]  # type: ignore[operator]
        wait_until(ends_meet(slave_store, master.store), 30, "the real slave caught up")
        master.kill()  # kill -9: the name server drops it as its connection closes
        out = clienttest(ns, topic, COUNT + 1, "consume", env, tmp_path)  # the delayed one too
        assert f"distinct={COUNT + 1}" in out, out
    finally:
        master.kill()
        slave.stop()
        namesrv.stop()


def test_real_4_9_8_master_and_rmq_slave_the_slave_serves_everything_after_kill_9(tmp_path: Path) -> None:
    env = kit_env(tmp_path)
    ns_port, master_port = free_port(), broker_port()
    ns = f"127.0.0.1:{ns_port}"
    master_addr = f"127.0.0.1:{master_port}"
    topic = "TopicFailB"
    master_store = tmp_path / "real-master"
    master_conf = real_conf(
        tmp_path / "master.conf", brokerName="fail-b", brokerId=0, brokerRole="SYNC_MASTER",
        listenPort=master_port, storePathRootDir=master_store, namesrvAddr=ns,
    )  # fmt: skip
    namesrv = Jvm([str(KIT / "bin" / "namesrv"), "-p", str(ns_port)], tmp_path / "namesrv.out", env)
    master = Jvm([str(KIT / "bin" / "broker"), "-c", str(master_conf)], tmp_path / "master.out", env)
    slave_conf = write_conf(
        tmp_path / "slave.conf", brokerName="fail-b", brokerClusterName="FailCluster", brokerId="1",
        brokerRole="SLAVE", mappedFileSizeCommitLog=str(FILE), messageDelayLevel="1s 2s 3s",
    )  # fmt: skip
    slave = ServeProcess(tmp_path / "rmq-slave", slave_conf, ["--no-namesrv", "--namesrv", ns, "--verbose"])
    try:
        namesrv.wait_for("The Name Server boot success")
        master.wait_for("boot success")
        slave.start()
        wait_until(lambda: "update master address" in slave.output(), 30, "the slave learns its master")
        time.sleep(
            6
        )  # the slave's first offset report (haSendHeartbeatInterval): SYNC_MASTER sends wait on it
        out = clienttest(ns, topic, COUNT, "push", env, tmp_path)
        assert f"RESULT sent={COUNT} sendOk={COUNT} received=" in out and f"distinct={COUNT}" in out, out
        delayed_send(master_addr, topic)
        stable(master_addr, topic)
        synced = synced_within_a_round(master_addr, slave.store, topic)
        assert topic in synced["topics"] and synced["offsets"] and synced["delays"]  # type: ignore[operator]
        wait_until(ends_meet(slave.store, master_store), 30, "the rmq slave caught up")
        master.proc.kill()  # kill -9
        master.proc.wait(10)
        out = clienttest(ns, topic, COUNT + 1, "consume", env, tmp_path)  # the delayed one too
        assert f"distinct={COUNT + 1}" in out, out
    finally:
        slave.kill()
        master.stop()
        namesrv.stop()
