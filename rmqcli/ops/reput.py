"""The records a broker's ``ReputMessageService.doReput`` dispatches, for offline recovery and rebuild.

A master broker's reput reads each record with ``checkMessageAndReturnSize`` (readBody=false,
no CRC): a record whose TOTALSIZE disagrees with the length its fields give is skipped by its
TOTALSIZE ("[BUG]read total count not equals msg total size"); after anything else unreadable it
skips the rest of the file; a BLANK record or zeros move it to the next file.

In DLedger CommitLog mode (``DLedgerCommitLog.checkMessageAndReturnSize``) the reput reads each
entry's message past its 48-byte header; a message that fails is skipped by the entry's size.
"""

from __future__ import annotations

from collections.abc import Iterator

from formats import commitlog as fmt
from formats.dledger import BODY_OFFSET
from rmqcli.ops.salvage import Fill
from rmqcli.store import Store
from rmqcli.store.read.commitlog import (
    Corruption,
    Record,
    RecordError,
    broker_read_length,
    classify_tail,
    decode_record,
)
from rmqcli.store.read.dledger import DLedgerCommitLog


def reput_records(
    store: Store, start: int, end: int, fills: dict[int, Fill], notes: list[str]
) -> Iterator[Record]:
    """The records the reput dispatches from ``start`` (a record start) up to ``end``; each skip is
    noted. ``fills``: salvaged regions (``rmqcli.ops.salvage``), which give their tombstones."""
    if isinstance(store.commitlog, DLedgerCommitLog):
        yield from _dledger_records(store.commitlog, start, end, notes)
        return
    for mf in store.commitlog.files:
        if mf.from_offset + mf.size <= start or mf.from_offset >= end:
            continue
        buf = mf.map()
        limit = len(buf)
        pos = max(start - mf.from_offset, 0)
        while pos < limit and mf.from_offset + pos < end:
            fill = fills.get(mf.from_offset + pos)
            if fill is not None:
                yield from fill.records()
                if fill.ends_file:
                    break
                pos += fill.length
                continue
            if classify_tail(buf, pos, limit)[0] != "garbage":
                break  # BLANK, zeros: the next file
            try:
                rec = decode_record(buf, pos, limit, str(mf.path), mf.from_offset)
            except RecordError as exc:
                total = fmt.TOTAL_SIZE_STRUCT.unpack_from(buf, pos)[0]
                read = broker_read_length(buf, pos, limit)
                if read is not None and read != total and total > 0:
                    notes.append(f"{mf.name} at {pos}: {exc}; the reput skips its {total} bytes, as a broker")
                    pos += total
                    continue
                notes.append(f"{mf.name} at {pos}: {exc}; the reput skips the rest of the file, as a broker")
                break
            yield rec
            pos += rec.total_size


def _dledger_records(log: DLedgerCommitLog, start: int, end: int, notes: list[str]) -> Iterator[Record]:
    """The messages of the entries from ``start`` (a message's offset) whose entry starts before
    ``end``; an entry whose message fails is skipped, as the broker's reput skips it."""
    for item in log.records(start, skip_corrupt=True):
        message = isinstance(item, Record) or item.kind == "bad-record"
        if item.position - (BODY_OFFSET if message else 0) >= end:
            return
        if isinstance(item, Corruption):
            name = item.file.rsplit("/", 1)[-1]
            notes.append(f"{name} at {item.file_position}: {item.reason}; the reput skips it, as a broker")
            continue
        yield item
