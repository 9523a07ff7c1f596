"""Mixed master–slave groups of ``rmq serve`` and real Apache RocketMQ brokers losing their master:
the slave learns the master's topics, groups and offsets within one ``SlaveSynchronize`` round (a
4.9.8 slave fetches the topics over the master's VIP channel, listenPort − 2), and after kill -9 of
the master a real Java consumer receives every acknowledged message from the slave. The NameServer
is the real one, so that it outlives the master. Skipped without Java 17 or the kits."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from formats import fastjson
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support.cli import run_rmq
from tests.support.oracle import KIT, Jvm, broker_port, kit_env
from tests.support.oracle5 import KIT5, kit5_env
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
GROUP_FIELDS = (
    "groupName", "consumeEnable", "consumeFromMinEnable", "consumeBroadcastEnable", "retryQueueNums",
    "retryMaxTimes", "brokerId", "whichBrokerWhenConsumeSlowly", "notifyConsumerIdsChangedEnable",
)  # fmt: skip
PROBE = "FailProbe"
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


def slave_reported(master: str) -> None:
    """Until a SYNC_MASTER takes sends: it answers SLAVE_NOT_AVAILABLE until its slave connected and
    reported an offset (haSendHeartbeatInterval, 5 s). Probes go to a topic of their own."""
    created = run_rmq("updateTopic", "-b", master, "-t", PROBE, "-r", "1", "-w", "1")
    assert created.returncode == 0, created.stderr

    def accepted() -> bool:
        header = hd.SendMessageRequestHeaderV2(
            a="PG_FAIL", b=PROBE, c="TBW102", d=1, e=0, f=0, g=int(time.time() * 1000), h=0,
            i=f"UNIQ_KEY\x01P{time.time_ns()}\x02WAIT\x01true\x02",
        )  # fmt: skip
        return call(master, RC.SEND_MESSAGE_V2, header, b"probe").code == RS.SUCCESS

    wait_until(accepted, 60, "the master answers a send SUCCESS (its slave reported)", 1.0)


def live_tables(broker: str) -> dict[str, object]:
    """The master's topics, consumer offsets, delay offsets and groups, as its slave fetches them."""
    topics = fastjson.loads(call(broker, RC.GET_ALL_TOPIC_CONFIG).body)["topicConfigTable"]
    offsets = fastjson.loads(call(broker, RC.GET_ALL_CONSUMER_OFFSET).body)["offsetTable"]
    delays = fastjson.loads(call(broker, RC.GET_ALL_DELAY_OFFSET).body)["offsetTable"]
    groups = fastjson.loads(call(broker, RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG).body)["subscriptionGroupTable"]
    return {"topics": topics, "offsets": offsets, "delays": delays, "groups": groups}


def file_tables(store: Path) -> dict[str, object]:
    """The same four tables from a slave's ``config/*.json``."""
    config = store / "config"
    names = ("topics", "consumerOffset", "delayOffset", "subscriptionGroup")
    read = {name: fastjson.loads(p.read_text()) for name in names
            if (p := config / f"{name}.json").is_file() and p.read_text().strip()}  # fmt: skip
    return {
        "topics": read.get("topics", {}).get("topicConfigTable", {}),
        "offsets": read.get("consumerOffset", {}).get("offsetTable", {}),
        "delays": read.get("delayOffset", {}).get("offsetTable", {}),
        "groups": read.get("subscriptionGroup", {}).get("subscriptionGroupTable", {}),
    }


def comparable(tables: dict[str, object], topic: str) -> dict[str, object]:
    """What must be equal: every topic's fields as 4.9.8's TopicConfig has them, the offsets of
    ``topic``'s groups (keys as JSON text), every delay level's offset, every subscription group's
    fields as 4.9.8's SubscriptionGroupConfig has them."""
    topics = tables["topics"]
    offsets = tables["offsets"]
    delays = tables["delays"]
    groups = tables["groups"]
    assert isinstance(topics, dict) and isinstance(offsets, dict) and isinstance(delays, dict)
    assert isinstance(groups, dict)
    return {
        "topics": {name: {k: c.get(k) for k in TOPIC_FIELDS} for name, c in topics.items()},
        "offsets": {
            k: {str(q): int(o) for q, o in v.items()} for k, v in offsets.items() if k.startswith(topic)
        },
        "delays": {str(level): int(o) for level, o in delays.items()},
        "groups": {name: {k: g.get(k) for k in GROUP_FIELDS} for name, g in groups.items()},
    }


def synced_within_a_round(
    master: str, slave_store: Path, topic: str, round_seconds: float
) -> dict[str, object]:
    """Wait (at most a round and a half) for the slave's files to equal the master's tables."""
    expected: dict[str, object] = {}

    def same() -> bool:
        expected.update(comparable(live_tables(master), topic))
        return comparable(file_tables(slave_store), topic) == expected

    try:
        wait_until(
            same,
            round_seconds * 1.5 + 2,
            "the slave's topics, offsets and delay offsets equal the master's",
            0.5,
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


@dataclass(frozen=True)
class Kit:
    """A real RocketMQ and what its groups need: its NameServer's settings, its brokers' extra keys
    (given to both members), its slaves' sync round."""

    root: Path
    round: float
    namesrv_props: dict[str, str] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)

    def env(self, tmp: Path) -> dict[str, str]:
        return kit5_env(tmp) if self.root == KIT5 else kit_env(tmp)


