"""Offline recovery: what an Apache RocketMQ 4.9.x broker does to its store at start-up.

``DefaultMessageStore.load`` / ``recover`` / ``start`` (formats.md §6, §3.5, §7.2):

1. ``lastExitOK = !exists(abort)``; ``--normal``/``--abnormal`` override it.
2. Index files: after an abnormal exit, every file whose ``endTimestamp`` is newer than the
   checkpoint's ``indexMsgTimestamp`` is deleted (``IndexService.load``). A file of the wrong size,
   which the broker maps at the right size (zero-extended, its entries past the cut lost), is
   replaced with every later one by re-indexing (``rebuild.scan_index``).
3. Consume queues: ``ConsumeQueue.recover`` finds each queue's valid end; later files go.
4. CommitLog: normal recovery walks from the third-last file, abnormal recovery from the last file
   whose first record was stored before the checkpoint's minimum timestamp (file 0 if none),
   checking CRCs; the first invalid record ends the log. Files after the end are deleted.
   Abnormal recovery dispatches every record it walks (duplicates are skipped by the writers).
5. Consume-queue units at or past the end are removed (``truncateDirtyLogicFiles``) when the
   queues reached past it; the index is not truncated (the broker does not either).
6. Reput: records after the furthest consume-queue unit are dispatched.
7. The checkpoint's logics/index timestamps follow the dispatch; ``abort`` is removed.

A RocketMQ 5 controller-mode store (``rmqcli.store.confirm``) is recovered as 5.1.1's
``recoverNormally``/``recoverAbnormally`` do it: the CommitLog is not cut at the checkpoint's
confirmPhyOffset, but neither the walk nor the reput dispatches a record past it, and the value is
clamped into ``[minPhyOffset, end]`` (abnormally: the end of the last confirmed record walked)
and written back; the plan notes the records left undispatched.

With ``salvage`` every CommitLog file is checked, also those before the start file, whose bad
records a broker serves as they are (``salvage_before``). Where the broker leaves stale bytes
after the new end of a file, ``rmq`` zeroes them (and backs them up first). Index files a
recovery creates are named after the store time of the first record they index instead of the
wall clock, so a recovery is reproducible. Config files the broker rewrites when it starts
serving are not touched. A record whose topic cannot name a directory under ``consumequeue/``
goes to no queue (a broker would write it outside the store); the records of such topics that
recovery walks or dispatches are noted in the plan (``rmqcli.ops.unsafe_topics``). Sizes not
given are read off the store's files; the plan notes a default assumed for want of files.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from formats import commitlog as fmt
from rmqcli.errors import CorruptDataError
from rmqcli.ops import recover_bulk, unsafe_topics
from rmqcli.ops.rebuild import IndexScan, rebuild_namer, repair_settings, scan_index, size_notes
from rmqcli.ops.reput import reput_records
from rmqcli.ops.safety import Change, Plan, PlanStep, outside_roots, plan_path, staging_dir
from rmqcli.ops.salvage import SALVAGED_PROPERTY, Fill, Salvager
from rmqcli.remoting.javanames import camel_fields
from rmqcli.store import Store
from rmqcli.store.checkpoint import Checkpoint
from rmqcli.store.confirm import ConfirmBound, confirm_bound
from rmqcli.store.mapped import MappedFile
from rmqcli.store.naming import is_index_name
from rmqcli.store.read.commitlog import (
    CommitLog,
    Record,
    RecordError,
    classify_tail,
    decode_record,
    first_nonzero,
)
from rmqcli.store.scan.fastdispatch import FastDispatcher
from rmqcli.store.sparse import copy_sparse, same_tree
from rmqcli.store.store import ABORT_FILE, CHECKPOINT_FILE, CONSUMEQUEUE_DIR, INDEX_DIR
from rmqcli.store.write.dispatch import Dispatcher, UnsafeTopic, note_unsafe

log = logging.getLogger(__name__)

STAGING_NAME = "recover"
NORMAL_START_FROM_LAST = 3  # recoverNormally starts at the third-last file


@dataclass
class WalkEnd:
    """Where the broker's recovery walk stops."""

    end: int  # global offset: the new end of the CommitLog
    reason: str  # why the walk stopped there


