"""``DefaultMessageStore.getMessage`` as POP needs it: the stored records of one queue from an
offset, with each one's queue offset (the ck's diffs and ``msgOffsetInfo``), through the same
readers as PULL (``MessageStore.unit_tuples`` and ``read``; research notes issue21 §2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from formats.records import record_properties
from rmqcli.broker.processor.pull import MAX_FILTER_BYTES
from rmqcli.filter.sql92 import Selector

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext


@dataclass
class QueueRead:
    status: str  # GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    records: list[bytes] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)  # queue offset of each record


def read_queue(
    ctl: BrokerContext,
    topic: str,
    queue_id: int,
    offset: int,
    max_msgs: int,
    codes: set[int] | None,
    selector: Selector | None = None,
) -> QueueRead:
    store = ctl.store
    low, high = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)
    if high == 0:
        return QueueRead("NO_MESSAGE_IN_QUEUE", 0, low, high)
    if offset < low:
        return QueueRead("OFFSET_TOO_SMALL", low, low, high)
    if offset == high:
        return QueueRead("OFFSET_OVERFLOW_ONE", offset, low, high)
    if offset > high:
        return QueueRead("OFFSET_OVERFLOW_BADLY", high, low, high)
    max_msgs = max(1, min(max_msgs, ctl.config.max_transfer_count_in_memory))
    want = max(MAX_FILTER_BYTES, max_msgs * 20) // 20
    out = QueueRead("NO_MATCHED_MESSAGE", offset, low, high)
    size = 0
    scanned = 0
    found_units = False
    for physical, unit_size, tags_code in store.unit_tuples(topic, queue_id, offset, want):
        found_units = True
        if len(out.records) >= max_msgs or (
            out.records and size + unit_size > ctl.config.max_transfer_bytes_in_memory
        ):
            break
        scanned += 1
        if codes is not None and tags_code not in codes:
            continue
        data = store.read(physical, unit_size)
        if data is None:
            out.status = "MESSAGE_WAS_REMOVING"
            continue
        if selector is not None and not selector.matches(record_properties(data)):
            continue
        out.records.append(data)
        out.offsets.append(offset + scanned - 1)
        size += unit_size
    if not found_units:
        per_file = store.units_per_file(topic, queue_id)
        out.status = "OFFSET_FOUND_NULL"
        out.next_begin_offset = offset + per_file - offset % per_file
        return out
    out.next_begin_offset = offset + scanned
    if out.records:
        out.status = "FOUND"
        store.get_count += len(out.records)
    return out
