"""``rmq tx-report``: transactions a store holds open, and those the broker gave up on.

Half messages wait in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0; END_TRANSACTION and the check service's
verdicts write op messages (tag ``d``, body the half message's queue offset) to
``RMQ_SYS_TRANS_OP_HALF_TOPIC``. The check service's progress on both is the committed offset of
``CID_RMQ_SYS_TRANS`` (``TransactionalMessageServiceImpl``): a half message at or past it with no op
message is pending. Each check re-puts the half message with ``TRANSACTION_CHECK_TIMES`` one higher;
one checked ``transactionCheckMax`` times goes to ``TRANS_CHECK_MAX_TIME_TOPIC`` instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from formats.commitlog import (
    PROPERTY_KEYS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_CHECK_TIMES,
)
from formats.names import TRANS_CHECK_GROUP, TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from rmqcli.errors import CorruptDataError
from rmqcli.store import Store
from rmqcli.store.configfiles import OFFSETS, load_config, parse_consumer_offsets
from rmqcli.store.read.commitlog import Record
from rmqcli.store.store import CONFIG_DIR

REMOVE_TAG = "d"  # TransactionalMessageUtil.REMOVETAG


@dataclass(frozen=True)
class HalfRow:
    """A half message: pending, or (``given_up``) moved to TRANS_CHECK_MAX_TIME_TOPIC."""

    topic_offset: int  # its queue offset in the half topic (or the give-up topic)
    topic: str  # the real topic
    producer_group: str
    transaction_id: str | None  # UNIQ_KEY
    keys: str
    born_timestamp: int
    store_timestamp: int
    checks: int
    given_up: bool = False

    def to_dict(self, now_ms: int) -> dict[str, Any]:
        return {
            "state": "given-up" if self.given_up else "pending",
            "queueOffset": self.topic_offset,
            "topic": self.topic,
            "producerGroup": self.producer_group,
            "transactionId": self.transaction_id,
            "keys": self.keys,
            "bornTimestamp": self.born_timestamp,
            "ageMs": max(now_ms - self.born_timestamp, 0),
            "checks": self.checks,
        }


def _row(rec: Record, offset: int, given_up: bool) -> HalfRow:
    props = rec.properties
    checks = props.get(PROPERTY_TRANSACTION_CHECK_TIMES, "0")
    return HalfRow(
        offset,
        props.get(PROPERTY_REAL_TOPIC, rec.topic),
        props.get(PROPERTY_PRODUCER_GROUP, ""),
        rec.uniq_key,
        props.get(PROPERTY_KEYS, ""),
        rec.born_timestamp,
        rec.store_timestamp,
        int(checks) if checks.isdigit() else 0,
        given_up,
    )


def _records(store: Store, topic: str, start: int = 0) -> Iterator[tuple[int, Record]]:
    if (topic, 0) not in store.queue_ids(topic):
        return
    for unit in store.consume_queue(topic, 0).units(start):
        try:
            yield unit.queue_offset, store.commitlog.read(unit.commitlog_offset)
        except (CorruptDataError, LookupError):
            continue


def half_messages(store: Store) -> Iterator[HalfRow]:
    """The pending half messages, then those given up on."""
    offsets = parse_consumer_offsets(
        load_config(store.root / CONFIG_DIR, OFFSETS).data, f"{CONFIG_DIR}/{OFFSETS}"
    )
    progress = offsets.get((TRANS_HALF_TOPIC, TRANS_CHECK_GROUP), {}).get(0, 0)
    done = set()
    for _, op in _records(store, TRANS_OP_HALF_TOPIC):
        if op.properties.get(PROPERTY_TAGS) == REMOVE_TAG:
            try:
                done.add(int(op.stored_body.decode()))
            except ValueError:
                continue
    for offset, half in _records(store, TRANS_HALF_TOPIC, progress):
        if offset not in done:
            yield _row(half, offset, False)
    for offset, rec in _records(store, TRANS_CHECK_MAX_TIME_TOPIC):
        yield _row(rec, offset, True)
