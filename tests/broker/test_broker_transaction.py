"""The transaction check in process over a real store (``TransactionalMessageServiceImpl.check`` of
4.9.x): resolved half messages are passed, young ones stop the walk, old unresolved ones are stored
again with ``TRANSACTION_CHECK_TIMES`` + 1, and those checked too often or born more than
``fileReservedTime`` ago go to ``TRANS_CHECK_MAX_TIME_TOPIC``; the system group's half and op
offsets move as far as they are done."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path

from rmqcli.broker.controller import BrokerController
from rmqcli.broker.processor import transaction as tx
from rmqcli.store.retention import RetentionConfig
from rmqcli.store.write.messages import Message
from tests.support.controller import broker_controller

T0 = 1_800_000_000_000
HOUR = 3_600_000


def controller(root: Path, clock: list[int], **config: int) -> AbstractContextManager[BrokerController]:
    return broker_controller(
        root, clock, **{"transaction_timeout": 6000, "transaction_check_max": 2, **config}
    )


def half(ctl: BrokerController, key: str, born: int, **extra: str) -> None:
    """A half message of producer group PG with KEYS ``key`` (and ``extra`` properties)."""
    props = {"KEYS": key, "TRAN_MSG": "true", "PGROUP": "PG", **extra}
    tx.prepare(ctl, Message("TopicT", 0, key.encode(), props, sys_flag=4, born_timestamp=born))


def check_at(ctl: BrokerController, clock: list[int], now: int) -> int:
    """The transaction check at ``now``, the store's clock at ``now`` too."""
    clock[0] = now
    return ctl.transactions.check(now=now)


def keys(ctl: BrokerController, topic: str) -> list[tuple[str, str | None]]:
    units = ctl.store.units(topic, 0, 0, 100)
    recs = [ctl.store.look_message(u.physical_offset) for u in units]
    return [
        (r.properties["KEYS"], r.properties.get("TRANSACTION_CHECK_TIMES")) for r in recs if r is not None
    ]


def offsets(ctl: BrokerController) -> tuple[int, int]:
    return (
        ctl.offsets.query(tx.SYSTEM_GROUP, tx.HALF_TOPIC, 0),
        ctl.offsets.query(tx.SYSTEM_GROUP, tx.OP_TOPIC, 0),
    )


def test_the_check_walks_the_half_queue(tmp_path: Path) -> None:
    clock = [T0]
    with controller(tmp_path / "store", clock) as ctl:
        half(ctl, "done", T0 - 10_000)
        half(ctl, "open", T0 - 10_000)
        half(ctl, "young", T0 - 1_000)
        first = ctl.store.look_message(ctl.store.units(tx.HALF_TOPIC, 0, 0, 1)[0].physical_offset)
        assert first is not None
        tx.put_op(ctl, first)  # "done" was committed or rolled back
        assert check_at(ctl, clock, T0 + 1) == 0  # no producer online: nobody to ask
        # "open" was stored again with one check; "young" stopped the walk
        assert keys(ctl, tx.HALF_TOPIC)[3:] == [("open", "1")]
        assert offsets(ctl) == (2, 1)
        check_at(ctl, clock, T0 + 10_000)  # young is old enough now; the renewed open is checked again
        assert keys(ctl, tx.HALF_TOPIC)[4:] == [("young", "1"), ("open", "2")]
        check_at(ctl, clock, T0 + 20_000)
        # the open one was checked transactionCheckMax (2) times: moved aside, not renewed
        assert keys(ctl, tx.CHECK_MAX_TIME_TOPIC) == [("open", "2")]
        assert keys(ctl, tx.HALF_TOPIC)[6:] == [("young", "2")]
        assert offsets(ctl) == (6, 1)


def test_half_messages_older_than_the_reserved_time_are_moved_aside(tmp_path: Path) -> None:
    clock = [T0]
    with controller(tmp_path / "store", clock, retention=RetentionConfig(file_reserved_time=1)) as ctl:
        half(ctl, "ancient", T0 - 2 * HOUR)
        check_at(ctl, clock, T0 + 1)
        assert keys(ctl, tx.CHECK_MAX_TIME_TOPIC) == [("ancient", "1")]
        assert keys(ctl, tx.HALF_TOPIC) == [("ancient", None)]
        assert offsets(ctl)[0] == 1