@dataclass
class RecoverResult:
    plan: Plan
    mode: str
    staged: Path
    end: int
    previous_end: int
    dispatched: int = 0
    checkpoint: Checkpoint = field(default_factory=Checkpoint)
    actions: list[tuple[str, str, int]] = field(default_factory=list)  # (action, plan path, size)
    fills: list[Fill] = field(default_factory=list)  # --salvage: regions replaced by tombstones
    unsafe: dict[str, UnsafeTopic] = field(default_factory=dict)  # topics whose records got no queue
    index_from: int | None = None  # ``index_later``: where the index must go on (None: it is whole)

    def to_dict(self) -> dict:
        return {
            **camel_fields(self, "mode", "end", "previous_end", "dispatched"),
            "salvaged": [
                {
                    "file": plan_path(self.plan.store, f.mf.path),
                    "offset": f.position,
                    "filePosition": f.file_position,
                    "length": f.length,
                    "reason": f.reason,
                    "tombstones": 0 if f.ends_file else len(f.tombstones),
                    "endsFile": f.ends_file,
                    "queues": [f"{t}/{q}" for t, q in sorted(f.queues)],
                }
                for f in self.fills
            ],
            "plan": self.plan.to_dict(),
        }


def start_file_index(store: Store, abnormal: bool) -> int:
    """``recoverNormally``: third-last file; ``recoverAbnormally``: ``isMappedFileMatchedRecover``."""
    files = store.commitlog.files
    if not abnormal:
        return max(0, len(files) - NORMAL_START_FROM_LAST)
    cp = store.checkpoint() if store.checkpoint_path.exists() else Checkpoint()
    settings = store.settings
    limit = (
        cp.min_timestamp_index
        if settings.message_index_enable and settings.message_index_safe
        else cp.min_timestamp
    )
    for i in range(len(files) - 1, -1, -1):
        stamp = _first_store_timestamp(files[i])
        if stamp is not None and stamp != 0 and stamp <= limit:
            return i
    return 0


def _first_store_timestamp(mf: MappedFile) -> int | None:
    """The store timestamp of a file's first record, read as the broker does (V1 magic only)."""
    buf = mf.map()
    if len(buf) < fmt.PREFIX_SIZE:
        return None
    prefix = dict(zip(fmt.PREFIX_OFFSETS, fmt.PREFIX_STRUCT.unpack_from(buf, 0), strict=False))
    if prefix["magic_code"] != fmt.MAGIC_V1:
        return None
    born = fmt.host_length(prefix["sys_flag"], fmt.BORNHOST_V6_FLAG)
    if len(buf) < fmt.PREFIX_SIZE + born + fmt.STORE_TIMESTAMP_STRUCT.size:
        return None
    return fmt.STORE_TIMESTAMP_STRUCT.unpack_from(buf, fmt.PREFIX_SIZE + born)[0]


def walk(
    store: Store,
    start_index: int,
    check_crc: bool,
    on_record=None,
    salvager: Salvager | None = None,
    fills: dict[int, Fill] | None = None,
) -> WalkEnd:
    """The recovery walk (``checkMessageAndReturnSize`` with ``readBody``): BLANK goes to the next
    file, anything invalid (incl. a zero tail, a bad CRC) ends the log.

    With a ``salvager``, a bad record that can be salvaged is replaced by its tombstones instead
    (``rmqcli.ops.salvage``), and its ``Fill`` is put into ``fills`` by global offset; fills already
    there are reused.
    """
    files = store.commitlog.files
    if not files:
        return WalkEnd(0, "no CommitLog files")
    for mf in files[start_index:]:
        buf = mf.map()
        limit = len(buf)
        pos = 0
        while True:
            tail, _ = classify_tail(buf, pos, limit)
            if tail == "blank" and mf is files[-1]:
                # no next file: the walk's position stays at the BLANK, where the next append goes
                return WalkEnd(mf.from_offset + pos, f"BLANK record ending the last file {mf.name}")
            if tail == "blank":
                break  # next file
            if tail in ("zeros", "end"):
                return WalkEnd(mf.from_offset + pos, f"end of data in {mf.name} at {pos}")
            rec, problem = _check(mf, buf, pos, limit, check_crc)
            if problem is not None:
                fill = _salvage(salvager, fills, mf, buf, pos, limit, problem)
                if fill is None:
                    return WalkEnd(mf.from_offset + pos, f"{mf.name} at {pos}: {problem}")
                if on_record is not None:
                    for tombstone in fill.records():
                        on_record(tombstone)
                pos += fill.length
                if fill.ends_file:
                    break  # next file
                continue
            if on_record is not None:
                on_record(rec)
            pos += rec.total_size
    last = files[-1]
    return WalkEnd(last.from_offset + last.size, "the last file is full")


