"""Index-file verification: headers, hash chains, entries against records, and key coverage.

formats.md §3 (``IndexFile.putKey``/``selectPhyOffset``, ``IndexService.buildIndex``/``load``/
``deleteExpiredFile``). Entries and slots are read with numpy; every entry is joined with the
record table on (record, key hash) in bulk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from formats import commitlog as fmt
from formats import indexfile as ifmt
from formats.derive import field_offsets, flat_fields
from rmqcli.memory import give_back_free_memory
from rmqcli.ops.verify_common import ERROR, WARNING, Collector
from rmqcli.ops.verify_table import RecordTable
from rmqcli.store.naming import is_index_name
from rmqcli.store.read.index import IndexFile

_HEADER_AT = field_offsets(ifmt.IndexHeader)
_KEY_BITS = 31  # key hashes are non-negative i32


def _dtype(schema) -> np.dtype:
    fields = flat_fields(schema)
    return np.dtype(
        {
            "names": [name for name, _, _ in fields],
            "formats": [f">i{size}" for _, _, size in fields],
            "offsets": list(field_offsets(schema).values())[:-1],
            "itemsize": field_offsets(schema)["_size"],
        }
    )


_ENTRY = _dtype(ifmt.IndexEntry)
_SLOT = _dtype(ifmt.HashSlot)


def open_files(directory: Path, p: Collector, slots: int | None, num: int | None) -> list[IndexFile]:
    files = []
    if not directory.is_dir():
        return files
    for path in sorted(directory.iterdir()):
        if not path.is_file():
            continue
        if not is_index_name(path.name):
            p.warning("index-file-name", path, None, "not an index file name (yyyyMMddHHmmssSSS); ignored")
            continue
        try:
            f = IndexFile(path, slots, num)
        except Exception as exc:  # UsageError (geometry) or CorruptDataError (short file)
            p.error("index-file-size", path, None, str(exc))
            continue
        expected = ifmt.file_size(f.hash_slot_num, f.index_num)
        if f.mapped.size != expected:
            p.error(
                "index-file-size",
                path,
                None,
                f"file is {f.mapped.size} bytes, expected {expected} for {f.hash_slot_num} slots and "
                f"{f.index_num} entries",
            )
            continue
        files.append(f)
    return files


def check_index(
    files: list[IndexFile],
    table: RecordTable,
    p: Collector,
    *,
    cl_min: int,
    abort: bool,
    index_msg_timestamp: int,
    topic: str | None = None,
    index_enabled: bool = True,
    redispatch_from: int | None = None,
) -> int:
    """Check every index file; returns the number of entries checked.

    ``redispatch_from``: where a broker starting on this store dispatches from (the consume queues'
    end, or after an unclean shutdown where its recovery starts), indexing what follows.
    """
    keys = _Keys(table)
    found = np.zeros(len(table.keys), dtype=bool)  # keys seen in some index file
    checked = 0
    for f in files:
        count = _check_header(f, p, abort, index_msg_timestamp)
        checked += _check_file(f, count, p, table, keys, found, cl_min)
    if index_enabled:
        reindex_from = table.valid_end if redispatch_from is None else redispatch_from
        _coverage(files, table, p, found, cl_min=cl_min, abort=abort, topic=topic, reindex_from=reindex_from)
    return checked


def _check_header(f: IndexFile, p: Collector, abort: bool, index_msg_timestamp: int) -> int:
    """An index file's header (and whether a broker deletes the file on start); returns its
    indexCount as far as the file holds entries (1: none)."""
    h = f.header
    path = f.path
    count = h.index_count if h.index_count > 0 else 1
    if h.index_count > f.index_num:
        p.error(
            "index-header",
            path,
            _HEADER_AT["index_count"],
            f"indexCount {h.index_count} is more than the file holds ({f.index_num})",
        )
        count = f.index_num
    if h.begin_phy_offset > h.end_phy_offset:
        p.error(
            "index-header",
            path,
            _HEADER_AT["begin_phy_offset"],
            f"beginPhyOffset {h.begin_phy_offset} > endPhyOffset {h.end_phy_offset}",
        )
    if h.begin_timestamp > h.end_timestamp:
        p.warning(
            "index-header",
            path,
            _HEADER_AT["begin_timestamp"],
            f"beginTimestamp {h.begin_timestamp} > endTimestamp {h.end_timestamp}",
        )
    if abort and h.end_timestamp > index_msg_timestamp:
        p.warning(
            "index-rebuild",
            path,
            None,
            "endTimestamp is after the checkpoint's indexMsgTimestamp: after this unclean shutdown the "
            "broker deletes this file on start (IndexService.load) and re-indexes from the CommitLog",
        )
    return count


def _check_file(
    f: IndexFile,
    count: int,
    p: Collector,
    table: RecordTable,
    keys: _Keys,
    found: np.ndarray,
    cl_min: int,
) -> int:
    """An index file's slots, chains and ``count - 1`` entries; marks the keys its entries hold in
    ``found``. Returns the entries checked."""
    path = f.path
    buf = f.mapped.map()
    raw_slots = np.frombuffer(buf, dtype=_SLOT, count=f.hash_slot_num, offset=ifmt.HEADER_SIZE)["index_no"]
    n = count - 1
    start = ifmt.entry_position(1, f.hash_slot_num)
    entries = _Entries(f, buf, start, n)
    key_hash = entries.column("key_hash", np.int32)  # joined with the slots at random: held whole
    negative_time = entries.negative_times()
    used_count = int(np.count_nonzero(raw_slots.view(np.uint32)))
    if used_count != f.header.hash_slot_count:
        p.warning(
            "index-header",
            path,
            _HEADER_AT["hash_slot_count"],
            f"hashSlotCount {f.header.hash_slot_count} but {used_count} slots are in use",
        )
    if not _chains_sound(raw_slots, used_count, key_hash, entries, f.hash_slot_num):
        prev = entries.column("prev_index", np.int32)
        _check_chains(p, path, raw_slots, key_hash, prev, count, f.hash_slot_num)
        del prev
    f.mapped.release(ifmt.HEADER_SIZE, start)  # the slot table's pages: read again only where needed
    give_back_free_memory()  # the chain check's arrays
    if len(negative_time):
        p.warning(
            "index-time",
            path,
            _entry_at(int(negative_time[0]), f.hash_slot_num),
            f"{len(negative_time)} entries have a negative timeDiff (lookups stop at them)",
        )
    run = keys.run_of(entries, key_hash)
    if run is not None:
        found[run : run + n] = True  # every entry is the next key of the records, in order
    else:
        phy = entries.column("phy_offset")
        _check_entries(p, path, table, keys, found, phy, key_hash, cl_min, f.hash_slot_num)
    return n


_ENTRIES_AT_ONCE = 1 << 18


class _Entries:
    """The ``n`` entries of an index file from ``start``, read field by field into native arrays (big
    endian i4 and i8 in the file) a million at a time, each run's mapped pages let go once read: the
    entries are never held twice, and a field only the slow paths need is not held at all."""

    def __init__(self, f: IndexFile, buf, start: int, n: int):
        self.f, self.buf, self.start, self.n = f, buf, start, n

    def runs(self) -> Iterator[tuple[int, int]]:
        for lo in range(0, self.n, _ENTRIES_AT_ONCE):
            yield lo, min(lo + _ENTRIES_AT_ONCE, self.n)

    def run(self, name: str, lo: int, hi: int, dtype=np.int64) -> np.ndarray:
        """Field ``name`` of entries ``lo`` to ``hi`` (rows)."""
        at = self.start + lo * _ENTRY.itemsize
        ent = np.frombuffer(self.buf, dtype=_ENTRY, count=hi - lo, offset=at)
        out = ent[name].astype(dtype)
        del ent
        self.f.mapped.release(at, self.start + hi * _ENTRY.itemsize)
        return out

    def column(self, name: str, dtype=np.int64) -> np.ndarray:
        out = np.empty(self.n, dtype=dtype)
        for lo, hi in self.runs():
            out[lo:hi] = self.run(name, lo, hi, dtype)
        return out

    def negative_times(self) -> np.ndarray:
        """Rows whose timeDiff is negative."""
        found = [np.flatnonzero(self.run("time_diff", lo, hi, np.int32) < 0) + lo for lo, hi in self.runs()]
        return np.concatenate(found) if found else np.empty(0, dtype=np.int64)


def _entry_at(i: int, slots_num: int) -> int:
    """Byte position of the entry in row ``i`` (entry number ``i + 1``)."""
    return ifmt.entry_position(int(i) + 1, slots_num)


class _Keys:
    """The index keys of the record table (in record order, as ``buildIndex`` adds them), joined
    with index entries on (record, key hash)."""

    def __init__(self, table: RecordTable):
        self.table = table
        self._order: np.ndarray | None = None

    def run_of(self, entries: _Entries, key_hash: np.ndarray) -> int | None:
        """Where the entries are exactly a run of consecutive keys (the way a broker fills an
        index file), or ``None``."""
        n = entries.n
        t = self.table
        keys = t.keys
        if n == 0 or not len(keys):
            return None
        row = int(t.locate(entries.run("phy_offset", 0, 1))[0])
        if row < 0:
            return None
        lo, hi = keys.first_of(row), keys.first_of(row + 1)
        match = np.flatnonzero(keys.hashes(lo, hi) == key_hash[0])
        if not len(match):
            return None
        k0 = int(lo + match[0])
        if k0 + n > len(keys):
            return None
        for lo, hi in entries.runs():  # the keys' hashes and the entries', a run at a time
            if not np.array_equal(keys.hashes(k0 + lo, k0 + hi), key_hash[lo:hi]):
                return None
        for lo, hi in entries.runs():  # the records' offsets and the entries'
            if not np.array_equal(
                t.position[keys.records(k0 + lo, k0 + hi)], entries.run("phy_offset", lo, hi)
            ):
                return None
        return k0

    def sorted(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Key codes sorted, the key of each, and the first sorted position of each code's group."""
        if self._order is None:
            t = self.table
            code = (t.keys.records() << _KEY_BITS) | t.keys.hashes()  # (record, key hash)
            self._order = np.argsort(code, kind="stable")
            ordered = code[self._order]
            new = np.ones(len(ordered), dtype=bool)
            new[1:] = ordered[1:] != ordered[:-1]
            self._sorted = ordered
            self._group = np.cumsum(new) - 1
        return self._sorted, self._order, self._group


