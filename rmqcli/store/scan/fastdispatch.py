"""Consume queues and index files for a whole range of records at once, as a broker's dispatch.

The per-record ``Dispatcher`` (``rmqcli.store.write.dispatch``) is the reference; this module writes
the same bytes from the arrays of a ``propscan.Scan``:

- ``CommitLogDispatcherBuildConsumeQueue`` (formats.md §7.3): NOT and COMMIT records only;
  units grouped per (topic, queueId) and placed by ``ConsumeQueue.putMessagePositionInfo``
  (§2.4): ``fillPreBlank`` on a queue's first file, re-dispatched records (``offset + size <=
  maxPhysicOffset``) and duplicates (``expect < current``) skipped, anything else appended at the
  write position. Queues whose records are not plainly consecutive take the same rules unit by
  unit. Tags code: ``TAGS.hashCode()``; in ``SCHEDULE_TOPIC_XXXX`` the delivery time (§2.2).
- ``CommitLogDispatcherBuildIndex`` (§3): every type but ROLLBACK; UNIQ_KEY, then each
  non-empty ``KEYS`` token, keyed ``topic#key``. Entries fill files of ``indexNum - 1``; a new
  file is opened by the next record that needs one (``getAndCreateLastIndexFile``), named by the
  namer from that record's store time and seeded with the previous file's end offset and time,
  so the first entry of a later file is time-diffed against that seed (``IndexFile.putKey``).
  Slot chains link each entry to the previous one of its slot in the same file.

Records whose topic cannot name a consume-queue directory (``naming.topic_dir_problem``) are
dropped from the queue rows before grouping and counted in ``unsafe``, as ``Dispatcher`` does.

Each file is written with ``pwrite`` from numpy buffers into a sparse file of its full size.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from formats import commitlog as fmt
from formats import indexfile as ifmt
from formats.consumequeue import CQ_UNIT_DTYPE, CQ_UNIT_SIZE, FILLER_UNIT
from formats.derive import field_offsets, flat_fields
from rmqcli.errors import CorruptDataError
from rmqcli.store.naming import consume_queue_dir, is_safe_topic_dir, offset_to_name
from rmqcli.store.read.commitlog import CommitLog
from rmqcli.store.read.index import read_header
from rmqcli.store.scan import propscan
from rmqcli.store.settings import StoreSettings
from rmqcli.store.store import INDEX_DIR
from rmqcli.store.write.cq import cq_file_size
from rmqcli.store.write.dispatch import UnsafeTopic, note_unsafe
from rmqcli.store.write.index import IndexNamer
from rmqcli.store.write.messages import INDEXED_TRANSACTION_TYPES, QUEUED_TRANSACTION_TYPES

_UNIT = np.dtype(CQ_UNIT_DTYPE)
_MAX_INT = 0x7FFFFFFF
_MASK32 = 0xFFFFFFFF


def _numpy_dtype(schema) -> np.dtype:
    """A big-endian numpy record type with the fields of a fixed-size Construct ``schema``."""
    leaves = flat_fields(schema)
    offsets = field_offsets(schema)
    return np.dtype(
        {
            "names": [name for name, _, _ in leaves],
            "formats": [f">i{size}" for _, _, size in leaves],
            "offsets": [offsets[name] for name, _, _ in leaves],
            "itemsize": offsets["_size"],
        }
    )


_ENTRY = _numpy_dtype(ifmt.IndexEntry)
_SLOT = _numpy_dtype(ifmt.HashSlot)
_SLOT_CHUNK = 1024  # slots per write unit: only chunks holding a used slot are written
assert len(_SLOT.names) == 1 and _SLOT.itemsize == _SLOT["index_no"].itemsize
_SLOT_INT = _SLOT["index_no"]  # the slot table is kept in the file's byte order, written as it is


def _pwrite_all(fd: int, data, position: int) -> None:
    view = memoryview(data).cast("B")
    while len(view):
        done = os.pwrite(fd, view, position)
        view = view[done:]
        position += done


def _create_sparse(path: Path, size: int) -> int:
    """Open ``path`` read-write, created and sized to ``size`` (zero-filled, sparse)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    if os.fstat(fd).st_size != size:
        os.ftruncate(fd, size)
    return fd