def _check(mf: MappedFile, buf, pos: int, limit: int, check_crc: bool) -> tuple[Record | None, str | None]:
    """The record at ``pos`` and why recovery rejects it (None: valid), as ``checkMessageAndReturnSize``."""
    try:
        rec = decode_record(buf, pos, limit, str(mf.path), mf.from_offset)
    except RecordError as exc:
        return None, str(exc)
    if check_crc and rec.body_length > 0 and fmt.body_crc(rec.stored_body) != rec.body_crc:
        return rec, "body CRC mismatch"
    return rec, None


def salvage_before(
    store: Store,
    start_index: int,
    check_crc: bool,
    salvager: Salvager,
    fills: dict[int, Fill],
    notes: list[str],
) -> None:
    """``--salvage`` in the files before the one recovery starts from, which a broker never checks.

    A broker serves their records as they are (a bad body included: the reput reads no CRC). Each
    bad record found there that can be salvaged gets its ``Fill``; one that cannot is noted and
    left as it is, and the file's walk goes on in the next file (the CommitLog is not cut there).
    """
    for mf in store.commitlog.files[:start_index]:
        buf = mf.map()
        limit = len(buf)
        pos = 0
        while classify_tail(buf, pos, limit)[0] == "garbage":
            rec, problem = _check(mf, buf, pos, limit, check_crc)
            if problem is None:
                pos += rec.total_size
                continue
            fill = _salvage(salvager, fills, mf, buf, pos, limit, problem)
            if fill is None:
                notes.append(
                    f"--salvage: {mf.name} at {pos}: {problem}; no tombstones fit there: left as it is "
                    "(a broker's recovery does not check this file and serves it as it is)"
                )
                break
            if fill.ends_file:
                break
            pos += fill.length


def _salvage(
    salvager: Salvager | None,
    fills: dict[int, Fill] | None,
    mf: MappedFile,
    buf,
    pos: int,
    limit: int,
    problem: str,
) -> Fill | None:
    """The fill replacing the bad record at ``pos``, found before or now (None: not salvaged)."""
    if salvager is None or fills is None:
        return None
    fill = fills.get(mf.from_offset + pos)
    if fill is None:
        fill = salvager.fill(mf, buf, pos, limit, problem)
        if fill is not None:
            fills[fill.position] = fill
    return fill


def stage_recover(
    store: Store,
    *,
    mode: str | None = None,
    check_crc: bool | None = None,
    salvage: bool = False,
    bulk: bool = True,
    index_later: bool = False,
) -> RecoverResult:
    """Work out the recovered store in ``STORE/.rmq-staging/recover`` and plan the change.

    ``salvage``: replace bad records by tombstones instead of ending the CommitLog at the first
    one (``rmqcli.ops.salvage``); the queues with units pointing at them are re-dispatched from there.
    ``bulk``: walk and dispatch whole windows of records at once (``rmqcli.ops.recover_bulk``) where
    that gives the same result; ``False``: record by record throughout.
    ``index_later`` (with ``bulk``): recover the CommitLog and the consume queues only; the index
    files the recovery keeps are staged, and ``index_from`` says where indexing must go on (``rmq
    serve`` builds the rest behind the CommitLog, as ``ReputMessageService`` does). Where the bulk
    path cannot be taken the index is recovered too and ``index_from`` is None.
    """
    abnormal = store.abort_exists if mode is None else mode == "abnormal"
    scan = scan_index(store)
    try:
        if bulk and not salvage:
            try:
                later = index_later
                return _stage_recover(store, scan, abnormal, check_crc, salvage, bulk=True, index_later=later)
            except recover_bulk.Irregular as exc:
                log.info("recovery goes record by record: %s", exc)
        return _stage_recover(store, scan, abnormal, check_crc, salvage, bulk=False)
    finally:
        scan.close()


