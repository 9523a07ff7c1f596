"""The records the broker builds from stored ones (send-back, delayed delivery, transactions) against
the records a real RocketMQ 4.9.8 broker wrote in ``../shared/fixtures/real/basic-1`` (its workload
sent delay messages, had a consumer return RECONSUME_LATER and ran a TransactionMQProducer).

Each case starts from the real input record (the one ``lookMessageByOffset`` would read), builds our
``MessageExtBrokerInner`` and compares what the store writes for it with the real output record.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from formats import commitlog as fmt
from rmqcli.broker.processor import sendback, transaction
from rmqcli.broker.services import schedule
from rmqcli.broker.services.msgext import PROPERTY_ORIGIN_MESSAGE_ID, PROPERTY_TRANSACTION_CHECK_TIMES
from rmqcli.store import Store
from rmqcli.store.read.commitlog import Record
from rmqcli.store.write.messages import InnerMessage, apply_delay
from tests.support.realfixtures import REAL_ROOT

BASIC = REAL_ROOT / "basic-1" / "store"
pytestmark = pytest.mark.real


@dataclass
class Real:
    records: list[Record]
    by_offset: dict[int, Record]

    def topic(self, name: str) -> list[Record]:
        return [r for r in self.records if r.topic == name]


@pytest.fixture(scope="module")
def real() -> Iterator[Real]:
    store = Store.open(BASIC)
    try:
        records = [r for r in store.commitlog.records() if isinstance(r, Record)]
        yield Real(records, {r.physical_offset: r for r in records})
    finally:
        store.close()


def stored_fields(inner: InnerMessage) -> tuple:
    """What the writer stores for ``inner`` besides offsets and the store time."""
    text = inner.properties_string
    if text is None:
        text = fmt.encode_properties_as_broker(inner.properties)
    return (
        inner.topic, inner.queue_id, text, inner.sys_flag, inner.flag, inner.born_timestamp,
        inner.born_host.address, inner.born_host.port, inner.reconsume_times,
        inner.prepared_transaction_offset, inner.body,
    )  # fmt: skip


def record_fields(rec: Record) -> tuple:
    return (
        rec.topic, rec.queue_id, rec.properties_raw, rec.sys_flag, rec.flag, rec.born_timestamp,
        rec.born_address, rec.born_port, rec.reconsume_times, rec.prepared_transaction_offset,
        rec.stored_body,
    )  # fmt: skip


def test_delayed_delivery_builds_the_brokers_record(real: Real) -> None:
    scheduled = real.topic(fmt.SCHEDULE_TOPIC)
    assert len(scheduled) == 50
    for rec in scheduled:
        delivered = [
            r for r in real.records
            if r.physical_offset > rec.physical_offset and r.topic == rec.properties[fmt.PROPERTY_REAL_TOPIC]
            and r.uniq_key == rec.uniq_key and r.reconsume_times == rec.reconsume_times
        ]  # fmt: skip
        assert delivered, rec.msg_id
        inner = schedule.delivered_message(rec)
        assert stored_fields(inner) == record_fields(delivered[0])
        assert fmt.PROPERTY_DELAY not in inner.properties  # the map decides: no second delay
        assert (inner.store_host.address, inner.store_host.port) == (rec.store_address, rec.store_port)


def test_send_back_builds_the_brokers_scheduled_retry(real: Real) -> None:
    retries = [r for r in real.topic(fmt.SCHEDULE_TOPIC) if "RETRY_TOPIC" in r.properties]
    assert len(retries) == 20
    for sched in retries:
        origin = fmt.decode_offset_msg_id(sched.properties[PROPERTY_ORIGIN_MESSAGE_ID])[2]
        original = real.by_offset[origin]
        level = 3 + original.reconsume_times  # a consumer's RECONSUME_LATER sends level 0
        inner = sendback.send_back_message(original, "%RETRY%GroupRetry", 0, level)
        apply_delay(inner, len(fmt.DEFAULT_DELAY_MILLIS))  # what CommitLog.putMessage does next
        assert stored_fields(inner) == record_fields(sched)


def test_send_back_to_the_dlq_is_not_delayed(real: Real) -> None:
    original = real.topic("TopicA")[0]
    inner = sendback.send_back_message(original, "%DLQ%G", 0, 0)
    apply_delay(inner, len(fmt.DEFAULT_DELAY_MILLIS))
    assert (inner.topic, inner.reconsume_times) == ("%DLQ%G", original.reconsume_times + 1)
    props = fmt.decode_properties(fmt.encode_properties_as_broker(inner.properties))
    assert props["DELAY"] == "0" and props["RETRY_TOPIC"] == "TopicA"
    assert props[PROPERTY_ORIGIN_MESSAGE_ID] == original.msg_id


def test_commit_builds_the_brokers_real_message(real: Real) -> None:
    committed = [r for r in real.topic("TxTopic")]
    assert len(committed) == 30
    for rec in committed:
        assert rec.sys_flag & fmt.TRANSACTION_MASK == transaction.COMMIT
        half = real.by_offset[rec.prepared_transaction_offset]
        assert half.topic == transaction.HALF_TOPIC
        inner = transaction.committed_message(half)
        assert stored_fields(inner) == record_fields(rec)


def test_op_messages_are_the_brokers(real: Real) -> None:
    ops = real.topic(transaction.OP_TOPIC)
    halves = {r.queue_offset for r in real.topic(transaction.HALF_TOPIC)}
    assert len(ops) == 54
    for op in ops:
        half_offset = int(op.stored_body)
        assert half_offset in halves
        host = transaction.Host(op.born_address, op.born_port)
        inner = transaction.op_message(half_offset, 0, host, op.born_timestamp)
        assert stored_fields(inner) == record_fields(op)


def test_renewed_half_messages_are_the_brokers(real: Real) -> None:
    halves = real.topic(transaction.HALF_TOPIC)
    renewed = [r for r in halves if PROPERTY_TRANSACTION_CHECK_TIMES in r.properties]
    assert renewed
    for rec in renewed:
        times = int(rec.properties[PROPERTY_TRANSACTION_CHECK_TIMES])
        before = [
            r for r in halves
            if r.physical_offset < rec.physical_offset and r.uniq_key == rec.uniq_key
            and int(r.properties.get(PROPERTY_TRANSACTION_CHECK_TIMES, "0")) == times - 1
        ]  # fmt: skip
        assert before, rec.msg_id
        props = dict(before[-1].properties)
        props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(times)
        inner = transaction.renewed_half_message(before[-1], props)
        assert stored_fields(inner) == record_fields(rec)
