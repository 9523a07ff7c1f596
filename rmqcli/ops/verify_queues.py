"""Consume-queue verification: files, units, and the join of every unit with its CommitLog record.

Rules from formats.md §2 (``ConsumeQueue.recover``, ``putMessagePositionInfo``, ``fillPreBlank``)
and §7.3 (``CommitLogDispatcherBuildConsumeQueue``: only NOT/COMMIT records are dispatched).
Units are read per file with numpy and joined against the record table by physical offset in
bulk; only the units (and records) that disagree are looked at one by one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from formats import commitlog as fmt
from formats.consumequeue import CQ_UNIT_DTYPE, CQ_UNIT_SIZE, FILLER_SIZE, is_ext_address
from formats.names import SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC
from rmqcli.memory import give_back_free_memory
from rmqcli.ops.verify_common import Collector
from rmqcli.ops.verify_table import RecordTable
from rmqcli.store.mapped import MappedFile
from rmqcli.store.naming import consume_queue_dir, is_safe_topic_dir, offset_to_name
from rmqcli.store.read.consumequeue import ConsumeQueue

LMQ_PREFIX = "%LMQ%"
# topics whose queues ``DefaultMessageStore.cleanUnusedTopic`` keeps although topics.json lacks them
KEPT_UNCONFIGURED = (SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC)
_UNIT = np.dtype(CQ_UNIT_DTYPE)
_EXT_MAX = -(2**31) - 1
_UNITS_BETWEEN_TRIMS = 1 << 19
assert is_ext_address(_EXT_MAX)


@dataclass
class QueueUnits:
    """The valid units of one queue, in queue-offset order."""

    topic: str
    queue_id: int
    cq: ConsumeQueue
    index: np.ndarray  # queue offset of each unit
    offset: np.ndarray
    size: np.ndarray
    tags: np.ndarray
    file_no: np.ndarray  # which of ``cq.files`` holds the unit
    max_offset: int  # next queue offset (maxOffsetInQueue)
    max_physic: int  # offset+size of the last valid unit (maxPhysicOffset), -1 if none
    file_size: int = 0
    loaded: bool = True

    def release(self) -> None:
        """Let the unit arrays go (``reload`` reads them again): a store's units need not all be
        held at once."""
        empty = np.empty(0, dtype=np.int64)
        self.index = self.offset = self.size = self.tags = self.file_no = empty
        self.loaded = False

    def reload(self) -> None:
        """Read the units again after ``release`` (their problems were reported the first time)."""
        if self.loaded:
            return
        again = _load_queue(self.topic, self.queue_id, self.cq, Collector(Path("."), 0), self.file_size)
        self.index, self.offset, self.size = again.index, again.offset, again.size
        self.tags, self.file_no = again.tags, again.file_no
        self.loaded = True


def load_queues(
    store, problems: Collector, file_size: int | None, topic: str | None = None, *, held: bool = True
) -> list[QueueUnits]:
    """Read and check every consume-queue file; return the valid units of each queue (with
    ``held=False`` only their offsets, for ``queue_hints``; ``QueueUnits.reload`` reads the rest)."""
    result = []
    for t, q in store.queue_ids(topic):
        cq = store.consume_queue(t, q)
        units = _load_queue(t, q, cq, problems, file_size or cq.queue.file_size)
        if not held:
            offset = units.offset
            units.release()
            units.offset = offset
        result.append(units)
    return result


def queue_hints(queues: list[QueueUnits]) -> np.ndarray:
    """``hints`` of the queues, whose units are then let go (``QueueUnits.release``): the checks
    that join units with records read each queue's units again, one queue at a time."""
    found = hints(queues)
    for q in queues:
        q.release()
    give_back_free_memory()
    return found