def _stage_recover(
    store: Store,
    scan: IndexScan,
    abnormal: bool,
    check_crc: bool | None,
    salvage: bool,
    *,
    bulk: bool,
    index_later: bool = False,
) -> RecoverResult:
    settings = repair_settings(store, scan)
    check = settings.check_crc_on_recover if check_crc is None else check_crc
    _refuse_mixed_sizes(store, settings.mapped_file_size_commitlog)
    cp = store.checkpoint() if store.checkpoint_path.exists() else Checkpoint()
    notes: list[str] = []
    staged = staging_dir(store.root, STAGING_NAME)
    actions: list[tuple[str, str, int]] = []

    start = start_file_index(store, abnormal)
    fills: dict[int, Fill] = {}
    salvager = Salvager(store, check) if salvage else None
    if salvager is not None:  # find the fills before anything is dispatched
        salvage_before(store, start, check, salvager, fills, notes)
        walk(store, start, check, None, salvager, fills)

    # 2. index files (IndexService.load) and 3. consume queues, in a staged copy
    if store.consumequeue_dir.is_dir():
        shutil.copytree(store.consumequeue_dir, staged / CONSUMEQUEUE_DIR, copy_function=copy_sparse)
    reindex_from = _stage_index(store, scan, staged, abnormal, cp, min(fills, default=None), notes)
    if bulk and (fills or reindex_from is not None or not FastDispatcher.supports(settings)):
        raise recover_bulk.Irregular("salvaged records or a damaged index file")
    dispatcher = Dispatcher(staged, settings, rebuild_namer, index=not bulk)
    dispatcher.load()
    way = _InBulk(staged, settings, index_later) if bulk else _RecordByRecord(salvager, fills, notes)
    try:
        loaded_index_ts = way.index_timestamp(dispatcher)
        max_cq = dispatcher.max_physic_offset
        for fill in sorted(fills.values(), key=lambda f: f.position):
            _cut_queues(dispatcher, fill.position, fill.queues)

        # 4. the CommitLog walk (abnormal: dispatching as it goes; with fills the reput does it, below;
        # controller mode: the reput does it, up to the confirm offset)
        controller = store.controller_mode
        in_walk = abnormal and not fills and reindex_from is None and not controller
        stop, count = way.walk(store, start, check, dispatcher, in_walk)
        previous_end = store.commitlog.max_offset()
        end = stop.end
        _plan_commitlog(store, end, actions, notes, stop)

        # 5. consume-queue units past the end; 6. reput (controller mode: the confirmed records only)
        if max_cq >= end:
            _cut_queues(dispatcher, end)
        reput_from = max(dispatcher.max_physic_offset, store.commitlog.min_offset, 0)
        walked_from = store.commitlog.files[start].from_offset if abnormal and store.commitlog.files else None
        if not in_walk and (fills or reindex_from is not None or (controller and abnormal)):
            reput_from = _first_lacking(reput_from, walked_from, fills, reindex_from)
        confirm = _confirm(store, cp, end, walked_from, notes) if controller else None
        reput_end = min(end, confirm.boundary) if confirm is not None else end
        count += way.reput(store, start, reput_from, reput_end, dispatcher)
        dispatcher.flush()
    finally:
        dispatcher.close()
        way.close()
    index_ts = way.index_timestamp(dispatcher)
    checkpoint = _recovered_checkpoint(cp, dispatcher.logics_msg_timestamp, index_ts, loaded_index_ts)
    if confirm is not None:
        checkpoint = replace(checkpoint, confirm_phy_offset=confirm.offset)

    plan = Plan("recover", store.root, [], notes, outside_roots(store.root, store.commitlog_dirs))
    result = RecoverResult(plan, "abnormal" if abnormal else "normal", staged, end, previous_end)
    result.dispatched = count
    result.checkpoint = checkpoint
    if way.indexes_later and settings.message_index_enable:
        walked = store.commitlog.files[start].from_offset if in_walk and store.commitlog.files else end
        result.index_from = min(walked, reput_from) if min(walked, reput_from) < end else None
    result.actions = actions
    result.fills = sorted(fills.values(), key=lambda f: f.position)
    result.unsafe = {**dispatcher.unsafe, **way.unsafe()}
    notes += [_salvage_note(store, fill, start) for fill in result.fills]
    _plan_staged(store, result)
    swapped = {step.path for step in plan.steps if step.action == "replace-dir"}
    notes += size_notes(store, settings, CONSUMEQUEUE_DIR in swapped, INDEX_DIR in swapped, scan)
    unsafe_topics.report(plan, store, result.unsafe)
    return result


