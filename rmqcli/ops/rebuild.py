"""Rebuild consume queues and index files from the CommitLog, as the broker's dispatch would.

Every record is dispatched as ``ReputMessageService`` does (``rmqcli.store.write.dispatch``, formats.md
§7) into a staging directory inside the store; applying the result swaps the staged
directories in (``rmqcli.ops.safety``) and updates the checkpoint's logics/index timestamps.

Where the result can differ from the files a broker wrote, by design:

- index file names: a broker names a file by the wall-clock time it creates it; a rebuild
  names it by the local time of the store timestamp of the first record indexed in it, so that
  a rebuild is reproducible (the entries and headers are the broker's);
- a queue whose oldest records were deleted with their CommitLog files: the broker's first
  consume-queue file still holds units for them; a rebuild cannot, and writes the filler units
  a broker writes for a queue that starts past its file's first unit (``fillPreBlank``);
- a record whose topic cannot name a directory under ``consumequeue/`` (``..``, a ``/``, ...): a
  broker would write its queue outside the store; a rebuild writes none and notes the records
  in the plan (``rmqcli.ops.unsafe_topics``).
"""

from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from formats import indexfile as ifmt
from formats.consumequeue import CQ_UNIT_SIZE
from rmqcli.errors import CorruptDataError, UsageError
from rmqcli.ops import unsafe_topics
from rmqcli.ops.reput import reput_records
from rmqcli.ops.safety import Change, Plan, PlanStep, staging_dir
from rmqcli.remoting.javanames import camel_fields
from rmqcli.store import Store
from rmqcli.store.checkpoint import Checkpoint
from rmqcli.store.naming import index_file_name, is_index_name, topic_dir, topic_dir_problem
from rmqcli.store.read.index import IndexFile
from rmqcli.store.scan.fastdispatch import FastDispatcher, dispatch_commitlog
from rmqcli.store.settings import DEFAULT_COMMITLOG_FILE_SIZE, StoreSettings
from rmqcli.store.sparse import copy_sparse, same_tree
from rmqcli.store.store import CHECKPOINT_FILE, CONSUMEQUEUE_DIR, INDEX_DIR
from rmqcli.store.write.dispatch import Dispatcher, UnsafeTopic

STAGING_NAME = "rebuild"
D = TypeVar("D", Dispatcher, FastDispatcher)


@dataclass
class IndexScan:
    """The store's index files in name order (the order ``IndexService.load`` reads them), each
    sound (an ``IndexFile``) or damaged (why), and the geometry read off them or given."""

    entries: list[tuple[Path, IndexFile | None, str | None]] = field(default_factory=list)
    geometry: tuple[int, int] | None = None  # (maxHashSlotNum, maxIndexNum); None: no file, none given

    @property
    def files(self) -> list[IndexFile]:
        return [f for _, f, _ in self.entries if f is not None]

    @property
    def damaged(self) -> list[tuple[Path, str]]:
        return [(p, why) for p, f, why in self.entries if f is None and why is not None]

    def close(self) -> None:
        for f in self.files:
            f.close()


@dataclass(frozen=True)
class Scope:
    """What a rebuild rebuilds: consume queues (``--cq``, of one ``--topic`` or all), the index
    (``--index``), or both."""

    consume_queues: bool = True
    index: bool = True
    topic: str | None = None

    def check(self) -> None:
        """The option checks of a rebuild (``rmq rebuild``, ``rmq pipeline rebuild``)."""
        if self.topic is not None and self.index:
            raise UsageError(
                "--topic rebuilds consume queues only (the index is shared by all topics); add --cq"
            )
        if not self.consume_queues and not self.index:
            raise UsageError("nothing to rebuild: give --cq and/or --index")
        problem = topic_dir_problem(self.topic) if self.topic is not None else None
        if problem is not None:
            raise UsageError(f"--topic {self.topic!r}: {problem}; no consume queue can have that name")

    def dispatcher(self, kind: type[D], staged: Path, settings: StoreSettings) -> D:
        """A ``Dispatcher`` or ``FastDispatcher`` writing this scope into ``staged``."""
        return kind(
            staged,
            settings,
            rebuild_namer,
            consume_queues=self.consume_queues,
            index=self.index,
            topic=self.topic,
        )