def _load_queue(topic: str, qid: int, cq: ConsumeQueue, p: Collector, file_size: int) -> QueueUnits:
    parts: list[list[np.ndarray | None]] = []
    prev = None
    seen_real = False
    stopped = False
    max_offset = prev_valid = 0
    for n, mf in enumerate(cq.files):
        _check_file_place(mf, prev, file_size, p)
        if prev is not None:
            prev.release()  # its units were copied: its pages need not stay mapped
        prev = mf
        if n and prev_valid > _UNITS_BETWEEN_TRIMS // 4:
            give_back_free_memory()  # the previous file's temporaries
        units, valid = _read_units(mf, p)
        prev_valid = valid
        if stopped:
            if valid:
                p.error(
                    "cq-hole",
                    mf.path,
                    0,
                    "an earlier file of this queue is not full: recovery stops there and deletes this file",
                )
            continue
        first = mf.from_offset // CQ_UNIT_SIZE
        idx = np.arange(first, first + valid, dtype=np.int64)
        offset = units["commitlog_offset"][:valid].astype(np.int64)
        size = units["size"][:valid].astype(np.int32)
        filler = (offset == 0) & (size == FILLER_SIZE)
        _check_fillers(mf, filler, seen_real, p)
        if valid:
            seen_real = seen_real or not filler.all()
        keep = ~filler
        tags = units["tags_code"][:valid][keep].astype(np.int64)
        owner = np.full(int(keep.sum()), n, dtype=np.int32)
        parts.append([idx[keep], offset[keep], size[keep], tags, owner])
        max_offset = first + valid
        if valid * CQ_UNIT_SIZE < mf.size and n < len(cq.files) - 1:
            stopped = True
            p.error(
                "cq-hole",
                mf.path,
                valid * CQ_UNIT_SIZE,
                "the valid units end before the end of this file although later files follow: recovery "
                "stops here and deletes the later files",
            )
    if prev is not None:
        prev.release()
    cols = [_join(parts, c, dtype) for c, dtype in enumerate(_COLUMN_TYPES)]
    offsets, sizes = cols[1], cols[2]
    max_physic = int(offsets[-1] + sizes[-1]) if len(offsets) else -1
    return QueueUnits(
        topic, qid, cq, cols[0], offsets, sizes, cols[3], cols[4], max_offset, max_physic, file_size
    )


# index, offset, size (an int32 in the unit), tagsCode, file number
_COLUMN_TYPES = (np.int64, np.int64, np.int32, np.int64, np.int32)


def _join(parts: list[list[np.ndarray | None]], c: int, dtype) -> np.ndarray:
    """Column ``c`` of the per-file ``parts`` joined; the parts' pieces are let go as they are
    joined, so that a queue's units are not held twice."""
    pieces = [part[c] for part in parts]
    for part in parts:
        part[c] = None
    joined = np.concatenate(pieces, dtype=dtype) if pieces else np.empty(0, dtype=dtype)
    del pieces
    if len(joined) > _UNITS_BETWEEN_TRIMS // 4:
        give_back_free_memory()  # the pieces: the heap's free memory serves the next column
    return joined


def _check_file_place(mf: MappedFile, prev: MappedFile | None, file_size: int, p: Collector) -> None:
    """A queue file's size, its name (a multiple of the file size) and its place after ``prev``."""
    if mf.size != file_size:
        p.error(
            "cq-file-size",
            mf.path,
            None,
            f"file is {mf.size} bytes, expected {file_size}: the broker refuses to load the queue",
        )
    if mf.from_offset % CQ_UNIT_SIZE or (file_size and mf.from_offset % file_size):
        p.error(
            "cq-file-name",
            mf.path,
            None,
            f"start offset {mf.from_offset} is not a multiple of {file_size}",
        )
    if prev is not None and mf.from_offset != prev.from_offset + file_size:
        p.error(
            "cq-file-gap",
            mf.path,
            None,
            f"previous file {prev.name} ends at {prev.from_offset + file_size}, this one starts at "
            f"{mf.from_offset} (expected {offset_to_name(prev.from_offset + file_size)})",
        )