class _RecordByRecord:
    """The walk and the reput one record at a time (salvaged records, a damaged index file, or
    whatever the bulk path declines); the ``Dispatcher`` writes queues and index."""

    indexes_later = False

    def __init__(self, salvager: Salvager | None, fills: dict[int, Fill], notes: list[str]):
        self.salvager, self.fills, self.notes = salvager, fills, notes

    def walk(
        self, store: Store, start: int, check: bool, dispatcher: Dispatcher, in_walk: bool
    ) -> tuple[WalkEnd, int]:
        return _walk_each(store, start, check, dispatcher, in_walk, self.salvager, self.fills)

    def reput(self, store: Store, start: int, reput_from: int, end: int, dispatcher: Dispatcher) -> int:
        count = 0
        for rec in reput_records(store, reput_from, end, self.fills, self.notes):
            if rec.physical_offset >= reput_from:
                dispatcher.dispatch_record(rec)
                count += 1
        return count

    def index_timestamp(self, dispatcher: Dispatcher) -> int:
        """The end timestamp of the last full index file (the checkpoint's ``indexMsgTimestamp``)."""
        return dispatcher.index.completed_end_timestamp

    def unsafe(self) -> dict[str, UnsafeTopic]:
        return {}

    def close(self) -> None:
        pass


class _InBulk:
    """The walk and the reput a window of records at a time (``rmqcli.ops.recover_bulk``): queue
    units through the ``Dispatcher``, index keys through a ``FastDispatcher`` resumed on the index
    files kept, or left for ``rmq serve`` to build behind (``indexes_later``)."""

    def __init__(self, staged: Path, settings, indexes_later: bool):  # type: ignore[no-untyped-def]
        self.indexes_later = indexes_later
        self.fast = None if indexes_later else _resumed_index(staged, settings)

    def walk(
        self, store: Store, start: int, check: bool, dispatcher: Dispatcher, in_walk: bool
    ) -> tuple[WalkEnd, int]:
        return _walk_in_bulk(store, start, check, dispatcher, self.fast, in_walk)

    def reput(self, store: Store, start: int, reput_from: int, end: int, dispatcher: Dispatcher) -> int:
        return _reput_in_bulk(store, start, reput_from, end, dispatcher, self.fast)

    def index_timestamp(self, dispatcher: Dispatcher) -> int:
        """The end timestamp of the last full index file (the checkpoint's ``indexMsgTimestamp``)."""
        return self.fast.completed_end_timestamp if self.fast else dispatcher.index.completed_end_timestamp

    def unsafe(self) -> dict[str, UnsafeTopic]:
        return dict(self.fast.unsafe) if self.fast else {}

    def close(self) -> None:
        if self.fast is not None:
            self.fast.close()