def _chains_sound(
    raw_slots: np.ndarray, used_count: int, key_hash: np.ndarray, entries: _Entries, slots_num: int
) -> bool:
    """Whether the slot table and links are exactly those ``putKey`` leaves: links go to an older
    entry of the same slot, each entry is linked once, and the slots hold just the chain heads."""
    n = entries.n
    seen = np.zeros(n + 1, dtype=bool)  # entries some other entry links to
    links = 0
    for lo, hi in entries.runs():  # a run of entries at a time: no whole-file temporaries
        p = entries.run("prev_index", lo, hi, np.int32)
        if int(p.min()) < 0 or np.any(p > np.arange(lo, hi, dtype=p.dtype)):
            return False  # entry i + 1 links to 0 (none) or to an entry before it
        linked = p > 0
        targets = p[linked]
        if np.any(
            ifmt.slot_of(key_hash[targets - 1], slots_num) != ifmt.slot_of(key_hash[lo:hi][linked], slots_num)
        ):
            return False
        seen[targets] = True
        links += len(targets)
    if np.count_nonzero(seen) != links:
        return False  # an entry linked from more than one place
    heads_count = 0
    for lo, hi in entries.runs():
        heads = np.flatnonzero(~seen[1 + lo : 1 + hi]) + lo  # entries nothing links to: chain heads
        heads_count += len(heads)
        if not np.array_equal(
            raw_slots[ifmt.slot_of(key_hash[heads], slots_num)].astype(np.int64), heads + 1
        ):
            return False
    return heads_count == used_count