@dataclass
class RebuildResult:
    """A staged rebuild: what it produced and the plan to put it in place."""

    plan: Plan
    staged: Path
    records: int = 0
    queues: int = 0
    units: int = 0
    index_files: int = 0
    index_entries: int = 0
    checkpoint: Checkpoint = field(default_factory=Checkpoint)
    replaced: list[str] = field(default_factory=list)  # store-relative dirs swapped in
    unsafe: dict[str, UnsafeTopic] = field(default_factory=dict)  # topics whose records got no queue
    index_scan: IndexScan = field(default_factory=IndexScan)  # the store's index files, as found
    scope: Scope = field(default_factory=Scope)  # what was rebuilt

    def take_counts(self, dispatcher: FastDispatcher) -> None:
        """What a bulk dispatch (``fastdispatch``) wrote: records, queues, units, index files and
        entries, and the topics whose records went to no queue."""
        self.records = dispatcher.records
        self.queues = len(dispatcher.queues)
        self.units = dispatcher.units
        self.index_files = len(dispatcher.index_files)
        self.index_entries = dispatcher.index_entries
        self.unsafe = dispatcher.unsafe

    def to_dict(self) -> dict:
        return {
            **camel_fields(self, "records", "queues", "units", "index_files", "index_entries"),
            "plan": self.plan.to_dict(),
        }


def scan_index(store: Store) -> IndexScan:
    """Open the index files a repair may keep; a file whose size is not the geometry's is damaged.

    ``IndexService.load`` (4.9.8) maps every file READ_WRITE at the configured size: a short file is
    extended with zeros (its entries past the cut are lost), a long one is read in part; the broker
    starts either way. A repair replaces such a file instead (``rmq recover``, ``rmq rebuild``). The
    geometry is the broker.conf's when given, else the size most files share (``CorruptDataError``
    when that size has no 1:4 geometry, or when every file disagrees with the given one alike).
    """
    directory = store.index_dir
    names = sorted(p.name for p in directory.iterdir() if is_index_name(p.name)) if directory.is_dir() else []
    paths = [directory / n for n in names if (directory / n).is_file()]
    sizes = {p: p.stat().st_size for p in paths}
    scan = IndexScan(geometry=_index_geometry(store.settings, sizes))
    if scan.geometry is None:
        return scan
    expected = ifmt.file_size(*scan.geometry)
    slots, num = scan.geometry
    for path in paths:
        size = sizes[path]
        if size == expected:
            scan.entries.append((path, IndexFile(path, slots, num), None))
            continue
        lost = "its entries past that size are lost" if size < expected else f"it reads only {expected} bytes"
        scan.entries.append(
            (
                path,
                None,
                f"index file {path.name} is {size} bytes, not the {expected} of {slots} slots and {num} "
                f"entries: damaged (a broker maps it at {expected} bytes; {lost})",
            )
        )
    return scan


def _index_geometry(settings: StoreSettings, sizes: dict[Path, int]) -> tuple[int, int] | None:
    """(slots, entries) of the store's index files: the given ones, else read off the usual size."""
    given = {"max_hash_slot_num", "max_index_num"} & settings.explicit
    counts = Counter(sizes.values())
    if given:
        geometry = (settings.max_hash_slot_num, settings.max_index_num)
        expected = ifmt.file_size(*geometry)
        if len(counts) == 1 and expected not in counts and sum(counts.values()) > 1:
            (size,) = counts
            raise CorruptDataError(
                f"every index file is {size} bytes; {geometry[0]} slots and {geometry[1]} entries "
                f"(maxHashSlotNum/maxIndexNum) need {expected}: is --config the broker.conf of this store?",
                str(next(iter(sizes))),
            )
        return geometry
    if not counts:
        return None
    usual = max(counts, key=lambda n: (counts[n], ifmt.geometry_from_size(n) is not None, n))
    geometry = ifmt.geometry_from_size(usual)
    if geometry is None:
        path = next(p for p, n in sizes.items() if n == usual)
        raise CorruptDataError(
            f"a {usual}-byte index file does not have the default 1:4 slots to entries; if the broker "
            "used other maxHashSlotNum/maxIndexNum, pass them with --config",
            str(path),
        )
    return geometry