V4 = Kit(KIT, ROUND)
# SlaveActingMaster: the slave reads while it acts (slaveReadEnable, as 5.1.1 asks); a 5.1.1 slave
# syncs 60 s after its start, then every 60 s
V5_ACTING = Kit(
    KIT5, 60, {"supportActingMaster": "true"}, {"enableSlaveActingMaster": "true", "slaveReadEnable": "true"}
)


def members(ns: str, name: str) -> set[int]:
    """The broker ids the NameServer lists for group ``name``."""
    info = jb.decode(jb.ClusterInfo, call(ns, RC.GET_BROKER_CLUSTER_INFO).body)
    data = info.broker_addr_table.get(name)
    return set(data.broker_addrs) if data is not None else set()


def namesrv_jvm(kit: Kit, tmp: Path, port: int, env: dict[str, str]) -> Jvm:
    args = [str(kit.root / "bin" / "namesrv"), "-p", str(port)]
    if kit.namesrv_props:
        props = tmp / "namesrv.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in kit.namesrv_props.items()))
        args += ["-c", str(props)]
    return Jvm(args, tmp / "namesrv.out", env)


def fail_over(tmp_path: Path, kit: Kit, real_master: bool, topic: str) -> None:
    """One group (SYNC_MASTER + SLAVE), one member real, under a real NameServer: 2,000 sends and a
    consumer's commits, one delayed message; the slave's tables equal the master's within a round;
    kill -9 of the master; a new Java consumer receives all 2,001 messages from the slave."""
    env = kit.env(tmp_path)
    ns_port, real_port = free_port(), broker_port()
    ns = f"127.0.0.1:{ns_port}"
    name = f"fail-{topic.lower()}"
    real_store = tmp_path / "real"
    real_role = ("SYNC_MASTER", 0) if real_master else ("SLAVE", 1)
    real_file = real_conf(
        tmp_path / "real.conf", brokerName=name, brokerId=real_role[1], brokerRole=real_role[0],
        listenPort=real_port, storePathRootDir=real_store, namesrvAddr=ns, **kit.keys,
    )  # fmt: skip
    rmq_file = write_conf(
        tmp_path / "rmq.conf", brokerName=name, brokerClusterName="FailCluster", brokerIP1="127.0.0.1",
        brokerId="1" if real_master else "0", brokerRole="SLAVE" if real_master else "SYNC_MASTER",
        mappedFileSizeCommitLog=str(FILE), messageDelayLevel="1s 2s 3s", **kit.keys,
    )  # fmt: skip
    member = ServeProcess(tmp_path / "rmq", rmq_file, ["--no-namesrv", "--namesrv", ns, "--verbose"])
    namesrv = namesrv_jvm(kit, tmp_path, ns_port, env)
    real = Jvm([str(kit.root / "bin" / "broker"), "-c", str(real_file)], tmp_path / "real.out", env)
    master, slave_store = (
        (f"127.0.0.1:{real_port}", member.store) if real_master else (member.broker, real_store)
    )
    master_store = real_store if real_master else member.store
    try:
        namesrv.wait_for("The Name Server boot success")
        member.start()
        real.wait_for("boot success")
        # a 5.1.1 broker registers 10 s after its start (before, its topics have no route)
        wait_until(lambda: members(ns, name) == {0, 1}, 30, "both members registered", 0.5)
        slave_reported(master)
        created = run_rmq("updateTopic", "-b", master, "-t", topic, "-r", "4", "-w", "4")
        assert created.returncode == 0, created.stderr
        out = clienttest(ns, topic, COUNT, "push", env, tmp_path)
        assert f"RESULT sent={COUNT} sendOk={COUNT} received=" in out and f"distinct={COUNT}" in out, out
        delayed_send(master, topic)
        stable(master, topic)
        synced = synced_within_a_round(master, slave_store, topic, kit.round)
        assert topic in synced["topics"] and synced["offsets"] and synced["delays"]  # type: ignore[operator]
        assert any(name.startswith("oracle_cg_") for name in synced["groups"])  # type: ignore[attr-defined]
        wait_until(ends_meet(slave_store, master_store), 30, "the slave caught up")
        if real_master:
            real.proc.kill()  # kill -9: the name server drops it as its connection closes
            real.proc.wait(10)
        else:
            member.kill()
        out = clienttest(ns, topic, COUNT + 1, "consume", env, tmp_path)  # the delayed one too
        assert f"distinct={COUNT + 1}" in out, out
    finally:
        member.kill()
        real.proc.kill()
        real.wait()
        namesrv.stop()


def test_rmq_master_and_real_4_9_8_slave(tmp_path: Path) -> None:
    fail_over(tmp_path, V4, real_master=False, topic="TopicFailA")


def test_real_4_9_8_master_and_rmq_slave(tmp_path: Path) -> None:
    fail_over(tmp_path, V4, real_master=True, topic="TopicFailB")


@pytest.mark.java5
def test_rmq_master_and_real_5_1_1_acting_slave(tmp_path: Path) -> None:
    fail_over(tmp_path, V5_ACTING, real_master=False, topic="TopicFailC")


@pytest.mark.java5
def test_real_5_1_1_master_and_rmq_acting_slave(tmp_path: Path) -> None:
    fail_over(tmp_path, V5_ACTING, real_master=True, topic="TopicFailD")
