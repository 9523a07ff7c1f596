"""Mixed broker groups of ``rmq serve`` and the real Apache RocketMQ 4.9.8 (skipped without Java 17
or ``../shared/rocketmq-4.9.8``): a real master with an ``rmq serve`` slave, and an ``rmq serve``
master with a real slave. ``bin/clienttest`` sends 3,000 messages to each group; the slave's
CommitLog comes out equal to its master's (``rmq diff-stores``), its consume queues hold the
master's units, and the real ``mqadmin clusterList`` lists both members of the group."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.oracle import KIT, LOADED_MACHINE, Jvm, broker_port, wait_registered
from tests.support.serve import ServeProcess, free_port, wait_until, write_conf
from tests.support.stores import ends_meet

pytestmark = pytest.mark.java

FILE = 128 * 1024  # CommitLog files: the 3,000 messages roll several


def java_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_OPT_EXT"}
    env["ORACLE_STATE_DIR"] = str(tmp / "state")
    return env


def real_conf(path: Path, **keys: object) -> Path:
    common = {
        "brokerClusterName": "MixedCluster", "brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1",
        "flushDiskType": "ASYNC_FLUSH", "autoCreateTopicEnable": "true", "diskMaxUsedSpaceRatio": "95",
        "mappedFileSizeCommitLog": str(FILE),
        **LOADED_MACHINE,
    }  # fmt: skip
    common.update({k: str(v) for k, v in keys.items()})
    path.write_text("".join(f"{k}={v}\n" for k, v in common.items()))
    return path


def clienttest(ns: str, topic: str, env: dict[str, str], cwd: Path) -> None:
    sent = subprocess.run(
        [str(KIT / "bin" / "clienttest"), ns, topic, "3000", "send", "60"],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=180,
    )  # fmt: skip
    assert "RESULT sent=3000 sendOk=3000" in sent.stdout, sent.stdout[-2000:] + sent.stderr[-2000:]


def cluster_members(ns: str, env: dict[str, str], cwd: Path) -> set[tuple[str, str, str]]:
    """(broker name, #BID, address) of each line the real ``mqadmin clusterList`` prints."""
    out = subprocess.run(
        [str(KIT / "bin" / "mqadmin"), "clusterList", "-n", ns],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=120,
    )  # fmt: skip
    rows = [line.split() for line in out.stdout.splitlines() if line.startswith("MixedCluster")]
    return {(r[1], r[2], r[3]) for r in rows}


def queue_files(root: Path, topic: str) -> dict[str, bytes]:
    base = root / "consumequeue" / topic
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


def units(files: dict[str, bytes]) -> dict[str, bytes]:
    """Each queue's units without the zeros a file is pre-allocated with."""
    out: dict[str, bytes] = {}
    for name, data in files.items():
        queue = name.split("/")[0]
        kept = b"".join(data[i : i + 20] for i in range(0, len(data), 20) if any(data[i : i + 20]))
        out[queue] = out.get(queue, b"") + kept
    return out


def same_commitlogs(rmq, master: Path, slave: Path) -> dict:  # type: ignore[no-untyped-def]
    result = rmq("diff-stores", str(master), str(slave), "--json")
    assert result.exit_code == 0, result.stdout + result.stderr
    summary = json.loads(result.stdout)["summary"]
    assert summary["verdict"] == "identical", summary
    assert summary["comparedBytes"] > 3 * FILE
    return summary


def test_real_master_with_an_rmq_slave(rmq, tmp_path: Path) -> None:
    env = java_env(tmp_path)
    ns_port, master_port = free_port(), broker_port()
    ns = f"127.0.0.1:{ns_port}"
    master_store = tmp_path / "real-master"
    conf = real_conf(
        tmp_path / "master.conf", brokerName="mixed-a", brokerId=0, brokerRole="ASYNC_MASTER",
        listenPort=master_port, storePathRootDir=master_store, namesrvAddr=ns,
    )  # fmt: skip
    namesrv = Jvm([str(KIT / "bin" / "namesrv"), "-p", str(ns_port)], tmp_path / "namesrv.out", env)
    master = Jvm([str(KIT / "bin" / "broker"), "-c", str(conf)], tmp_path / "master.out", env)
    slave_conf = write_conf(
        tmp_path / "slave.conf", brokerName="mixed-a", brokerClusterName="MixedCluster", brokerId="1",
        brokerRole="SLAVE", mappedFileSizeCommitLog=str(FILE),
    )  # fmt: skip
    slave = ServeProcess(tmp_path / "rmq-slave", slave_conf, ["--no-namesrv", "--namesrv", ns, "--verbose"])
    try:
        namesrv.wait_for("The Name Server boot success")
        master.wait_for("boot success")
        wait_registered(ns, f"127.0.0.1:{master_port}")
        slave.start()
        wait_until(lambda: "update master address" in slave.output(), 30, "the slave learns its master")
        clienttest(ns, "TopicMixedA", env, tmp_path)
        wait_until(ends_meet(slave.store, master_store), 30, "the rmq slave caught up")
        time.sleep(1.5)  # the real broker's runtime stats (see the kit's README)
        members = cluster_members(ns, env, tmp_path)
        assert members == {("mixed-a", "0", f"127.0.0.1:{master_port}"), ("mixed-a", "1", slave.broker)}
        # haStatus is RocketMQ 5's: the 4.9.8 master does not know the request, the rmq slave does
        refused = rmq("haStatus", "-b", f"127.0.0.1:{master_port}")
        assert refused.exit_code == 6 and "REQUEST_CODE_NOT_SUPPORTED(3)" in refused.stderr
        topics = slave.store / "config" / "topics.json"

        def synced() -> bool:
            return topics.is_file() and "TopicMixedA" in json.loads(topics.read_text())["topicConfigTable"]

        wait_until(synced, 25, "the real master's topics copied to the rmq slave (SlaveSynchronize)")
        linked = rmq("haStatus", "-b", slave.broker, "--json")
        assert linked.exit_code == 0, linked.stderr
        client = json.loads(linked.stdout)[0]["info"]["haClientRuntimeInfo"]
        assert client["masterAddr"] == f"127.0.0.1:{master_port + 1}"
        assert slave.stop() == 0
    finally:
        slave.kill()
        master.stop()
        namesrv.stop()
    same_commitlogs(rmq, master_store, slave.store)
    master_units = units(queue_files(master_store, "TopicMixedA"))
    assert sum(len(u) for u in master_units.values()) == 3000 * 20
    assert units(queue_files(slave.store, "TopicMixedA")) == master_units


def test_rmq_master_with_a_real_slave(rmq, tmp_path: Path) -> None:
    env = java_env(tmp_path)
    master_conf = write_conf(
        tmp_path / "master.conf", brokerName="mixed-b", brokerClusterName="MixedCluster",
        brokerRole="ASYNC_MASTER", mappedFileSizeCommitLog=str(FILE), brokerIP1="127.0.0.1",
    )  # fmt: skip
    master = ServeProcess(tmp_path / "rmq-master", master_conf, ["--verbose"])
    slave_port = broker_port()
    slave_store = tmp_path / "real-slave"
    master.start()
    conf = real_conf(
        tmp_path / "slave.conf", brokerName="mixed-b", brokerId=1, brokerRole="SLAVE",
        listenPort=slave_port, storePathRootDir=slave_store, namesrvAddr=master.namesrv,
    )  # fmt: skip
    slave = Jvm([str(KIT / "bin" / "broker"), "-c", str(conf)], tmp_path / "slave.out", env)
    try:
        slave.wait_for("boot success")
        # a 4.9.8 slave reports its offset a heartbeat interval after it connects; bytes sent before
        # that are served from the start of the master's last file on, as a real master serves them
        reported = "master transfer data from"
        wait_until(lambda: reported in master.output(), 60, "the real slave's first report")
        clienttest(master.namesrv, "TopicMixedB", env, tmp_path)
        wait_until(ends_meet(slave_store, master.store), 30, "the real slave caught up")
        time.sleep(1.5)
        members = cluster_members(master.namesrv, env, tmp_path)
        assert members == {("mixed-b", "0", master.broker), ("mixed-b", "1", f"127.0.0.1:{slave_port}")}
        assert master.stop() == 0
    finally:
        master.kill()
        slave.stop()
    same_commitlogs(rmq, master.store, slave_store)
    master_units = units(queue_files(master.store, "TopicMixedB"))
    assert sum(len(u) for u in master_units.values()) == 3000 * 20
    assert units(queue_files(slave_store, "TopicMixedB")) == master_units