class _FileProblems:
    """Problems of one index file: ``index-chain`` errors for the first ten slots or entries of a
    kind (``slots``, ``entries``), or one problem for a set of entries, placed at the first (``add``)."""

    SHOWN = 10

    def __init__(self, p: Collector, path: Path, slots_num: int):
        self.p, self.path, self.slots_num = p, path, slots_num

    def slots(self, rows: np.ndarray, message: Callable[[int], str]) -> None:
        for s in rows[: self.SHOWN].tolist():
            self.p.error("index-chain", self.path, ifmt.slot_position(s), message(s))

    def entries(self, rows: np.ndarray, message: Callable[[int], str]) -> None:
        for i in rows[: self.SHOWN].tolist():
            self.p.error("index-chain", self.path, _entry_at(i, self.slots_num), message(i))

    def add(
        self, kind: str, severity: str, rows: np.ndarray, what: str, phy: np.ndarray | None = None
    ) -> None:
        """``{n} entries (first: {number}[, offset {phy}]) {what}``, when ``rows`` is not empty."""
        if not len(rows):
            return
        first = int(rows[0])
        offset = f", offset {int(phy[first])}" if phy is not None else ""
        message = f"{len(rows)} entries (first: {first + 1}{offset}) {what}"
        self.p.add(kind, severity, self.path, _entry_at(first, self.slots_num), message)


