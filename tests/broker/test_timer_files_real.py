"""``rmq serve`` keeps its pending timers in RocketMQ 5.1.1's timer files, and reads 5.1.1's: a real
5.1.1 broker (``../shared/rocketmq-5.1.1``) started on a store ``rmq serve`` left delivers rmq's
pending timers, and ``rmq serve`` started on a store the real broker left delivers that broker's
pending timers. In both, what is delivered after the switch is exactly what ``rmq dump-timer``
listed before it (topic, UNIQ_KEY, TIMER_OUT_MS): a timer delivered before the stop is not delivered
again, one cancelled by a marker is not delivered, and ``rmq verify`` passes the store."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from formats import timer as tfmt
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.store.timer import TimerCheckpoint, read_timer_checkpoint
from tests.broker.test_timer_serve import tsend
from tests.support import popwire as w
from tests.support.cli import rmq_json, run_rmq
from tests.support.oracle5 import real_cluster5
from tests.support.serve import ServeProcess, wait_until, write_conf

pytestmark = [pytest.mark.java, pytest.mark.java5]

TOPICS = ("TimerA", "TimerB")
PRECISION_MS = 1000
CL_SIZE = "16777216"  # the CommitLog file size of both (write_broker_conf's)


def now_ms() -> int:
    return int(time.time() * 1000)


def timer_check(store: Path) -> TimerCheckpoint:
    return read_timer_checkpoint(store / tfmt.CHECKPOINT_FILE) or TimerCheckpoint()


def real5(home: Path) -> Any:
    """The 5.1.1 NameServer and broker on ``home/store``, stopped with SIGTERM (a clean shutdown)."""
    return real_cluster5(home, clean_stop=True)


def serve(home: Path) -> ServeProcess:
    return ServeProcess(home / "store", write_conf(home / "serve.conf", mappedFileSizeCommitLog=CL_SIZE))


def send_timers(broker: str, store: Path) -> dict[str, int]:
    """Topics, an early timer (delivered at once), four timers 30-39 s ahead and a marker cancelling
    K1; returns the messages in each topic once the timer files hold them all."""
    for topic in TOPICS:
        assert w.create_topic(broker, topic, 1).code == RS.SUCCESS
    assert tsend(broker, {"UNIQ_KEY": "EARLY", "TIMER_DELAY_SEC": "1"}, topic=TOPICS[0]).code == 0
    wait_until(lambda: w.pull_all(broker, TOPICS[0], 0), 30, "the early timer")
    base = now_ms() + 30_000
    for i in range(4):
        props = {"UNIQ_KEY": f"K{i}", "TIMER_DELIVER_MS": str(base + i * 3000)}
        assert tsend(broker, props, topic=TOPICS[i % 2]).code == 0
    marker = {"UNIQ_KEY": "C1", "TIMER_DEL_UNIQKEY": "K1", "TIMER_DELIVER_MS": str(base + 3000)}
    assert tsend(broker, marker, topic=TOPICS[1]).code == 0
    wait_until(lambda: timer_check(store).master_timer_queue_offset >= 6, 30, "the timer checkpoint")
    return {t: len(w.pull_all(broker, t, 0)) for t in TOPICS}


def listed(store: Path) -> set[tuple[str, str, int]]:
    """What ``rmq dump-timer`` says will be delivered; ``rmq verify`` passes the store."""
    verify = run_rmq("verify", str(store))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    dump = rmq_json("dump-timer", str(store), "--json")
    assert isinstance(dump, dict)
    return {(t["topic"], t["msgId"], t["outMs"]) for t in dump["timers"]}


def delivered_after(broker: str, store: Path, before: dict[str, int], last: int) -> set[tuple[str, str, int]]:
    wait_until(lambda: timer_check(store).last_read_time_ms > last + PRECISION_MS, 120, "the last slot read")
    return {
        (topic, r.properties["UNIQ_KEY"], int(r.properties["TIMER_OUT_MS"]))
        for topic in TOPICS
        for r in w.pull_all(broker, topic, 0)[before[topic] :]
    }


def test_real_broker_delivers_rmq_pending_timers(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ours = serve(tmp_path).start()
    try:
        before = send_timers(ours.broker, store)
    finally:
        ours.stop()
    expected = listed(store)
    assert {m for _, m, _ in expected} == {"K0", "K2", "K3"}
    with real5(tmp_path) as real:
        got = delivered_after(real.broker, store, before, max(out for _, _, out in expected))
    assert got == expected


def test_rmq_serve_delivers_real_pending_timers(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with real5(tmp_path) as real:
        before = send_timers(real.broker, store)
    (store / "lock").unlink(missing_ok=True)
    expected = listed(store)
    assert {m for _, m, _ in expected} == {"K0", "K2", "K3"}
    ours = serve(tmp_path).start()
    try:
        got = delivered_after(ours.broker, store, before, max(out for _, _, out in expected))
    finally:
        ours.stop()
    assert got == expected