def _read_units(mf: MappedFile, p: Collector) -> tuple[np.ndarray, int]:
    """A queue file's units and how many lead it before the first invalid one (``ConsumeQueue.recover``:
    offset < 0 or size <= 0); non-zero bytes after them are a warning."""
    buf = mf.map()
    units = np.frombuffer(buf, dtype=_UNIT, count=len(buf) // CQ_UNIT_SIZE)
    invalid = (units["commitlog_offset"] < 0) | (units["size"] <= 0)
    valid = int(np.argmax(invalid)) if invalid.any() else len(units)
    rest = np.frombuffer(buf, dtype=np.uint8)[valid * CQ_UNIT_SIZE :]
    if rest.any():
        at = valid * CQ_UNIT_SIZE + int(np.argmax(rest != 0))
        p.warning(
            "cq-stale",
            mf.path,
            at,
            "non-zero bytes after the last valid unit (recovery ignores them)",
        )
    return units, valid


def _check_fillers(mf: MappedFile, filler: np.ndarray, seen_real: bool, p: Collector) -> None:
    """Filler units (``fillPreBlank``) may only pad the head of a queue, before its first real unit."""
    if not filler.any():
        return
    head = 0 if seen_real else int(np.argmin(filler)) if not filler.all() else len(filler)
    bad = np.flatnonzero(filler[head:]) + head
    if len(bad):
        i = int(bad[0])
        p.error(
            "cq-filler",
            mf.path,
            i * CQ_UNIT_SIZE,
            f"{len(bad)} filler unit(s) after real units (fillPreBlank only pads the queue head)",
        )


def hints(queues: list[QueueUnits]) -> np.ndarray:
    """Sorted unique record offsets the queues point at (a hint for the CommitLog hop)."""
    parts = [q.offset for q in queues if len(q.offset)]
    if not parts:
        return np.empty(0, dtype=np.int64)
    offsets = np.sort(np.concatenate(parts), kind="stable")  # sorted runs: a merge
    return offsets[np.concatenate(([True], offsets[1:] != offsets[:-1]))]


def check_units(
    queues: list[QueueUnits],
    table: RecordTable,
    p: Collector,
    cl_min: int,
    file_size: int | None,
    delay_levels_known: bool = True,
) -> tuple[np.ndarray, int]:
    """Join each unit with its record; returns (records covered by a correct unit, units checked).

    ``delay_levels_known``: the broker's messageDelayLevel was given. The tagsCode of a
    ``SCHEDULE_TOPIC_XXXX`` unit is its delivery time, store time plus the delay of its level
    (``ScheduleMessageService.computeDeliverTimestamp``); with the levels unknown, a unit that
    disagrees with the default levels is a warning (one per queue), not an error.
    """
    covered = np.zeros(len(table), dtype=bool)
    topic_ids = {t: i for i, t in enumerate(table.topics)}
    checked = trimmed = 0
    for q in queues:
        held = q.loaded
        q.reload()
        try:
            checked += _check_queue(q, table, p, cl_min, covered, topic_ids, delay_levels_known)
        finally:
            if not held:
                q.release()
        if checked - trimmed > _UNITS_BETWEEN_TRIMS:  # the queues' arrays, let go
            give_back_free_memory()
            trimmed = checked
    give_back_free_memory()
    return covered, checked


_UNITS_AT_ONCE = 1 << 18  # units of a queue joined with their records at once
_UNIT_KINDS = (
    "cq-past-end",
    "cq-bad-offset",
    "cq-size-mismatch",
    "cq-wrong-queue",
    "cq-offset-mismatch",
    "cq-tags-mismatch",
    "cq-not-dispatchable",
)


def _check_queue(
    q: QueueUnits,
    table: RecordTable,
    p: Collector,
    cl_min: int,
    covered: np.ndarray,
    topic_ids: dict[str, int],
    delay_levels_known: bool,
) -> int:
    """``check_units`` of one queue, ``_UNITS_AT_ONCE`` units at a time; marks the records its
    correct units cover in ``covered``; returns its units."""
    n = len(q.offset)
    tid = topic_ids.get(q.topic, -1)
    found: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for lo in range(0, n, _UNITS_AT_ONCE):
        for kind, rows in _check_run(q, table, lo, min(lo + _UNITS_AT_ONCE, n), cl_min, covered, tid):
            found.setdefault(kind, []).append(rows)
    bad = {
        kind: (np.concatenate([u for u, _ in found[kind]]), np.concatenate([r for _, r in found[kind]]))
        for kind in _UNIT_KINDS
        if kind in found
    }
    wrong_tags = bad.get("cq-tags-mismatch")
    if q.topic == SCHEDULE_TOPIC and not delay_levels_known and wrong_tags is not None:
        _unknown_levels(p, q, table, *wrong_tags)
        del bad["cq-tags-mismatch"]
    _report_units(p, q, table, bad)
    return n


def _check_run(
    q: QueueUnits, table: RecordTable, lo: int, hi: int, cl_min: int, covered: np.ndarray, tid: int
) -> list[tuple[str, tuple[np.ndarray, np.ndarray]]]:
    """Units ``lo`` to ``hi`` of ``q`` joined with their records: the bad ones by kind (their unit
    rows and record rows, -1 where none), in ``_UNIT_KINDS`` order."""
    live = np.flatnonzero(q.offset[lo:hi] >= cl_min) + lo  # units below the CommitLog minimum expired
    if not len(live):
        return []
    off, size = q.offset[live], q.size[live]
    past = off + size > table.valid_end
    rec = table.locate(off)
    del off, size
    bad_offset = (rec < 0) & ~past
    masks = {"cq-past-end": past, "cq-bad-offset": bad_offset}
    if len(table):  # else no record at all (e.g. an empty CommitLog): every unit points at nothing
        found = rec >= 0
        rec = np.maximum(rec, 0)
        judged, dispatched = _judge_units(q, table, live, rec, found, tid)
        covered[rec[dispatched]] = True
        masks.update(judged)
    out = []
    for kind, mask in masks.items():
        rows = np.flatnonzero(mask)
        if len(rows):
            out.append((kind, (live[rows], rec[rows])))
    return out


def _judge_units(
    q: QueueUnits, table: RecordTable, live: np.ndarray, r: np.ndarray, found: np.ndarray, tid: int
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """What is wrong with each live unit whose record was ``found`` (at row ``r``), by problem kind,
    and which units are right and point at a record the broker dispatches (they cover it)."""
    size = q.size[live]
    wrong_size = found & (table.total_size[r] != size)
    lmq = q.topic.startswith(LMQ_PREFIX)
    wrong_queue = found & ~wrong_size & ((table.topic_id[r] != tid) | (table.queue_id[r] != q.queue_id))
    if lmq:
        wrong_queue[:] = False
    good = found & ~wrong_size & ~wrong_queue
    wrong_qoff = good & (table.queue_offset[r] != q.index[live]) & (not lmq)
    tags = q.tags[live]
    wrong_tags = good & ~wrong_qoff & (table.tags_code[r] != tags) & (tags > _EXT_MAX)
    trans = table.sys_flag[r] & fmt.TRANSACTION_MASK
    not_dispatched = good & (
        (trans == fmt.TransactionType.PREPARED) | (trans == fmt.TransactionType.ROLLBACK)
    )
    masks = {
        "cq-size-mismatch": wrong_size,
        "cq-wrong-queue": wrong_queue,
        "cq-offset-mismatch": wrong_qoff,
        "cq-tags-mismatch": wrong_tags,
        "cq-not-dispatchable": not_dispatched,
    }
    return masks, good & ~wrong_qoff & ~not_dispatched


def _unknown_levels(
    p: Collector, q: QueueUnits, table: RecordTable, units: np.ndarray, recs: np.ndarray
) -> None:
    """One warning for the delayed units (rows ``units``, their records ``recs``) whose delivery
    time the default delay levels do not give."""
    delays = np.unique(q.tags[units] - table.store_timestamps(recs))
    level = q.queue_id + 1
    default = fmt.DEFAULT_DELAY_MILLIS
    expected = f"{default[level - 1]} ms" if 0 < level <= len(default) else "none (no such default level)"
    shown = ", ".join(f"{int(d)} ms" for d in delays[:3]) + (", ..." if len(delays) > 3 else "")
    j = int(units[0])
    mf = q.cq.files[int(q.file_no[j])]
    p.warning(
        "cq-delay-levels",
        mf.path,
        int(q.index[j]) * CQ_UNIT_SIZE - mf.from_offset,
        f"{len(units)} unit(s) of delay level {level} have a tagsCode (delivery time) of store time + "
        f"{shown}, the default messageDelayLevel gives {expected}: the broker was configured with other "
        "delay levels, unknown without --config; pass its broker.conf to check them",
    )


def _unit_message(kind: str, q: QueueUnits, j: int, table: RecordTable, r: int) -> str:
    """The message of one bad unit (``j``: unit row of ``q``, ``r``: row of its record or -1)."""
    unit = f"unit {int(q.index[j])}"
    off, size, tags = int(q.offset[j]), int(q.size[j]), int(q.tags[j])
    if kind == "cq-past-end":
        return f"{unit} points at {off}+{size}, past the CommitLog's valid end {table.valid_end}"
    if kind == "cq-bad-offset":
        return f"{unit} points at {off}, which is not the start of a record"
    if kind == "cq-size-mismatch":
        return f"{unit} says size {size}, the record at {off} has TOTALSIZE {int(table.total_size[r])}"
    if kind == "cq-wrong-queue":
        where = f"{table.topics[int(table.topic_id[r])]}:{int(table.queue_id[r])}"
        return f"{unit} points at a record of {where}, not {q.topic}:{q.queue_id}"
    if kind == "cq-offset-mismatch":
        return f"{unit} points at a record whose QUEUEOFFSET is {int(table.queue_offset[r])}"
    if kind == "cq-tags-mismatch":
        return f"{unit} has tagsCode {tags}, the record's is {int(table.tags_code[r])}"
    return f"{unit} points at a PREPARED/ROLLBACK record, which the broker never dispatches"


def _report_units(
    p: Collector, q: QueueUnits, table: RecordTable, bad: dict[str, tuple[np.ndarray, np.ndarray]]
) -> None:
    """The bad units by kind: (unit rows, record rows)."""
    for kind, (units, recs) in bad.items():
        for j, r in zip(units.tolist(), recs.tolist(), strict=True):
            mf = q.cq.files[int(q.file_no[j])]
            at = int(q.index[j]) * CQ_UNIT_SIZE - mf.from_offset
            p.error(kind, mf.path, at, _unit_message(kind, q, j, table, r))


def check_coverage(
    queues: list[QueueUnits],
    table: RecordTable,
    covered: np.ndarray,
    p: Collector,
    *,
    root,
    cl_min: int,
    redispatch_from: int,
    file_size: int,
    topic: str | None = None,
    configured: set[str] | None = None,
    dispatched_below: int | None = None,
) -> None:
    """Every dispatchable record must be in its queue at its queue offset.

    ``dispatched_below``: a controller-mode store's confirm bound (``rmqcli.store.confirm``): the
    records from it on are not confirmed, and 5.1.1 does not dispatch them.

    Records at or after ``redispatch_from`` are dispatched by the broker when it starts (reput
    from the consume queues' max physical offset, or abnormal recovery), so their absence is only
    a warning. So is the absence of the records of a topic not in topics.json (``configured``,
    ``None`` when unknown): ``deleteTopic`` removes the topic's config and, through
    ``cleanUnusedTopic``, its consume queues, and leaves its records in the CommitLog.
    """
    missing = _missing_records(table, covered, cl_min, topic)
    if dispatched_below is not None:
        missing = missing[table.position[missing] < dispatched_below]
    if not len(missing):
        return
    key = table.topic_id[missing].astype(np.int64) * (1 << 32) + (
        table.queue_id[missing].astype(np.int64) & 0xFFFFFFFF
    )
    order = np.lexsort((table.queue_offset[missing], key))
    missing, key = missing[order], key[order]
    if configured is not None:
        gone = np.array(
            [t not in configured and t not in KEPT_UNCONFIGURED for t in table.topics], dtype=bool
        )
        dropped = gone[table.topic_id[missing]]
        _unconfigured(p, table, missing[dropped], root)
        missing, key = missing[~dropped], key[~dropped]
        if not len(missing):
            return
    by_queue = {(q.topic, q.queue_id): q for q in queues}
    qoff = table.queue_offset[missing]
    brk = np.flatnonzero((key[1:] != key[:-1]) | (qoff[1:] != qoff[:-1] + 1)) + 1
    for run in np.split(np.arange(len(missing)), brk):
        _report_missing(p, table, missing[run], by_queue, root, redispatch_from, file_size)


def _missing_records(table: RecordTable, covered: np.ndarray, cl_min: int, topic: str | None) -> np.ndarray:
    """Rows of the dispatchable records (NOT/COMMIT, no inner batch, not expired) that no correct
    unit covers, of ``topic`` only when given; records of topics that have no queue of their own
    are left out."""
    trans = table.sys_flag & fmt.TRANSACTION_MASK
    want = (trans == fmt.TransactionType.NOT_TYPE) | (trans == fmt.TransactionType.COMMIT)
    want &= (table.sys_flag & fmt.INNER_BATCH_FLAG) == 0  # inner batches go to the BatchConsumeQueue
    want &= table.position >= cl_min
    missing = np.flatnonzero(want & ~covered)
    if not len(missing):
        return missing
    # LMQ queues are not the record's own; a topic that cannot name a directory has no queue
    # (reported as unsafe-topic by the CommitLog scan)
    no_queue = np.array(
        [t.startswith(LMQ_PREFIX) or not is_safe_topic_dir(t) for t in table.topics], dtype=bool
    )
    missing = missing[~no_queue[table.topic_id[missing]]]
    if topic is not None and topic in table.topics:
        missing = missing[table.topic_id[missing] == table.topics.index(topic)]
    elif topic is not None:
        return missing[:0]
    return missing


def _report_missing(
    p: Collector,
    table: RecordTable,
    recs: np.ndarray,
    by_queue: dict[tuple[str, int], QueueUnits],
    root,
    redispatch_from: int,
    file_size: int,
) -> None:
    """One problem for a run of records of one queue, at consecutive queue offsets, without units:
    a warning when the broker dispatches them when it starts, else an error."""
    first = int(recs[0])
    t = table.topics[int(table.topic_id[first])]
    qid = int(table.queue_id[first])
    lo, hi = int(table.queue_offset[recs[0]]), int(table.queue_offset[recs[-1]])
    late = bool(np.all(table.position[recs] >= redispatch_from))
    severity = "warning" if late else "error"
    qdir = consume_queue_dir(root, t, qid)
    q = by_queue.get((t, qid))
    what = (
        f"{len(recs)} record(s) of {t}:{qid} (queue offsets {lo}..{hi}, first at CommitLog "
        f"{int(table.position[first])})"
    )
    tail = "; the broker dispatches them when it starts" if late else ""
    if q is None or not q.cq.files:
        p.add("missing-queue", severity, qdir, None, f"no consume queue for {what}{tail}")
        return
    unit_at = lo * CQ_UNIT_SIZE
    name = offset_to_name(unit_at - unit_at % file_size) if file_size else offset_to_name(0)
    p.add(
        "cq-missing-unit",
        severity,
        qdir / name,
        unit_at % file_size if file_size else unit_at,
        f"{what} have no unit in the consume queue{tail}",
    )


def _unconfigured(p: Collector, table: RecordTable, rows: np.ndarray, root) -> None:
    """One warning per topic absent from topics.json whose records are in no consume queue."""
    for tid in np.unique(table.topic_id[rows]).tolist():
        recs = rows[table.topic_id[rows] == tid]
        t = table.topics[int(tid)]
        queues = len(np.unique(table.queue_id[recs]))
        p.warning(
            "deleted-topic",
            consume_queue_dir(root, t, int(table.queue_id[recs[0]])).parent,
            None,
            f"{len(recs)} record(s) of topic {t} ({queues} queue(s), first at CommitLog "
            f"{int(table.position[recs[0]])}) are in no consume queue, and {t} is not in config/topics.json: "
            "a deleted topic, whose records a broker leaves in the CommitLog until they expire",
        )