def _check_chains(
    p: Collector, path: Path, raw_slots: np.ndarray, key_hash: np.ndarray, prev: np.ndarray, count: int,
    slots_num: int,
) -> None:  # fmt: skip
    """Every slot and link checked (``selectPhyOffset`` follows them), with a message per kind."""
    slots = raw_slots.astype(np.int64)
    n = len(prev)
    number = np.arange(1, n + 1, dtype=np.int64)
    used = np.flatnonzero(slots)
    problems = _FileProblems(p, path, slots_num)
    bad_slot = used[(slots[used] < 0) | (slots[used] >= count)]
    problems.slots(bad_slot, lambda s: f"slot {s} holds entry {int(slots[s])}, outside 1..{count - 1}")
    ok_heads = used[(slots[used] > 0) & (slots[used] < count)]
    head_entry = slots[ok_heads] - 1
    wrong_head = ok_heads[ifmt.slot_of(key_hash[head_entry], slots_num) != ok_heads]
    problems.slots(
        wrong_head,
        lambda s: f"slot {s} heads a chain whose newest entry {int(slots[s])} hashes to another slot",
    )
    bad_prev = np.flatnonzero((prev < 0) | (prev >= number))
    problems.entries(
        bad_prev,
        lambda i: (
            f"entry {i + 1} links to entry {int(prev[i])}: a chain must go to an older entry "
            "(cycle or damaged link)"
        ),
    )
    linked = np.flatnonzero((prev > 0) & (prev < number))
    cross = linked[
        ifmt.slot_of(key_hash[prev[linked] - 1], slots_num) != ifmt.slot_of(key_hash[linked], slots_num)
    ]
    problems.entries(cross, lambda i: f"entry {i + 1} links to entry {int(prev[i])} of another slot")
    refs = (
        np.bincount(np.concatenate((slots[ok_heads], prev[linked])), minlength=count)[1:count]
        if n > 0
        else np.empty(0, dtype=np.int64)
    )
    problems.add(
        "index-unreachable", ERROR, np.flatnonzero(refs == 0), "are on no slot chain: lookups never find them"
    )
    problems.add("index-chain", ERROR, np.flatnonzero(refs > 1), "are linked from more than one place")