def _walk_each(
    store: Store,
    start: int,
    check: bool,
    dispatcher: Dispatcher,
    in_walk: bool,
    salvager: Salvager | None,
    fills: dict[int, Fill],
) -> tuple[WalkEnd, int]:
    """The walk record by record: each record dispatched (``in_walk``) or its unsafe topic noted."""
    count = 0

    def dispatch(rec: Record) -> None:
        nonlocal count
        dispatcher.dispatch_record(rec)
        count += 1

    def note(rec: Record) -> None:  # a walk that does not dispatch still notes unsafe topics
        if fmt.is_dispatched_to_queue(rec.sys_flag):
            note_unsafe(dispatcher.unsafe, rec.topic, rec.physical_offset, [rec.queue_id])

    stop = walk(store, start, check, dispatch if in_walk else note, salvager, fills)
    return stop, count


def _resumed_index(staged: Path, settings) -> FastDispatcher:
    """The index dispatch of the bulk path, going on from the index files the recovery keeps."""
    fast = FastDispatcher(staged, settings, rebuild_namer, consume_queues=False)
    kept = sorted(p for p in (staged / INDEX_DIR).iterdir() if is_index_name(p.name))
    fast.resume_index(kept)
    return fast


def _walk_in_bulk(
    store: Store, start: int, check: bool, dispatcher: Dispatcher, fast: FastDispatcher | None, in_walk: bool
) -> tuple[WalkEnd, int]:
    """``_walk_each`` in bulk (``rmqcli.ops.recover_bulk``)."""
    sink = recover_bulk.BulkDispatch(dispatcher, fast) if in_walk else None

    def note(batch, n: int) -> None:
        for i in recover_bulk.unsafe_rows(batch, n).tolist():
            note_unsafe(dispatcher.unsafe, batch.topics[batch.topic_index[i]], int(batch.position[i]),
                        [int(batch.queue_id[i])])  # fmt: skip

    hints = store.record_offsets()
    stop = recover_bulk.walk(store, start, check, _check, sink, note, hints)
    return WalkEnd(stop.end, stop.reason), sink.count if sink is not None else 0


def _reput_in_bulk(
    store: Store, start: int, reput_from: int, end: int, dispatcher: Dispatcher, fast: FastDispatcher | None
) -> int:
    """The reput in bulk over records the walk checked (it started in file ``start``)."""
    if reput_from >= end:
        return 0
    files = store.commitlog.files
    if not files or reput_from < files[start].from_offset:
        raise recover_bulk.Irregular("the reput starts before the records the walk checked")
    sink = recover_bulk.BulkDispatch(dispatcher, fast)
    recover_bulk.reput(store, reput_from, end, sink)
    return sink.count


def _first_lacking(
    reput_from: int, walked_from: int | None, fills: dict[int, Fill], reindex_from: int | None
) -> int:
    """Where the reput starts when the walk did not dispatch (records were salvaged, or index files
    are rebuilt): in order from the first record a queue or index file lacks (duplicates are skipped).

    ``walked_from``: where an abnormal recovery's walk, which dispatches, started.
    """
    salvaged = [f.position for f in fills.values() if f.queues]
    starts = [reput_from, *salvaged]
    if walked_from is not None:
        starts.append(walked_from)
    if reindex_from is not None:
        starts.append(reindex_from)
    return min(starts)


def _confirm(
    store: Store, cp: Checkpoint, end: int, walked_from: int | None, notes: list[str]
) -> ConfirmBound:
    """A controller-mode store's confirm offset after 5.1.1's recovery: clamped into
    ``[minPhyOffset, end]`` (``recoverNormally``), or after an abnormal walk from ``walked_from``
    into ``[minPhyOffset, end of the last record it dispatched]`` (``recoverAbnormally``); the
    records after it stay in the CommitLog and are not dispatched (``rmqcli.store.confirm``)."""
    commitlog = store.commitlog
    assert isinstance(commitlog, CommitLog)
    bound = confirm_bound(commitlog, cp.confirm_phy_offset, end)
    if walked_from is not None and bound.offset > max(bound.boundary, walked_from):
        bound = replace(bound, offset=max(bound.boundary, walked_from))
    if bound.offset != cp.confirm_phy_offset:
        notes.append(
            f"confirmPhyOffset {cp.confirm_phy_offset} becomes {bound.offset} (5.1.1's recovery in "
            "controller mode corrects it so)"
        )
    if bound.boundary < end:
        notes.append(
            f"the {end - bound.boundary} bytes of records from offset {bound.boundary} are past "
            "confirmPhyOffset: kept in the CommitLog, not dispatched (controller mode: they wait for the "
            "in-sync replicas)"
        )
    return bound