def repair_settings(store: Store, scan: IndexScan) -> StoreSettings:
    """``Store.effective_settings`` for a repair: the index geometry is ``scan``'s, which tolerates
    damaged index files (``Store.index`` refuses them)."""
    if not scan.damaged:
        return store.effective_settings()
    settings = store.settings
    changes: dict[str, int] = {}
    if "mapped_file_size_commitlog" not in settings.explicit and store.commitlog.file_size:
        changes["mapped_file_size_commitlog"] = store.commitlog.file_size
    if scan.geometry is not None and not {"max_hash_slot_num", "max_index_num"} & settings.explicit:
        changes["max_hash_slot_num"], changes["max_index_num"] = scan.geometry
    cq_sizes = {f.size for t, q in store.queue_ids() for f in store.consume_queue(t, q).files}
    if "mapped_file_size_consume_queue" not in settings.explicit and cq_sizes:
        changes["mapped_file_size_consume_queue"] = max(cq_sizes)
    return replace(settings, **changes)


def rebuild_namer(store_timestamp: int) -> str:
    """Index file names for a rebuild: the local time of the record that opens the file."""
    return index_file_name(store_timestamp)


def stage_rebuild(
    store: Store,
    *,
    consume_queues: bool = True,
    index: bool = True,
    topic: str | None = None,
    from_offset: int | None = None,
    until: int | None = None,
) -> RebuildResult:
    """Dispatch the CommitLog into ``STORE/.rmq-staging/rebuild`` and plan the swap.

    ``from_offset``: keep units and index files below it and dispatch from there on.
    ``until``: dispatch only records that start before it (a CommitLog about to be cut there).
    """
    scope = Scope(consume_queues, index, topic)
    scope.check()
    scan = scan_index(store)
    settings = repair_settings(store, scan)
    staged = staging_dir(store.root, STAGING_NAME)
    start = store.commitlog.min_offset
    notes = size_notes(store, settings, consume_queues, index, scan)
    if index:
        notes += [f"{why}; the index is rebuilt" for _, why in scan.damaged]
    result = RebuildResult(Plan("rebuild", store.root, [], notes), staged, index_scan=scan, scope=scope)
    old = store.checkpoint() if store.checkpoint_path.exists() else Checkpoint()
    seeded = from_offset is not None and from_offset > start
    bulk = not seeded and until is None and FastDispatcher.supports(settings)
    stamps = _dispatch_in_bulk(store, settings, result, start) if bulk else None
    if stamps is not None:
        logics, index_ts = stamps
    else:
        logics, index_ts = _dispatch_each(store, settings, result, start, from_offset, until)
    result.checkpoint = rebuilt_checkpoint(old, logics, index_ts, scope)
    finish_plan(store, result)
    scan.close()
    return result


def rebuilt_checkpoint(old: Checkpoint, logics: int, index_ts: int, scope: Scope) -> Checkpoint:
    """The checkpoint after a rebuild: the logics timestamp follows rebuilt queues (all of them),
    the index timestamp a rebuilt index (``logics``, ``index_ts``: the dispatch's)."""
    return Checkpoint(
        old.physic_msg_timestamp,
        logics if scope.consume_queues and scope.topic is None else old.logics_msg_timestamp,
        index_ts if scope.index else old.index_msg_timestamp,
        old.master_flushed_offset,
        old.confirm_phy_offset,
    )


def check_options(consume_queues: bool, index: bool, topic: str | None) -> None:
    """The option checks of a rebuild (``Scope.check``)."""
    Scope(consume_queues, index, topic).check()


def finish_plan(store: Store, result: RebuildResult) -> None:
    """The plan's steps, and its notes on records that went to no queue."""
    plan_steps(store, result)
    unsafe_topics.report(result.plan, store, result.unsafe)