def _check_entries(
    p: Collector, path: Path, table: RecordTable, keys: _Keys, found: np.ndarray, phy: np.ndarray,
    key_hash: np.ndarray, cl_min: int, slots_num: int,
) -> None:  # fmt: skip
    """Each entry against the record at its offset; marks the keys it finds in ``found``."""
    live = np.flatnonzero(phy >= cl_min)  # entries for deleted CommitLog files are legitimate
    problems = _FileProblems(p, path, slots_num)
    past = live[phy[live] >= table.valid_end]
    # A broker's recovery leaves index entries past a cut (it truncates consume queues only),
    # and a lookup drops offsets it cannot read: stale, not broken.
    problems.add(
        "index-past-end",
        WARNING,
        past,
        f"point past the CommitLog's valid end {table.valid_end}; `rmq rebuild --index` removes them",
        phy,
    )
    live = live[phy[live] < table.valid_end]
    rec = table.locate(phy[live])
    problems.add("index-bad-offset", ERROR, live[rec < 0], "do not point at the start of a record", phy)
    matched = live[rec >= 0]
    codes = (rec[rec >= 0] << _KEY_BITS) | key_hash[matched]
    sorted_keys, key_order, group = keys.sorted()
    hit = np.searchsorted(sorted_keys, codes)
    hit = np.minimum(hit, max(len(sorted_keys) - 1, 0))
    known = (sorted_keys[hit] == codes) if len(sorted_keys) else np.zeros(len(codes), dtype=bool)
    wrong = matched[~known]
    for i in wrong[:10].tolist():
        p.error(
            "index-wrong-hash",
            path,
            _entry_at(i, slots_num),
            f"entry {i + 1}: keyHash {int(key_hash[i])} matches no key of the record at {int(phy[i])}",
        )
    if len(wrong) > 10:
        p.error("index-wrong-hash", path, None, f"{len(wrong) - 10} more entries with a wrong keyHash")
    # an entry finds every key of its record with the same hash (a key listed twice is one key)
    seen = np.zeros(int(group[-1]) + 1 if len(group) else 0, dtype=bool)
    seen[group[hit[known]]] = True
    found[key_order[seen[group]]] = True


def _coverage(
    files: list[IndexFile],
    table: RecordTable,
    p: Collector,
    found: np.ndarray,
    *,
    cl_min: int,
    abort: bool,
    topic: str | None,
    reindex_from: int,
) -> None:
    """Every key the broker would index (``buildIndex``) must be in some index file.

    Checked for records from the first index file's beginPhyOffset (older files are deleted
    with the CommitLog, ``deleteExpiredFile``) to the last file's endPhyOffset; records after
    that are indexed when the broker dispatches them (from ``reindex_from`` on). Records outside
    the index files' range and before ``reindex_from`` are never indexed again by a broker (an
    unclean start deletes the index files written after the checkpoint, ``IndexService.load``, and
    re-indexes only from where its recovery starts): they are counted as not covered (a warning).
    """
    # masks of the records, spread over their keys a run of keys at a time
    pos = table.position
    is_indexed = (table.sys_flag & fmt.TRANSACTION_MASK) != fmt.TransactionType.ROLLBACK
    is_indexed &= pos >= cl_min
    if topic is not None:
        tid = table.topics.index(topic) if topic in table.topics else -1
        is_indexed &= table.topic_id == tid
    early = pos < reindex_from
    if not files:
        lost = _key_rows(table, lambda rec, found: is_indexed[rec] & ~found & early[rec], found)
        _uncovered(table, p, lost, "no index file: the index does not cover {what}")
        return
    begin = max(files[0].header.begin_phy_offset, cl_min)
    end = max(f.header.end_phy_offset for f in files)
    before, after = pos < begin, pos > end
    lost_before, lost_after, later, missing = _key_rows(
        table,
        lambda rec, found: (
            is_indexed[rec] & ~found & early[rec] & before[rec],
            is_indexed[rec] & ~found & early[rec] & after[rec],
            is_indexed[rec] & after[rec] & ~early[rec],
            is_indexed[rec] & ~before[rec] & ~after[rec] & ~found,
        ),
        found,
    )
    where = f"before the first index file's beginPhyOffset {begin}"
    _uncovered(table, p, lost_before, "the index does not cover {what} " + where)
    where = f"after the last index file's endPhyOffset {end} (a broker dispatches from {reindex_from} on)"
    _uncovered(table, p, lost_after, "the index does not cover {what} " + where)
    if len(later):
        late = np.sort(later)
        first = int(late[0])
        n = int(np.count_nonzero(np.diff(late))) + 1
        path, at = _record_place(table, first)
        p.warning(
            "index-behind",
            path,
            at,
            f"{n} record(s) from CommitLog offset {int(table.position[first])} on are after the last index "
            f"file's endPhyOffset {end}: not indexed yet (the broker indexes them when it dispatches them)",
        )
    if len(missing):
        _missing_keys(table, p, missing, abort)