def _refuse_mixed_sizes(store: Store, file_size: int) -> None:
    """``MappedFileQueue.load``: a broker refuses CommitLog files of another size than configured."""
    sizes = {f.size for f in store.commitlog.files}
    if len(sizes) > 1 or (sizes and sizes != {file_size}):
        raise CorruptDataError(
            f"CommitLog files have sizes {sorted(sizes)}; a broker refuses to load such a store "
            "(MappedFileQueue.load)"
        )


def _cut_queues(dispatcher: Dispatcher, end: int, keys: Iterable[tuple[str, int]] | None = None) -> None:
    """``truncateDirtyLogicFiles(end)`` on the staged queues (``keys``: only those), dropping the
    files left empty."""
    queues = dispatcher.cqs if keys is None else {k: dispatcher.cqs[k] for k in keys if k in dispatcher.cqs}
    for cq in queues.values():
        for path in cq.truncate_dirty(end):
            path.unlink()


def _recovered_checkpoint(cp: Checkpoint, logics_ts: int, index_ts: int, loaded_index_ts: int) -> Checkpoint:
    """The checkpoint after the dispatch: logics and index timestamps follow what was dispatched."""
    return Checkpoint(
        cp.physic_msg_timestamp,
        logics_ts or cp.logics_msg_timestamp,
        index_ts if index_ts != loaded_index_ts else cp.index_msg_timestamp,
        cp.master_flushed_offset,
        cp.confirm_phy_offset,
    )


def _salvage_note(store: Store, fill: Fill, start: int) -> str:
    """The plan note of one ``--salvage`` fill: what a broker would do there, and what rmq does."""
    files = store.commitlog.files
    checked_from = files[start].from_offset if files else 0
    broker = (
        "a broker's recovery would end the CommitLog there"
        if fill.position >= checked_from
        else f"a broker's recovery checks only from {files[start].name} on and serves this record as it is"
    )
    replaced = (
        "replaced by a BLANK record ending the file"
        if fill.ends_file
        else f"replaced by {len(fill.tombstones)} tombstone record(s) carrying {SALVAGED_PROPERTY}"
    )
    return (
        f"--salvage: {fill.mf.name} at {fill.file_position}: {fill.reason}; {broker}. The {fill.length} "
        f"bytes are backed up and {replaced}"
    )


def _stage_index(
    store: Store,
    scan: IndexScan,
    staged: Path,
    abnormal: bool,
    cp: Checkpoint,
    first_fill: int | None,
    notes: list[str],
) -> int | None:
    """Copy the index files a recovery keeps into ``staged``; returns where re-indexing must start
    for the salvaged records or a damaged index file (None: nowhere).

    After an abnormal exit ``IndexService.load`` deletes every file whose ``endTimestamp`` is newer
    than the checkpoint's ``indexMsgTimestamp``. With salvaged records, the first file holding an
    entry at or after the first of them goes too, with every later one, and is rebuilt from its
    first entry's offset: its entries may name keys a tombstone no longer carries. A damaged index
    file (``rebuild.scan_index``: a size the geometry does not give, which a broker zero-extends or
    reads in part) goes with every later one, rebuilt from where the last file kept ends.
    """
    (staged / INDEX_DIR).mkdir()
    reindex_from: int | None = None
    kept_end = store.commitlog.min_offset
    why_rebuilt = "indexes salvaged records"
    for _, f, damage in scan.entries:
        if f is None:
            if reindex_from is None:
                reindex_from = max(kept_end, store.commitlog.min_offset)
                why_rebuilt = "follows a damaged index file"
            notes.append(
                f"{damage}: it is backed up and replaced; the index is rebuilt from CommitLog offset "
                f"{reindex_from}"
            )
            continue
        if reindex_from is None and first_fill is not None and f.header.end_phy_offset >= first_fill:
            reindex_from = max(f.header.begin_phy_offset, store.commitlog.min_offset)
        if reindex_from is not None:
            notes.append(f"index file {f.name} {why_rebuilt}: it is rebuilt")
        elif abnormal and f.header.end_timestamp > cp.index_msg_timestamp:
            notes.append(
                f"index file {f.name} ends after the checkpoint's indexMsgTimestamp: the broker deletes "
                "it after an abnormal exit and re-indexes its records"
            )
        else:
            copy_sparse(f.path, staged / INDEX_DIR / f.name)
            kept_end = f.header.end_phy_offset
    return reindex_from


