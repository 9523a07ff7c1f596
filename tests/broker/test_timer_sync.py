"""A slave's copy of its master's timer (RocketMQ 5.1.1 ``SlaveSynchronize.syncTimerCheckPoint``,
every 3 s from 10 s after start, and ``syncTimerMetrics`` with the config sync): an ``rmq serve``
master answers GET_TIMER_CHECK_POINT (60) and GET_TIMER_METRICS (61) as 5.1.1's
``AdminBrokerProcessor`` does, and an ``rmq serve`` slave keeps what its master (rmq's, or the real
5.1.1 broker of ``../shared/rocketmq-5.1.1``) answers in its ``config/timercheck`` and
``config/timermetrics``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from formats import timer as tfmt
from rmqcli.broker.timer.sync import decode_checkpoint
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.store.timer import read_timer_checkpoint, read_timer_metrics
from tests.broker.test_ha_serve import Member, pair
from tests.broker.test_timer_serve import tsend
from tests.support import popwire as w
from tests.support.oracle5 import real_cluster5
from tests.support.serve import wait_until

TOPIC = "TimerSynced"


def send_timers(broker: str, count: int = 3) -> None:
    """``count`` timers a minute ahead (pending while the test runs)."""
    assert w.create_topic(broker, TOPIC, 1).code == RS.SUCCESS
    for i in range(count):
        assert tsend(broker, {"UNIQ_KEY": f"S{i}", "TIMER_DELAY_SEC": "60"}, topic=TOPIC).code == 0


def answers(broker: str) -> tuple[tuple, dict]:
    """The master's checkpoint (decoded) and metrics document."""
    cp = w.call(broker, RC.GET_TIMER_CHECK_POINT)
    metrics = w.call(broker, RC.GET_TIMER_METRICS)
    assert cp.code == metrics.code == RS.SUCCESS, (cp.remark, metrics.remark)
    assert len(cp.body) == tfmt.CHECKPOINT_STRUCT.size
    return tuple(vars(decode_checkpoint(cp.body)).values()), json.loads(metrics.body)


def synced(slave_store: Path, master: str) -> bool:
    """The slave's checkpoint names the master's timer-queue offset and read time, its metrics are
    the master's."""
    ours = read_timer_checkpoint(slave_store / tfmt.CHECKPOINT_FILE)
    counts = read_timer_metrics(slave_store / tfmt.METRICS_FILE)
    if ours is None or counts is None:
        return False
    theirs, doc = answers(master)
    return (
        ours.master_timer_queue_offset == theirs[3] > 0
        and 0 < ours.last_read_time_ms <= theirs[0]
        and counts == {t: m["count"] for t, m in doc["timingCount"].items()}
    )


def test_rmq_slave_syncs_the_rmq_masters_timer(tmp_path: Path) -> None:
    with pair(tmp_path, "ASYNC_MASTER") as (master, slave):
        send_timers(master.broker)
        wait_until(lambda: answers(master.broker)[0][3] >= 3, 20, "the master's timer checkpoint")
        cp, doc = answers(master.broker)
        on_disk = read_timer_checkpoint(master.store / tfmt.CHECKPOINT_FILE)
        assert on_disk is not None and on_disk.master_timer_queue_offset == cp[3] == 3
        assert {t: m["count"] for t, m in doc["timingCount"].items()} == {TOPIC: 3}
        assert set(doc) == {"dataVersion", "timingCount"}
        wait_until(lambda: synced(slave.store, master.broker), 40, "the slave's timer checkpoint and metrics")
        ours = read_timer_checkpoint(slave.store / tfmt.CHECKPOINT_FILE)
        assert ours is not None and ours.last_timer_queue_offset == 0  # its own: no timerlog of its own
        slave_doc = json.loads((slave.store / tfmt.METRICS_FILE).read_text())
        assert slave_doc["dataVersion"] == answers(master.broker)[1]["dataVersion"]


def test_without_the_timer_both_answers_are_refused(tmp_path: Path) -> None:
    master = Member(tmp_path, "m", "ASYNC_MASTER", timerWheelEnable="false").start()
    try:
        cp = w.call(master.broker, RC.GET_TIMER_CHECK_POINT)
        metrics = w.call(master.broker, RC.GET_TIMER_METRICS)
    finally:
        master.kill()
    assert (cp.code, cp.remark) == (RS.SYSTEM_ERROR, "The checkpoint is null")
    assert (metrics.code, metrics.remark) == (RS.SYSTEM_ERROR, "The timer message store is null")


@pytest.mark.java
@pytest.mark.java5
def test_rmq_slave_syncs_the_real_masters_timer(tmp_path: Path) -> None:
    """The real 5.1.1 master's answers, and an ``rmq serve`` slave of it keeping them."""
    (tmp_path / "real").mkdir()
    with real_cluster5(tmp_path / "real") as real:
        send_timers(real.broker)
        wait_until(lambda: answers(real.broker)[0][3] >= 3, 30, "the real master's timer checkpoint")
        _cp, doc = answers(real.broker)
        assert {t: m["count"] for t, m in doc["timingCount"].items()} == {TOPIC: 3}
        slave = Member(tmp_path, "slave", "SLAVE", namesrv=real.namesrv, mappedFileSizeCommitLog="16777216")
        slave.start()
        try:
            wait_until(lambda: synced(slave.store, real.broker), 45, "the slave's timer files")
        finally:
            slave.kill()
        slave_doc = json.loads((slave.store / tfmt.METRICS_FILE).read_text())
        assert slave_doc["dataVersion"] == answers(real.broker)[1]["dataVersion"]