def test_ops_of_earlier_half_offsets_move_the_op_offset(tmp_path: Path) -> None:
    clock = [T0]
    with controller(tmp_path / "store", clock) as ctl:
        for key in ("a", "b", "c"):
            half(ctl, key, T0 - 10_000)
        recs = [ctl.store.look_message(u.physical_offset) for u in ctl.store.units(tx.HALF_TOPIC, 0, 0, 3)]
        for rec in (recs[2], recs[0], recs[1]):  # resolved out of order
            assert rec is not None
            tx.put_op(ctl, rec)
        check_at(ctl, clock, T0 + 1)
        assert offsets(ctl) == (3, 3)  # all three done: both offsets past them
        assert len(keys(ctl, tx.HALF_TOPIC)) == 3  # nothing renewed


def test_a_half_message_within_its_own_immunity_time_is_put_back_not_checked(tmp_path: Path) -> None:
    clock = [T0]
    with controller(tmp_path / "store", clock) as ctl:
        half(ctl, "imm", T0 - 10_000, CHECK_IMMUNITY_TIME_IN_SECONDS="60")
        check_at(ctl, clock, T0 + 1)  # 10 s old: past transactionTimeOut, not past 60 s
        [_, again] = [
            ctl.store.look_message(u.physical_offset) for u in ctl.store.units(tx.HALF_TOPIC, 0, 0, 2)
        ]
        assert again is not None
        assert again.properties["TRAN_PREPARED_QUEUE_OFFSET"] == "0"  # remembers the first offset
        assert again.properties["TRANSACTION_CHECK_TIMES"] == "1" and again.properties["WAIT"] == "false"
        first = ctl.store.look_message(ctl.store.units(tx.HALF_TOPIC, 0, 0, 1)[0].physical_offset)
        assert first is not None
        tx.put_op(ctl, first)  # the producer ends the transaction of the first record
        check_at(ctl, clock, T0 + 2)
        # as in Java, an op for an offset below the half offset only counts as done: the copy does
        # not find its remembered offset among the removed ones and is put back once more
        assert offsets(ctl) == (2, 1)
        assert keys(ctl, tx.HALF_TOPIC) == [("imm", None), ("imm", "1"), ("imm", "2")]


def test_an_unreadable_check_count_counts_as_minus_one(tmp_path: Path) -> None:
    """``getInt`` answers -1 for text that is not a number: the next count is 0."""
    clock = [T0]
    with controller(tmp_path / "store", clock) as ctl:
        half(ctl, "odd", T0 - 10_000, TRANSACTION_CHECK_TIMES="x")
        check_at(ctl, clock, T0 + 1)
        assert keys(ctl, tx.HALF_TOPIC) == [("odd", "x"), ("odd", "0")]


def test_a_committed_message_with_a_timer_property_waits_in_the_timer(tmp_path: Path) -> None:
    """5.x: the final message of a commit goes through putMessage's timer hook, as any put; the
    half message itself is not timed (a prepared message never is)."""
    from rmqcli.broker.timer.api import TIMER_TOPIC
    from rmqcli.broker.timer.service import now_ms, timer_service
    from rmqcli.remoting import headers as hd
    from rmqcli.remoting.codec import RemotingCommand
    from rmqcli.remoting.codes import RequestCode as RC
    from rmqcli.remoting.codes import ResponseCode as RS

    clock = [now_ms()]
    with controller(tmp_path / "store", clock) as ctl:
        half(ctl, "timed", clock[0], TIMER_DELAY_SEC="3", UNIQ_KEY="U-timed")
        unit = ctl.store.units(tx.HALF_TOPIC, 0, 0, 1)[0]
        end = hd.EndTransactionRequestHeader(
            producer_group="PG", tran_state_table_offset=0, commit_log_offset=unit.physical_offset,
            commit_or_rollback=tx.COMMIT, msg_id="U-timed",
        )  # fmt: skip
        response = tx.end_transaction(
            ctl, RemotingCommand.request(RC.END_TRANSACTION, end.to_ext_fields()), None
        )
        assert response is not None and response.code == RS.SUCCESS
        assert ctl.store.max_offset("TopicT", 0) == 0  # not there yet
        assert ctl.store.max_offset(TIMER_TOPIC, 0) == 1
        timer_service(ctl).deliver_due(now_ms() + 5000)
        assert keys(ctl, "TopicT") == [("timed", None)]
        delivered = ctl.store.look_message(ctl.store.units("TopicT", 0, 0, 1)[0].physical_offset)
        assert delivered is not None and "TIMER_DEQUEUE_MS" in delivered.properties