def _pick(column: np.ndarray, rows: np.ndarray, total: int) -> np.ndarray:
    """``column[rows]`` for sorted distinct ``rows`` out of ``total`` (no copy when they are all)."""
    return column if len(rows) == total else column[rows]


def _keep(rows: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``rows[mask]`` (``rows`` itself when the mask keeps them all)."""
    return rows if mask.all() else rows[mask]


# --- consume queues ---------------------------------------------------------------------------------
@dataclass
class _Queue:
    """One ``consumequeue/<topic>/<queueId>``: the state ``ConsumeQueueWriter`` keeps."""

    directory: Path
    file_size: int
    first_from: int | None = None  # byte offset of the first file (None: no file yet)
    last_from: int = 0  # byte offset of the last file
    current: int = 0  # global byte write position
    max_physic_offset: int = -1
    min_logic_offset: int = 0

    def _file(self, from_offset: int) -> int:
        self.directory.mkdir(parents=True, exist_ok=True)
        return _create_sparse(self.directory / offset_to_name(from_offset), self.file_size)

    def _open_file(self, from_offset: int) -> None:
        """``MappedFileQueue.getLastMappedFile``: a new (empty) last file."""
        os.close(self._file(from_offset))
        if self.first_from is None:
            self.first_from = from_offset
        self.last_from = from_offset

    def _prepare(self, expect: int, queue_offset: int) -> None:
        """The file part of ``putMessagePositionInfo`` once a unit passed the re-dispatch check."""
        if self.first_from is None:
            self._open_file(expect - expect % self.file_size)
            self.current = self.first_from
            if queue_offset != 0:  # fillPreBlank
                self.min_logic_offset = expect
                count = (expect % self.file_size) // CQ_UNIT_SIZE
                if count:
                    self.write(self.first_from, FILLER_UNIT * count)
                    self.current += count * CQ_UNIT_SIZE
        elif self.current >= self.last_from + self.file_size:
            self._open_file(self.last_from + self.file_size)

    def write(self, position: int, data: bytes) -> None:
        """Write ``data`` at global byte ``position``, split over the files it spans."""
        view = memoryview(data)
        while len(view):
            from_offset = position - position % self.file_size
            room = from_offset + self.file_size - position
            fd = self._file(from_offset)
            try:
                _pwrite_all(fd, view[:room], position - from_offset)
            finally:
                os.close(fd)
            view = view[room:]
            position += room

    def put(self, offset: np.ndarray, size: np.ndarray, tags: np.ndarray, queue_offset: np.ndarray) -> None:
        """``putMessagePositionInfo`` for these units in order."""
        k = len(offset)
        ends = offset + size
        first_q = int(queue_offset[0])
        expect_first = self.current // CQ_UNIT_SIZE if self.first_from is not None else first_q
        plain = (
            int(ends[0]) > self.max_physic_offset
            and bool(np.all(ends[1:] > ends[:-1]))
            and first_q >= 0
            and (first_q == expect_first)
            and bool(np.all(np.diff(queue_offset) == 1))
        )
        if plain:
            self._prepare(first_q * CQ_UNIT_SIZE, first_q)
            keep = np.arange(k)
        else:
            keep = self._put_one_by_one(offset, size, queue_offset)
            if len(keep) == 0:
                return
        units = np.empty(len(keep), dtype=_UNIT)
        units["commitlog_offset"] = offset[keep]
        units["size"] = size[keep]
        units["tags_code"] = tags[keep]
        if plain:
            start = self.current
            position = start
            room = self.last_from + self.file_size - start
            data = units.view(np.uint8)
            if len(data) > room:  # later files open as the earlier ones fill
                nxt = self.last_from + self.file_size
                while nxt < start + len(data):
                    self._open_file(nxt)
                    nxt += self.file_size
            self.write(position, data)
            self.current = start + len(data)
            self.max_physic_offset = int(ends[-1])
        else:
            self.write(self._run_start, units.view(np.uint8))

    def _put_one_by_one(self, offset: np.ndarray, size: np.ndarray, queue_offset: np.ndarray) -> np.ndarray:
        """The general case, unit by unit; returns the units appended (one run from ``_run_start``)."""
        kept: list[int] = []
        self._run_start = -1
        for i, (off, sz, q) in enumerate(
            zip(offset.tolist(), size.tolist(), queue_offset.tolist(), strict=True)
        ):
            if off + sz <= self.max_physic_offset:
                continue
            expect = q * CQ_UNIT_SIZE
            self._prepare(expect, q)
            if q != 0 and expect < self.current:
                continue  # duplicate
            if self._run_start < 0:
                self._run_start = self.current
            self.max_physic_offset = off + sz
            self.current += CQ_UNIT_SIZE
            kept.append(i)
        return np.array(kept, dtype=np.int64)

    @property
    def max_offset(self) -> int:
        """``maxOffsetInQueue``."""
        return self.current // CQ_UNIT_SIZE if self.first_from is not None else 0


# --- index files --------------------------------------------------------------------------------
@dataclass
class _IndexFile:
    """One index file being filled: header fields, slot table, entry count."""

    path: Path
    fd: int
    slots: np.ndarray
    begin_timestamp: int = 0
    end_timestamp: int = 0
    begin_phy_offset: int = 0
    end_phy_offset: int = 0
    hash_slot_count: int = 0
    entries: int = 0

    def finish(self) -> None:
        """Write the header and the used part of the slot table, then close."""
        header = ifmt.HEADER_STRUCT.pack(
            self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
            self.hash_slot_count, self.entries + 1,
        )  # fmt: skip
        _pwrite_all(self.fd, header, 0)
        n = len(self.slots)
        whole = n - n % _SLOT_CHUNK
        used = self.slots[:whole].reshape(-1, _SLOT_CHUNK).any(axis=1)
        if whole < n:
            used = np.append(used, self.slots[whole:].any())
        flags = np.concatenate(([False], used, [False]))
        edges = np.flatnonzero(flags[1:] != flags[:-1])
        for a, b in zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True):
            lo, hi = a * _SLOT_CHUNK, min(b * _SLOT_CHUNK, n)
            _pwrite_all(self.fd, self.slots[lo:hi].view(np.uint8), ifmt.slot_position(lo))
        os.close(self.fd)
        self.slots = np.zeros(0, dtype=_SLOT_INT)


@dataclass
class FastDispatcher:
    """Consume-queue and index files under ``root`` for records given a file at a time."""

    root: Path
    settings: StoreSettings
    index_namer: IndexNamer
    consume_queues: bool = True
    index: bool = True
    topic: str | None = None
    queues: dict[tuple[str, int], _Queue] = field(default_factory=dict)
    logics_msg_timestamp: int = 0  # store time of the last queued record (checkpoint)
    completed_end_timestamp: int = 0  # endTimestamp of the last completed index file
    index_files: list[str] = field(default_factory=list)
    index_entries: int = 0
    records: int = 0
    unsafe: dict[str, UnsafeTopic] = field(default_factory=dict)  # topics whose records went to no queue

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self.delay_millis = fmt.parse_delay_levels(self.settings.message_delay_level)
        self.build_index = self.index and self.settings.message_index_enable
        self.cq_size = cq_file_size(self.settings.mapped_file_size_consume_queue)
        self.hash_slot_num = self.settings.max_hash_slot_num
        self.per_file = self.settings.max_index_num - 1  # entries 1 .. indexNum-1
        self.index_size = ifmt.file_size(self.hash_slot_num, self.settings.max_index_num)
        self._index: _IndexFile | None = None

    @staticmethod
    def supports(settings: StoreSettings) -> bool:
        """Geometries the bulk path handles (anything else stays with the per-record writers)."""
        return settings.max_index_num >= 2 and settings.max_hash_slot_num >= 1

    def resume_index(self, paths: list[Path]) -> None:
        """Go on from the index files already under ``root/index`` (``paths``, oldest first), as
        ``IndexService.load`` then ``getAndCreateLastIndexFile`` do: entries go on into the last
        file, or into a new one seeded from it when it is full. Each file must have this geometry."""
        if not self.build_index or not paths:
            return
        for path in paths:
            header = read_header(path)
            if header.index_count >= self.settings.max_index_num:  # IndexFile.isWriteFull
                self.completed_end_timestamp = header.end_timestamp
        last = paths[-1]
        fd = os.open(last, os.O_RDWR)
        slots = np.fromfile(last, dtype=_SLOT_INT, count=self.hash_slot_num, offset=ifmt.HEADER_SIZE)
        self._index = _IndexFile(
            last,
            fd,
            slots.copy(),
            header.begin_timestamp,
            header.end_timestamp,
            header.begin_phy_offset,
            header.end_phy_offset,
            header.hash_slot_count,
            max(header.index_count - 1, 0),
        )
        self.index_files = [p.name for p in paths]

    # --- one batch -----------------------------------------------------------------------------
    def dispatch(self, scan: propscan.Scan, rows: np.ndarray | None = None) -> int:
        """Dispatch ``rows`` of ``scan`` (increasing; all by default) in order; returns how many."""
        h = scan.headers
        if rows is None:
            rows = np.arange(len(scan), dtype=np.int64)
        count = len(rows)
        self.records += count
        if self.topic is not None:
            wanted = [i for i, t in enumerate(h.topics) if t == self.topic]
            rows = rows[np.isin(h.topic_index[rows], wanted)]
        if len(rows) == 0:
            return count
        tran = _pick(h.sys_flag, rows, len(scan)) & fmt.TRANSACTION_MASK
        if self.consume_queues:
            queued = _keep(rows, np.isin(tran, list(QUEUED_TRANSACTION_TYPES)))
            if len(queued):
                queued = self._drop_unsafe(scan, queued)
            if len(queued):
                self._queue_units(scan, queued)
        if self.build_index:
            indexed = _keep(rows, np.isin(tran, list(INDEXED_TRANSACTION_TYPES)))
            if len(indexed):
                self._index_keys(scan, indexed)
        return count

    def _drop_unsafe(self, scan: propscan.Scan, rows: np.ndarray) -> np.ndarray:
        """``rows`` without the records whose topic cannot name a queue directory (counted)."""
        h = scan.headers
        bad = [i for i, t in enumerate(h.topics) if not is_safe_topic_dir(t)]
        if not bad:
            return rows
        topic_index = h.topic_index[rows]
        drop = np.isin(topic_index, bad)
        if not drop.any():
            return rows
        for t in bad:
            hit = rows[topic_index == t]
            if len(hit):
                at = scan.physical[hit]
                queue_ids = np.unique(h.queue_id[hit]).tolist()
                note_unsafe(self.unsafe, h.topics[t], int(at[0]), queue_ids, len(hit), int(at[-1]))
        return rows[~drop]

    def _queue_units(self, scan: propscan.Scan, rows: np.ndarray) -> None:
        h = scan.headers
        every = len(scan)
        codes = propscan.tags_codes(scan, rows, self.delay_millis)
        self.logics_msg_timestamp = int(h.store_timestamp[rows[-1]])
        topic_index = _pick(h.topic_index, rows, every)
        queue_id = _pick(h.queue_id, rows, every)
        n = len(rows)
        qmin = int(queue_id.min())
        span = int(queue_id.max()) - qmin + 1
        if span * len(h.topics) <= 1 << 16:
            group = (topic_index * span + (queue_id - qmin)).astype(np.uint16)
            order = np.argsort(group, kind="stable")  # a radix sort of small keys
            sorted_group = group[order]
        else:
            _, group = np.unique(topic_index * (1 << 32) + (queue_id & _MASK32), return_inverse=True)
            packed = np.sort(group.ravel() * n + np.arange(n, dtype=np.int64))
            order = packed % n
            sorted_group = packed // n
        cuts = np.flatnonzero(sorted_group[1:] != sorted_group[:-1]) + 1
        bounds = [0, *cuts.tolist(), n]
        physical = _pick(scan.physical, rows, every)
        size = _pick(h.total_size, rows, every)
        queue_offset = _pick(h.queue_offset, rows, every)
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            idx = order[a:b]
            key = (h.topics[int(topic_index[idx[0]])], int(queue_id[idx[0]]))
            q = self.queues.get(key)
            if q is None:
                directory = consume_queue_dir(self.root, *key)  # topics checked by _drop_unsafe
                q = self.queues[key] = _Queue(directory, self.cq_size)
            q.put(physical[idx], size[idx], codes[idx], queue_offset[idx])

    # --- index ---------------------------------------------------------------------------------
    def _index_keys(self, scan: propscan.Scan, rows: np.ndarray) -> None:
        """``IndexService.buildIndex`` for each row (ROLLBACK already left out), in order."""
        local, full_hash = propscan.index_keys(scan, rows)
        per_record = np.bincount(local, minlength=len(rows))
        physical = _pick(scan.physical, rows, len(scan))
        stamps = _pick(scan.headers.store_timestamp, rows, len(scan))
        keep = self._not_behind(physical, per_record)
        if keep is not None:
            entry_keep = keep[local]
            local, full_hash = local[entry_keep], full_hash[entry_keep]
        self._put_entries(local, full_hash, physical, stamps)

    def _not_behind(self, physical: np.ndarray, per_record: np.ndarray) -> np.ndarray | None:
        """``buildIndex`` skips a record below the last file's endPhyOffset (None: none skipped)."""
        keyed = np.flatnonzero(per_record > 0)
        if len(keyed) == 0:
            return None
        p = physical[keyed]
        end = self._index.end_phy_offset if self._index is not None else 0
        if p[0] >= end and np.all(p[1:] >= p[:-1]):
            return None
        keep = np.ones(len(physical), dtype=bool)
        for i in keyed.tolist():
            if physical[i] < end:
                keep[i] = False
            else:
                end = int(physical[i])
        return keep

    def _new_file(self, store_timestamp: int) -> None:
        """``getAndCreateLastIndexFile``: a new file seeded from the (full) previous one."""
        prev = self._index
        name = self.index_namer(store_timestamp)
        if self.index_files and name <= self.index_files[-1]:
            last = self.index_files[-1]
            name = str(int(last) + 1).zfill(len(last))
        directory = self.root / INDEX_DIR
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / name
        created = _IndexFile(
            path, _create_sparse(path, self.index_size), np.zeros(self.hash_slot_num, _SLOT_INT)
        )
        if prev is not None:
            if prev.end_phy_offset > 0:
                created.begin_phy_offset = created.end_phy_offset = prev.end_phy_offset
            if prev.end_timestamp > 0:
                created.begin_timestamp = created.end_timestamp = prev.end_timestamp
            prev.finish()
            self.completed_end_timestamp = prev.end_timestamp
        self.index_files.append(name)
        self._index = created

    def _put_entries(
        self, local: np.ndarray, key_hash: np.ndarray, physical: np.ndarray, stamps: np.ndarray
    ) -> None:
        """Entries in order over the batch's records; opens files as ``last_file`` would."""
        if self._index is None or self._index.entries >= self.per_file:
            self._new_file(int(stamps[0]))  # the first indexed record asks for the last file
        i, total = 0, len(local)
        while i < total:
            f = self._index
            take = min(self.per_file - f.entries, total - i)
            self._write_entries(f, local[i : i + take], key_hash[i : i + take], physical, stamps)
            i += take
            if f.entries >= self.per_file:
                owner = int(local[i - 1])
                if i < total and int(local[i]) == owner:
                    self._new_file(int(stamps[owner]))
                elif owner + 1 < len(stamps):
                    self._new_file(int(stamps[owner + 1]))  # the next record's buildIndex
        self.index_entries += total

    def _write_entries(
        self, f: _IndexFile, local: np.ndarray, key_hash: np.ndarray, physical: np.ndarray, stamps: np.ndarray
    ) -> None:
        """``IndexFile.putKey`` for consecutive entries of one file."""
        k = len(local)
        first_no = f.entries + 1
        phy = physical[local]
        lo, hi = int(local[0]), int(local[-1]) + 1  # entries are in record order
        seed = None
        if f.entries == 0:
            # the first entry is diffed against the seeded begin, then becomes the begin
            seed = f.begin_timestamp
            f.begin_phy_offset, f.begin_timestamp = int(phy[0]), int(stamps[lo])
        # the time diff of each record's entries, then of each entry
        per_record = stamps[lo:hi] - f.begin_timestamp
        if f.begin_timestamp <= 0:
            per_record[:] = 0
        per_record //= 1000
        np.clip(per_record, 0, _MAX_INT, out=per_record)
        diff = per_record[local - lo]
        if seed is not None:
            diff[0] = min(max((int(stamps[lo]) - seed) // 1000, 0), _MAX_INT) if seed > 0 else 0
        slot = key_hash % self.hash_slot_num
        shift = (k - 1).bit_length()  # (slot, entry) packed in one int64, sorted by slot then entry
        if (self.hash_slot_num - 1).bit_length() + shift <= 62:
            packed = np.sort((slot << shift) | np.arange(k, dtype=np.int64))
            order = packed & ((1 << shift) - 1)
            sorted_slot = packed >> shift
        else:
            packed = np.sort(slot * k + np.arange(k, dtype=np.int64))
            order = packed % k
            sorted_slot = packed // k
        same = np.zeros(k, dtype=bool)
        same[1:] = sorted_slot[1:] == sorted_slot[:-1]
        if same.any():
            head = ~same
            before = f.slots[sorted_slot[head]]
            prev_sorted = np.empty(k, dtype=np.int64)
            prev_sorted[head] = before
            prev_sorted[same] = first_no + order[np.flatnonzero(same) - 1]
            tail = np.ones(k, dtype=bool)
            tail[:-1] = head[1:]
            f.slots[sorted_slot[tail]] = (first_no + order[tail]).astype(_SLOT_INT)  # cast once, then scatter
        else:  # every slot once: no chain inside the batch
            before = prev_sorted = f.slots[sorted_slot]
            f.slots[sorted_slot] = (first_no + order).astype(_SLOT_INT)
        prev = np.empty(k, dtype=np.int64)
        prev[order] = prev_sorted
        f.hash_slot_count += int(np.count_nonzero(before == 0))
        entries = np.empty(k, dtype=_ENTRY)
        entries["key_hash"] = key_hash
        entries["phy_offset"] = phy
        entries["time_diff"] = diff
        entries["prev_index"] = prev
        _pwrite_all(f.fd, entries.view(np.uint8), ifmt.entry_position(first_no, self.hash_slot_num))
        f.entries += k
        f.end_phy_offset, f.end_timestamp = int(phy[-1]), int(stamps[hi - 1])

    # --- results -------------------------------------------------------------------------------
    @property
    def units(self) -> int:
        return sum(q.max_offset - q.min_logic_offset // CQ_UNIT_SIZE for q in self.queues.values())

    def close(self) -> None:
        if self._index is not None:
            self._index.finish()
            self._index = None


def dispatch_commitlog(
    commitlog: CommitLog, dispatcher: FastDispatcher, start: int, hints: np.ndarray | None = None
) -> CorruptDataError | None:
    """Dispatch every record of ``commitlog`` whose PHYSICALOFFSET is at least ``start``.

    Files are read with ``propscan.scan_file`` (``hints``: record offsets, checked, never
    trusted) or, when it cannot vouch for a file, record by record; a corrupt record ends the
    reading as it ends a broker's reput, and is returned.
    """
    for mf in commitlog.files:
        buf = mf.map(whole=True)
        scan = propscan.scan_file(buf, 0, mf.from_offset, hints)
        if scan is None:
            scan = propscan.decode_file(buf, 0, mf.from_offset, str(mf.path))
        dispatcher.dispatch(scan, np.flatnonzero(scan.physical >= start))
        if scan.error is not None:
            return scan.error
    return None