def _dispatch_in_bulk(
    store: Store, settings: StoreSettings, result: RebuildResult, start: int
) -> tuple[int, int] | None:
    """A fresh rebuild of whole queues and index: whole files of records at a time (``fastdispatch``).

    Sets the counts and returns the logics and index checkpoint timestamps. A CommitLog that is
    not valid throughout gives None and an empty staging directory: the record by record path
    then skips what a broker's reput skips.
    """
    dispatcher = result.scope.dispatcher(FastDispatcher, result.staged, settings)
    try:
        error = dispatch_commitlog(store.commitlog, dispatcher, start, store.record_offsets())
    finally:
        dispatcher.close()
    if error is not None:
        for sub in (CONSUMEQUEUE_DIR, INDEX_DIR):
            shutil.rmtree(result.staged / sub, ignore_errors=True)
        return None
    result.take_counts(dispatcher)
    return dispatcher.logics_msg_timestamp, dispatcher.completed_end_timestamp


def _dispatch_each(
    store: Store,
    settings: StoreSettings,
    result: RebuildResult,
    start: int,
    from_offset: int | None,
    until: int | None,
) -> tuple[int, int]:
    """Record by record through ``Dispatcher`` (``--from`` seeding, ``--until``)."""
    dispatcher = result.scope.dispatcher(Dispatcher, result.staged, settings)
    if from_offset is not None and from_offset > start:
        start = _seed_from_existing(store, result, dispatcher, from_offset)
    files = store.commitlog.files
    end = until if until is not None else (files[-1].from_offset + files[-1].size if files else 0)
    for rec in reput_records(store, start, end, {}, result.plan.notes):
        if rec.physical_offset >= start:
            dispatcher.dispatch_record(rec)
            result.records += 1
    dispatcher.flush()
    result.queues = len(dispatcher.cqs)
    result.units = sum(cq.max_offset - cq.min_logic_offset // CQ_UNIT_SIZE for cq in dispatcher.cqs.values())
    result.index_files = len(dispatcher.index.files)
    result.index_entries = sum(max(f.index_count - 1, 0) for f in dispatcher.index.files)
    result.unsafe = dispatcher.unsafe
    dispatcher.close()
    return dispatcher.logics_msg_timestamp, dispatcher.index.completed_end_timestamp


def size_notes(
    store: Store, settings: StoreSettings, consume_queues: bool, index: bool, scan: IndexScan | None = None
) -> list[str]:
    """Say which file sizes are defaults: not given (--config) and not read off the store's files.

    A CommitLog of other than 1 GiB files says the broker had a broker.conf: the note says so.
    """
    notes = []
    explicit = settings.explicit
    commitlog_size = store.commitlog.file_size
    hint = (
        f"the CommitLog files are {commitlog_size} bytes, not the default {DEFAULT_COMMITLOG_FILE_SIZE}: "
        "the broker that wrote them had a broker.conf; give it with --config"
        if "mapped_file_size_commitlog" not in explicit
        and commitlog_size
        and commitlog_size != DEFAULT_COMMITLOG_FILE_SIZE
        else ""
    )
    if (
        consume_queues
        and "mapped_file_size_consume_queue" not in explicit
        and not any(store.consume_queue(t, q).files for t, q in store.queue_ids())
    ):
        notes.append(
            f"consume-queue files of {settings.mapped_file_size_consume_queue} bytes assumed (the default "
            "mappedFileSizeConsumeQueue: there are no consume-queue files to read the size from; pass "
            "--config for another size)"
        )
    sound = (scan if scan is not None else scan_index(store)).files
    if index and not {"max_hash_slot_num", "max_index_num"} & explicit and not sound:
        size = ifmt.file_size(settings.max_hash_slot_num, settings.max_index_num)
        notes.append(
            f"index files of {settings.max_hash_slot_num} slots and {settings.max_index_num} entries "
            f"({size} bytes, sparse) assumed (the default maxHashSlotNum/maxIndexNum: there are no index "
            "files to read it from; pass --config for another geometry)"
        )
    if notes and hint:
        notes.append(hint)
    return notes


def _seed_from_existing(store: Store, result: RebuildResult, dispatcher: Dispatcher, from_offset: int) -> int:
    """``--from``: keep what lies before ``from_offset`` and return where dispatch restarts.

    Index files are kept in name order up to the first that reaches ``from_offset`` or is damaged.
    """
    staged, topic = result.staged, result.scope.topic
    start = from_offset
    if result.scope.consume_queues:
        source = topic_dir(store.root, topic) if topic else store.consumequeue_dir
        target = topic_dir(staged, topic) if topic else staged / CONSUMEQUEUE_DIR
        if source.is_dir():
            shutil.copytree(source, target, copy_function=copy_sparse)
    if result.scope.index and store.index_dir.is_dir():
        (staged / INDEX_DIR).mkdir(parents=True, exist_ok=True)
        kept_end = store.commitlog.min_offset  # where the index files kept so far end
        for _, f, _ in result.index_scan.entries:
            if f is not None and f.header.end_phy_offset < from_offset:
                copy_sparse(f.path, staged / INDEX_DIR / f.name)
                kept_end = f.header.end_phy_offset
                continue
            # this file and every later one are re-indexed; a damaged one from where the last kept ends
            begin = f.header.begin_phy_offset if f is not None else kept_end
            start = min(start, max(begin, store.commitlog.min_offset))
            break
    dispatcher.load()
    for cq in dispatcher.cqs.values():
        for path in cq.truncate_dirty(from_offset):
            path.unlink()
    return start


def plan_steps(store: Store, result: RebuildResult) -> None:
    """Swap in what differs from the store (a rebuild of an intact store plans nothing)."""
    steps = result.plan.steps
    consume_queues, index, topic = result.scope.consume_queues, result.scope.index, result.scope.topic
    if consume_queues:
        rel = f"{CONSUMEQUEUE_DIR}/{topic}" if topic else CONSUMEQUEUE_DIR
        if not same_tree(store.root / rel, result.staged / rel):
            before = sum(1 for p in (store.root / rel).rglob("*") if p.is_file())
            detail = (
                f"{result.queues} queues, {result.units} units rebuilt from the CommitLog "
                f"(replacing {before} files)"
            )
            steps.append(PlanStep("replace-dir", rel, detail))
            result.replaced.append(rel)
            (result.staged / rel).mkdir(parents=True, exist_ok=True)  # nothing dispatched: an empty dir
    if index and not same_tree(store.index_dir, result.staged / INDEX_DIR):
        detail = (
            f"{result.index_files} index files, {result.index_entries} entries rebuilt "
            f"(replacing {len(result.index_scan.entries)} files)"
        )
        steps.append(PlanStep("replace-dir", INDEX_DIR, detail))
        result.replaced.append(INDEX_DIR)
        (result.staged / INDEX_DIR).mkdir(parents=True, exist_ok=True)
    old = store.checkpoint_path.read_bytes() if store.checkpoint_path.exists() else b""
    if old != result.checkpoint.to_bytes():
        detail = (
            f"logicsMsgTimestamp={result.checkpoint.logics_msg_timestamp} "
            f"indexMsgTimestamp={result.checkpoint.index_msg_timestamp}"
        )
        steps.append(PlanStep("replace", CHECKPOINT_FILE, detail))


def apply_rebuild(
    store_root: Path, result: RebuildResult, argv: list[str] | None = None, *, force_unlocked: bool = False
) -> Path:
    """Swap the staged directories in and write the checkpoint; returns the backup directory."""
    with Change(store_root, "rebuild", argv, force_unlocked=force_unlocked) as change:
        for rel in result.replaced:
            change.replace_dir(rel, result.staged / rel)
        if any(step.path == CHECKPOINT_FILE for step in result.plan.steps):
            change.replace_file(CHECKPOINT_FILE, result.checkpoint.to_bytes())
        backup = change.commit()
    shutil.rmtree(result.staged, ignore_errors=True)
    return backup


def discard(result: RebuildResult) -> None:
    shutil.rmtree(result.staged, ignore_errors=True)
