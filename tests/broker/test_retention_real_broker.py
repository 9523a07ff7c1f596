"""The real 4.9.8 broker's clean-up against rmq's: the same store and settings, side by side, delete
the same files, and ``rmq clean`` planned exactly those (skipped without Java 17 or the kit)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from rmqcli.store.retention import HOUR_MS
from tests.support.cli import invoke_rmq
from tests.support.oracle import HAVE_JAVA, KIT, Jvm, broker_port
from tests.support.retention import age, build_store, commitlog_names, store_files, write_conf
from tests.support.serve import ServeProcess, wait_until

HOUR = time.localtime().tm_hour
THIS_HOUR = f"{HOUR:02d};{(HOUR + 1) % 24:02d}"


@pytest.mark.java
@pytest.mark.skipif(not HAVE_JAVA, reason="Java 17 or ../shared/rocketmq-4.9.8 is missing")
def test_the_real_broker_deletes_the_files_rmq_deletes_and_plans(tmp_path: Path) -> None:
    source = tmp_path / "source"
    build_store(source, offsets={"G": 0})
    names = commitlog_names(source)
    age(source, names[:2], int(time.time() * 1000) - 3 * HOUR_MS)  # expired: two files of four
    real, ours = tmp_path / "real", tmp_path / "ours"
    shutil.copytree(source, real)  # copy2: the mtimes come along
    shutil.copytree(source, ours)
    before = store_files(source)
    keys = {"fileReservedTime": "1", "deleteWhen": THIS_HOUR, "cleanResourceInterval": "1000"}
    plan = invoke_rmq(
        "clean", str(ours), "--config", str(write_conf(tmp_path / "plan.conf", **keys)), "--json"
    )
    assert plan.exit_code == 0, plan.output
    planned = {step["path"] for step in json.loads(plan.stdout)["steps"]}

    port = broker_port()
    conf = write_conf(
        tmp_path / "real.conf",
        brokerClusterName="RealRetention",
        brokerName="real-retention",
        brokerId="0",
        listenPort=str(port),
        haListenPort=str(port + 1),
        brokerIP1="127.0.0.1",
        storePathRootDir=str(real),
        **keys,
    )
    env = {k: v for k, v in os.environ.items() if k != "JAVA_OPT_EXT"}
    env["ORACLE_STATE_DIR"] = str(tmp_path / "state")
    broker = Jvm([str(KIT / "bin" / "broker"), "-c", str(conf)], tmp_path / "broker.out", env)
    served = ServeProcess(ours, write_conf(tmp_path / "ours.conf", brokerName="ours", **keys))
    try:
        broker.wait_for("boot success")
        served.start()
        # both first rounds come 60 s after start; CommitLog files go first, then the queues follow
        wait_until(lambda: commitlog_names(real) == names[2:], 100, "the real broker's deletion")
        wait_until(lambda: commitlog_names(ours) == names[2:], 30, "rmq serve's deletion")
        time.sleep(3)
        deleted_real = before - store_files(real)
        deleted_ours = before - store_files(ours)
    finally:
        broker.stop()
        served.kill()
    assert deleted_real == deleted_ours == planned
    assert {p for p in planned if p.startswith("commitlog/")} == {f"commitlog/{n}" for n in names[:2]}
    assert any(p.startswith("consumequeue/") for p in planned)
