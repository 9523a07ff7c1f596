"""``rmq delay-report`` and ``rmq tx-report`` on the real-broker store and on stores the broker's own
services wrote here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from formats.names import TRANS_HALF_TOPIC
from rmqcli.broker.processor import transaction as tx
from rmqcli.store.settings import StoreSettings
from rmqcli.store.write.messages import Message
from rmqcli.store.write.writer import StoreWriter
from tests.support import SHARED
from tests.support.cli import invoke_rmq
from tests.support.controller import broker_controller

BASIC = SHARED / "fixtures" / "real" / "basic-1"
needs_basic = pytest.mark.real
T0 = 1_800_000_000_000


def report(*args: str) -> list[dict]:
    result = invoke_rmq(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@needs_basic
def test_the_real_store_s_six_unknown_transactions_are_pending_after_two_checks() -> None:
    # 60 half messages: 30 committed, 24 rolled back, 6 answered UNKNOW and checked twice (README)
    rows = report("tx-report", str(BASIC / "store"))
    assert [r["keys"] for r in rows] == [f"tx-1-{i}" for i in range(9, 60, 10)]
    assert {(r["state"], r["topic"], r["producerGroup"], r["checks"]) for r in rows} == {
        ("pending", "TxTopic", "PG_TX", 2)
    }
    assert [r["queueOffset"] for r in rows] == list(range(66, 72))


@needs_basic
def test_the_real_store_s_delay_levels_match_the_live_topic_status() -> None:
    rows = {r["level"]: r for r in report("delay-report", str(BASIC / "store"))}
    live = (BASIC / "mqadmin" / "topicStatus_SCHEDULE_TOPIC_XXXX.txt").read_text().splitlines()[1:]
    for line in live:
        qid, _min, high = line.split()[1:4]
        assert rows[int(qid) + 1]["maxOffset"] == int(high)
    assert all(r["waiting"] == 0 and r["nextDue"] is None for r in rows.values())  # all delivered
    assert [rows[level]["delayMs"] for level in (1, 2, 3, 18)] == [1000, 5000, 10000, 7_200_000]


def test_waiting_delayed_messages_are_listed_with_their_due_times(tmp_path: Path) -> None:
    root = tmp_path / "store"
    writer = StoreWriter(root, StoreSettings(), clock=lambda: T0)
    try:
        for i, level in enumerate((1, 3, 3, 18)):
            writer.append(Message("TopicD", i % 2, b"later", {"KEYS": f"d{i}", "DELAY": str(level)}))
        writer.config.delay_offsets[3] = 1  # the schedule service delivered the first level-3 message
    finally:
        writer.close()
    rows = {r["level"]: r for r in report("delay-report", str(root))}
    assert (rows[1]["waiting"], rows[1]["nextDue"], rows[1]["lastDue"]) == (1, T0 + 1000, T0 + 1000)
    assert (rows[3]["progress"], rows[3]["maxOffset"], rows[3]["waiting"]) == (1, 2, 1)
    assert rows[18]["nextDue"] == T0 + 7_200_000 and rows[2]["waiting"] == 0
    listed = report("delay-report", str(root), "--list")
    assert [(w["level"], w["keys"], w["topic"], w["queueId"], w["due"]) for w in listed] == [
        (1, "d0", "TopicD", 0, T0 + 1000),
        (3, "d2", "TopicD", 0, T0 + 10_000),
        (18, "d3", "TopicD", 1, T0 + 7_200_000),
    ]


def test_transactions_checked_too_often_are_reported_as_given_up(tmp_path: Path) -> None:
    root = tmp_path / "store"
    clock = [T0]
    with broker_controller(root, clock, transaction_timeout=6000, transaction_check_max=1) as ctl:
        for key in ("open", "settled"):
            props = {"KEYS": key, "TRAN_MSG": "true", "PGROUP": "PG"}
            tx.prepare(ctl, Message("TopicT", 0, b"x", props, sys_flag=4, born_timestamp=T0 - 10_000))
        settled = ctl.store.look_message(ctl.store.units(TRANS_HALF_TOPIC, 0, 1, 1)[0].physical_offset)
        tx.put_op(ctl, settled)  # as END_TRANSACTION writes it
        for now in (T0 + 1000, T0 + 120_000):  # checked once (put back, TRANSACTION_CHECK_TIMES=1), then
            clock[0] = now  # past transactionCheckMax: given up
            ctl.transactions.check(now=now)
        props = {"KEYS": "young", "TRAN_MSG": "true", "PGROUP": "PG"}
        tx.prepare(ctl, Message("TopicT", 0, b"x", props, sys_flag=4, born_timestamp=T0 + 119_000))
        ctl.persist()
    rows = report("tx-report", str(root))
    assert [(r["state"], r["keys"], r["checks"]) for r in rows] == [
        ("pending", "young", 0),
        ("given-up", "open", 1),
    ]
    assert all(r["producerGroup"] == "PG" and r["topic"] == "TopicT" for r in rows)
