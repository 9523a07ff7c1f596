"""``rmq recover --salvage``: keep the valid records after a corrupt one (a documented divergence).

A broker's recovery (``CommitLog.recoverNormally``/``recoverAbnormally``, formats.md §6) ends the
CommitLog at the first record that fails ``checkMessageAndReturnSize``: one flipped body byte
loses everything stored after it. Salvage instead overwrites the bad bytes with valid records of
exactly their length (*tombstones*), so everything after stays where it is and a broker, which
checks CRCs when it recovers (``checkCRCOnRecover``), accepts the file.

The bad region is the record's TOTALSIZE when that lands on a valid record or on a BLANK record
ending the file; else it runs to the next valid record (found by searching for a record magic);
else, when the next file starts with a valid record, to the end of the file.

The region's records are known from the bad record's header when its topic still reads, else
from the consume-queue units that point into the region. A tombstone of a known record keeps its
topic, queue id, queue offset and transaction type, its timestamps and hosts where they read, and
every property that still decodes except ``TAGS``, and adds ``RMQ_SALVAGED`` (why it was
replaced); its body is spaces. It is dispatched like the original, so its queue keeps its
offsets: consumers subscribing by tag never receive it (its tags code is 0), ``*`` subscribers
do and can recognise it by the property. Bytes between known records become ``ROLLBACK``-type
records in topic ``RMQ_SALVAGED_GAP``, which no dispatch puts in a queue or index; a region
running to the end of the file ends with a BLANK record. A region that cannot be cut into
records, and a bad record followed by nothing valid, are not salvaged: recovery ends there as
the broker's does. The replaced bytes are backed up like every change.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from formats import commitlog as fmt
from formats.consumequeue import CQ_UNIT_DTYPE
from formats.derive import field_struct
from rmqcli.store import Store
from rmqcli.store.mapped import MappedFile
from rmqcli.store.read.commitlog import Record, RecordError, classify_tail, decode_record
from rmqcli.store.write.records import blank_record, encode_record

SALVAGED_PROPERTY = "RMQ_SALVAGED"
GAP_TOPIC = "RMQ_SALVAGED_GAP"
_MAGIC = field_struct(fmt.RecordPrefix, "magic_code")
_MAGIC_AT = fmt.PREFIX_OFFSETS["magic_code"]  # where a record's (or BLANK's) magic code lies
_MAGIC_PATTERNS = tuple(_MAGIC.pack(m) for m in (*fmt.MESSAGE_MAGICS, fmt.BLANK_MAGIC))
_PROPS_LEN = fmt.PROPERTIES_LENGTH_STRUCT
_NO_HOST = (bytes(4), 0)
_MIN_RECORD = fmt.calc_msg_length(0, 0, 1, 0)  # the smallest valid record
_BLANK = "blank"  # a segment that becomes the BLANK record ending its file
# every consume-queue unit: commitlog offset, size, queue offset, owner (index into the queue keys)
_UnitTable = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[tuple[str, int]]]


@dataclass
class Fill:
    """One salvaged region of a CommitLog file and the tombstones that replace it."""

    mf: MappedFile
    file_position: int  # where the region starts in the file
    length: int
    reason: str
    tombstones: list[bytes]
    queues: set[tuple[str, int]] = field(default_factory=set)  # queues with units into the region
    ends_file: bool = False  # the last piece is a BLANK record ending the file

    @property
    def position(self) -> int:
        return self.mf.from_offset + self.file_position

    @property
    def data(self) -> bytes:
        return b"".join(self.tombstones)

    def records(self) -> Iterator[Record]:
        """The tombstones decoded where they will lie."""
        pos = self.file_position
        for t in self.tombstones:
            if fmt.SIZE_MAGIC_STRUCT.unpack_from(t, 0)[1] != fmt.BLANK_MAGIC:
                yield decode_record(t, 0, len(t), str(self.mf.path), self.mf.from_offset + pos)
            pos += len(t)


@dataclass
class _Identity:
    """What a tombstone keeps of the record it replaces."""

    topic: str = GAP_TOPIC
    queue_id: int = 0
    queue_offset: int = 0
    sys_flag: int = fmt.TransactionType.ROLLBACK
    born_timestamp: int = 0
    born_host: tuple[bytes, int] = _NO_HOST
    store_timestamp: int = 0
    store_host: tuple[bytes, int] = _NO_HOST
    properties: dict[str, str] = field(default_factory=dict)


def _tombstone(identity: _Identity, physical_offset: int, length: int, reason: str) -> bytes | None:
    """A valid V1 record of exactly ``length`` bytes (None when none fits)."""
    topic = identity.topic.encode()
    born_v6 = len(identity.born_host[0]) == 16
    store_v6 = len(identity.store_host[0]) == 16
    flags = (fmt.BORNHOST_V6_FLAG if born_v6 else 0) | (fmt.STOREHOST_V6_FLAG if store_v6 else 0)
    sys_flag = (identity.sys_flag & fmt.TRANSACTION_MASK) | flags
    kept = {k: v for k, v in identity.properties.items() if k not in (fmt.PROPERTY_TAGS, SALVAGED_PROPERTY)}
    for props in ({**kept, SALVAGED_PROPERTY: reason}, {SALVAGED_PROPERTY: reason}, {}):
        raw = fmt.encode_properties(props)
        body_length = length - fmt.calc_msg_length(sys_flag, 0, len(topic), len(raw))
        if body_length >= 0 and len(topic) <= fmt.MAX_TOPIC_LENGTH_V1 and len(raw) <= 0x7FFF:
            return encode_record(
                sys_flag=sys_flag,
                queue_id=identity.queue_id,
                flag=0,
                queue_offset=identity.queue_offset,
                physical_offset=physical_offset,
                born_timestamp=identity.born_timestamp,
                born_host=identity.born_host,
                store_timestamp=identity.store_timestamp,
                store_host=identity.store_host,
                reconsume_times=0,
                prepared_transaction_offset=0,
                body=b" " * body_length,
                topic=topic,
                properties=raw,
            )
    return None


def _header_identity(buf, pos: int, total: int) -> _Identity | None:
    """Topic, queue and timestamps of a damaged record whose TOTALSIZE is trusted, when they read."""
    sys_flag = fmt.SYS_FLAG_STRUCT.unpack_from(buf, pos + fmt.PREFIX_OFFSETS["sys_flag"])[0]
    header = fmt.HEADER_STRUCTS[sys_flag & fmt.HOST_FLAGS]
    if header.size > total:
        return None
    f = header.unpack_from(buf, pos)
    queue_id, queue_offset, born_ts = f[3], f[5], f[8]
    born_host, store_ts, store_host, body_len = (f[9], f[10]), f[11], (f[12], f[13]), f[16]
    magic = f[1] if f[1] in fmt.MESSAGE_MAGICS else fmt.MAGIC_V1
    p = pos + header.size + body_len
    tl = fmt.topic_length_size(magic)
    if body_len < 0 or p + tl > pos + total or queue_id < 0 or queue_offset < 0:
        return None
    topic_len = int.from_bytes(buf[p : p + tl], "big", signed=True)
    p += tl
    if topic_len <= 0 or p + topic_len > pos + total:
        return None
    try:
        topic = bytes(buf[p : p + topic_len]).decode("utf-8")
    except UnicodeDecodeError:
        return None
    p += topic_len
    props: dict[str, str] = {}
    if p + _PROPS_LEN.size <= pos + total:
        props_len = _PROPS_LEN.unpack_from(buf, p)[0]
        p += _PROPS_LEN.size
        if 0 < props_len <= pos + total - p:
            try:
                props = fmt.decode_properties(bytes(buf[p : p + props_len]).decode("utf-8"))
            except UnicodeDecodeError:
                props = {}
    return _Identity(topic, queue_id, queue_offset, sys_flag, born_ts, born_host, store_ts, store_host, props)


class Salvager:
    """Finds the extent of bad records and builds their tombstones (see the module docstring)."""

    def __init__(self, store: Store, check_crc: bool):
        self.store = store
        self.check_crc = check_crc
        self._units: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[tuple[str, int]]] | None = (
            None
        )

    # --- where valid data resumes ---------------------------------------------------------------
    def _valid_record(self, buf, pos: int, limit: int) -> Record | None:
        try:
            rec = decode_record(buf, pos, limit)
        except RecordError:
            return None
        if self.check_crc and rec.body_length > 0 and fmt.body_crc(rec.stored_body) != rec.body_crc:
            return None
        return rec

    def _continues(self, buf, pos: int, limit: int) -> Record | bool:
        """A valid record at ``pos`` (returned), or True for a BLANK ending the file."""
        tail, total = classify_tail(buf, pos, limit)
        if tail == "blank":
            return total == limit - pos
        if tail != "garbage":
            return False
        return self._valid_record(buf, pos, limit) or False

    def _next_valid(self, buf, pos: int, limit: int) -> tuple[int, Record | bool] | None:
        """The first position after ``pos`` where a valid record or a file-ending BLANK starts."""
        start = pos + 1
        while True:
            found = [i for i in (buf.find(p, start + _MAGIC_AT, limit) for p in _MAGIC_PATTERNS) if i >= 0]
            if not found:
                return None
            q = min(found) - _MAGIC_AT
            nxt = self._continues(buf, q, limit)
            if nxt:
                return q, nxt
            start = q + 1

    def _next_file_head(self, mf: MappedFile) -> Record | None:
        """The first record of the file after ``mf``, when it is valid."""
        later = [f for f in self.store.commitlog.files if f.from_offset > mf.from_offset]
        if not later:
            return None
        head = later[0].map()
        first = self._continues(head, 0, len(head))
        return first if isinstance(first, Record) else None

    # --- fills ----------------------------------------------------------------------------------
    def fill(self, mf: MappedFile, buf, pos: int, limit: int, reason: str) -> Fill | None:
        """The fill of the bad record at ``pos`` of ``mf``, or None when it cannot be salvaged."""
        size = fmt.TOTAL_SIZE_STRUCT
        total = size.unpack_from(buf, pos)[0] if pos + size.size <= limit else 0
        nxt: Record | bool = False
        if _MIN_RECORD <= total <= limit - pos:
            nxt = self._continues(buf, pos + total, limit)
        ends_file = False
        if nxt:
            end = pos + total
            identity = _header_identity(buf, pos, total)
            segments = [(pos, total, identity)] if identity else self._segments(mf, pos, end, False)
        else:
            found = self._next_valid(buf, pos, limit)
            if found is not None:
                end, nxt = found
            else:
                nxt = self._next_file_head(mf) or False
                if not nxt or limit - pos < fmt.END_FILE_MIN_BLANK_LENGTH:
                    return None  # nothing valid follows: recovery ends here, as the broker's
                end, ends_file = limit, True
            segments = self._segments(mf, pos, end, ends_file)
        neighbour = nxt if isinstance(nxt, Record) else None
        pieces = []
        for start, length, identity in segments:
            if identity == _BLANK:
                pieces.append(blank_record(length) + bytes(length - fmt.END_FILE_MIN_BLANK_LENGTH))
                continue
            identity = identity or _Identity()
            if neighbour is not None and identity.store_timestamp == 0:
                identity.born_timestamp = identity.store_timestamp = neighbour.store_timestamp
                identity.born_host = identity.store_host = (neighbour.store_address, neighbour.store_port)
            t = _tombstone(identity, mf.from_offset + start, length, reason)
            if t is None:
                return None
            pieces.append(t)
        queues = self.queues_into(mf.from_offset + pos, mf.from_offset + end)
        return Fill(mf, pos, end - pos, reason, pieces, queues, ends_file)

    def _segments(self, mf: MappedFile, pos: int, end: int, ends_file: bool) -> list[tuple[int, int, object]]:
        """[pos, end) cut into the records the consume-queue units say it held (identity known)
        and the bytes between them (identity None); the last piece is the BLANK when ``ends_file``.
        Units that overlap, or leave a piece too short for a record, give one unknown piece."""
        units = self._units_in(mf.from_offset + pos, mf.from_offset + end)
        whole: list[tuple[int, int, object]] = [(pos, end - pos, _BLANK if ends_file else None)]
        cursor = pos
        out: list[tuple[int, int, object]] = []
        for start, length, identity in units:
            start -= mf.from_offset
            if start < cursor or start + length > end:
                return whole
            if start > cursor:
                out.append((cursor, start - cursor, None))
            out.append((start, length, identity))
            cursor = start + length
        if cursor < end:
            out.append((cursor, end - cursor, None))
        if ends_file:
            if not out or out[-1][2] is not None or out[-1][1] < fmt.END_FILE_MIN_BLANK_LENGTH:
                return whole
            out[-1] = (out[-1][0], out[-1][1], _BLANK)
        if any(identity is None and length < _MIN_RECORD for _, length, identity in out):
            return whole
        return out

    # --- consume-queue units --------------------------------------------------------------------
    def _all_units(self) -> _UnitTable:
        """Every unit of every queue: commitlog offset, size, queue offset, owner (index into keys)."""
        if self._units is None:
            offsets, sizes, qoffs, owners, keys = [], [], [], [], []
            for key in self.store.queue_ids():
                cq = self.store.consume_queue(*key)
                for mf in cq.files:
                    count = cq.valid_units(mf)
                    units = np.frombuffer(mf.map(), dtype=np.dtype(CQ_UNIT_DTYPE), count=count)
                    first = mf.from_offset // units.itemsize
                    offsets.append(units["commitlog_offset"].astype(np.int64))
                    sizes.append(units["size"].astype(np.int64))
                    qoffs.append(np.arange(first, first + count, dtype=np.int64))
                    owners.append(np.full(count, len(keys), dtype=np.int64))
                keys.append(key)

            def cat(parts: list[np.ndarray]) -> np.ndarray:
                return np.concatenate(parts) if parts else np.zeros(0, np.int64)

            self._units = (cat(offsets), cat(sizes), cat(qoffs), cat(owners), keys)
        return self._units

    def queues_into(self, start: int, end: int) -> set[tuple[str, int]]:
        """The queues holding a unit that points into [start, end)."""
        offsets, _, _, owners, keys = self._all_units()
        hit = np.flatnonzero((offsets >= start) & (offsets < end))
        return {keys[int(i)] for i in np.unique(owners[hit])}

    def _units_in(self, start: int, end: int) -> list[tuple[int, int, _Identity]]:
        """(commitlog offset, size, identity) of the units pointing into [start, end), in offset order."""
        offsets, sizes, qoffs, owners, keys = self._all_units()
        hit = np.flatnonzero((offsets >= start) & (offsets < end))
        hit = hit[np.argsort(offsets[hit], kind="stable")]
        out = []
        for i in hit.tolist():
            topic, queue_id = keys[int(owners[i])]
            identity = _Identity(topic, queue_id, int(qoffs[i]), fmt.TransactionType.NOT_TYPE)
            out.append((int(offsets[i]), int(sizes[i]), identity))
        return out