def _key_rows(table: RecordTable, select: Callable, found: np.ndarray):
    """The record of each key that ``select(records, found)`` picks, a run of keys at a time; with
    a tuple of masks, one array per mask (in key order, as masks over all keys would give)."""
    picked: list[list[np.ndarray]] = []
    single = False
    for lo, hi in list(table.keys.runs()) or [(0, 0)]:
        rec = table.keys.records(lo, hi)
        masks = select(rec, found[lo:hi])
        single = not isinstance(masks, tuple)
        masks = (masks,) if single else masks
        picked = picked or [[] for _ in masks]
        for got, mask in zip(picked, masks, strict=True):
            got.append(rec[mask])
    joined = [np.concatenate(got) for got in picked]
    return joined[0] if single else tuple(joined)


def _missing_keys(table: RecordTable, p: Collector, key_records: np.ndarray, abort: bool) -> None:
    """One problem per run of consecutive records with keys in no index file (``key_records``: the
    record of each such key); a warning after an unclean shutdown, whose recovery re-indexes."""
    recs = np.sort(key_records)
    recs = recs[np.concatenate(([True], recs[1:] != recs[:-1]))]
    brk = np.flatnonzero(np.diff(recs) != 1) + 1
    for run in np.split(recs, brk):
        first = int(run[0])
        path, at = _record_place(table, first)
        keys = int(np.count_nonzero((key_records >= run[0]) & (key_records <= run[-1])))
        p.add(
            "index-missing-key",
            "warning" if abort else "error",
            path,
            at,
            f"{keys} key(s) of {len(run)} record(s) from CommitLog offset {int(table.position[first])} to "
            f"{int(table.position[run[-1]])} are in no index file: queries by key do not find them; "
            "`rmq rebuild --index` indexes them",
        )


def _uncovered(table: RecordTable, p: Collector, key_rows: np.ndarray, head: str) -> None:
    """One warning counting keys (and their records) no index file holds and no broker indexes again."""
    if not len(key_rows):
        return
    recs = np.unique(key_rows)
    first, last = int(recs[0]), int(recs[-1])
    path, at = _record_place(table, first)
    what = (
        f"{len(recs)} record(s) ({len(key_rows)} key(s), CommitLog offsets {int(table.position[first])} to "
        f"{int(table.position[last])})"
    )
    p.warning(
        "index-uncovered",
        path,
        at,
        f"{head.format(what=what)}: queries by key do not find them and a broker does not index them "
        "again; `rmq rebuild --index` indexes them",
    )


def _record_place(table: RecordTable, row: int) -> tuple[Path | str, int]:
    pos = int(table.position[row])
    for info in table.files:
        mf = info.mapped
        if mf.from_offset <= pos < mf.from_offset + mf.size:
            return mf.path, pos - mf.from_offset
    return "commitlog", pos