def _plan_commitlog(store: Store, end: int, actions: list, notes: list[str], stop: WalkEnd) -> None:
    """``MappedFileQueue.truncateDirtyFiles(end)``: later files deleted, the file holding ``end`` cut.

    Steps name the CommitLog files where they are (``plan_path``: absolute when ``storePathCommitLog``
    puts them outside the store).
    """
    for mf in store.commitlog.files:
        path = plan_path(store.root, mf.path)
        if mf.from_offset > end:
            actions.append(("delete", path, mf.size))
            if store.commitlog.file_end(mf).data_end:
                notes.append(f"{path} holds records the broker discards ({stop.reason}); backed up")
        elif end < mf.from_offset + mf.size:
            pos = end - mf.from_offset
            buf = mf.map()
            if first_nonzero(buf, pos, len(buf), mf.path) is not None:
                actions.append(("truncate", path, pos))
                notes.append(
                    f"the CommitLog ends at offset {end} ({stop.reason}); the {len(buf) - pos} bytes "
                    f"after it in {mf.name} are zeroed, as the broker abandons them (they are backed up)"
                )


def _plan_staged(store: Store, result: RecoverResult) -> None:
    steps = result.plan.steps
    for fill in result.fills:
        what = "a BLANK record" if fill.ends_file else f"{len(fill.tombstones)} tombstone(s)"
        detail = f"bytes {fill.file_position}..{fill.file_position + fill.length} replaced by {what}"
        steps.append(PlanStep("salvage", plan_path(store.root, fill.mf.path), detail, fill.length))
    for action, rel, size in result.actions:
        if action == "delete":
            steps.append(PlanStep("delete", rel, f"{size} bytes", size))
        else:
            mf_size = (store.root / rel).stat().st_size
            steps.append(
                PlanStep("truncate", rel, f"valid up to byte {size}; the rest zeroed", mf_size - size)
            )
    for rel in (CONSUMEQUEUE_DIR, INDEX_DIR):
        if not same_tree(store.root / rel, result.staged / rel):
            steps.append(PlanStep("replace-dir", rel, "recovered and re-dispatched"))
    old = store.checkpoint_path.read_bytes() if store.checkpoint_path.exists() else b""
    if old != result.checkpoint.to_bytes():
        steps.append(
            PlanStep(
                "replace",
                CHECKPOINT_FILE,
                f"logicsMsgTimestamp={result.checkpoint.logics_msg_timestamp} "
                f"indexMsgTimestamp={result.checkpoint.index_msg_timestamp}",
            )
        )
    if store.abort_exists:
        steps.append(PlanStep("delete", ABORT_FILE, "the store is consistent again"))


def apply_recover(
    store_root: Path, result: RecoverResult, argv: list[str] | None = None, *, force_unlocked: bool = False
) -> Path:
    """Apply a staged recovery through one ``Change``; returns the backup directory."""
    roots = result.plan.roots
    fills = iter(result.fills)
    with Change(store_root, "recover", argv, roots=roots, force_unlocked=force_unlocked) as change:
        for step in result.plan.steps:
            if step.action == "salvage":
                fill = next(fills)
                change.write_range(step.path, fill.file_position, fill.data)
            elif change.apply_file_step(step, result.staged):
                continue
            elif step.action == "replace":
                change.replace_file(step.path, result.checkpoint.to_bytes())
        backup = change.commit()
    shutil.rmtree(result.staged, ignore_errors=True)
    return backup


def discard(result: RecoverResult) -> None:
    shutil.rmtree(result.staged, ignore_errors=True)
