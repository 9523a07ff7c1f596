"""Cut the CommitLog at a record boundary and make the queues, index and checkpoint agree.

The cut is the first record at or after ``--offset``, or the first record stored after
``--time``. As ``MappedFileQueue.truncateDirtyFiles`` does, files after the cut are deleted and
the file holding it keeps its size (``rmq`` zeroes the bytes after the cut, the broker would
leave them). Consume-queue units at or past the cut go (``truncateDirtyLogicFiles``); index files
that reach the cut are rebuilt from the records before it; the checkpoint's timestamps are capped
at the last record kept.

Committed offsets. A consumer offset (``config/consumerOffset.json``) or a delay-level offset
(``config/delayOffset.json``, queue ``level-1`` of ``SCHEDULE_TOPIC_XXXX``) past a queue's new end
is listed in the plan; ``clamp_offsets`` sets it to that end (the file is backed up and replaced).
A 4.9.8 broker moves such a consumer offset to the end only when the group pulls while the queue
is still shorter (``OFFSET_OVERFLOW_BADLY``, ``PULL_OFFSET_MOVED``); once new messages reach past
it, the group skips those below it. Its schedule service moves a delay offset past the end to the
end ("schedule CQ offset invalid").

A store already cut there (no record at or after ``--offset``, none stored after ``--time``) has
converged: the plan is empty, or holds only the offsets to clamp, so a re-run exits 0.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from formats import commitlog as fmt
from formats import fastjson
from rmqcli.errors import CorruptDataError, UnsafeNameError, UsageError
from rmqcli.ops.dledger_cut import DLedgerCut, plan_cut
from rmqcli.ops.rebuild import STAGING_NAME, RebuildResult, stage_rebuild
from rmqcli.ops.safety import Change, Plan, PlanStep, outside_roots, plan_path, staging_dir
from rmqcli.store import Store
from rmqcli.store.checkpoint import Checkpoint
from rmqcli.store.configfiles import DELAY, OFFSETS, load_config, parse_consumer_offsets, parse_delay_offsets
from rmqcli.store.naming import CONSUMEQUEUE_DIR, consume_queue_dir
from rmqcli.store.read.commitlog import Record
from rmqcli.store.read.consumequeue import ConsumeQueue
from rmqcli.store.read.dledger import DLedgerCommitLog
from rmqcli.store.store import CHECKPOINT_FILE, CONFIG_DIR

LISTED = 20  # offsets named one by one in the plan; the rest are counted


@dataclass
class PastEnd:
    """A committed offset that lies past its queue's end."""

    file: str  # store-relative config file
    owner: str  # ``topic@group``, or ``delay level N``
    topic: str
    queue_id: int
    offset: int
    end: int  # the queue's (new) maxOffset


@dataclass
class TruncateResult:
    cut: int | None  # None: nothing left to cut (the store is already cut there)
    records_removed: int
    staged: RebuildResult
    past_end: list[PastEnd] = field(default_factory=list)
    configs: dict[str, bytes] = field(default_factory=dict)  # --clamp-offsets: new config files
    dledger: DLedgerCut | None = None  # a DLedger log's cut: data, entry index, its checkpoint

    @property
    def plan(self):
        return self.staged.plan

    def to_dict(self) -> dict:
        return {
            "cut": self.cut,
            "recordsRemoved": self.records_removed,
            "offsetsPastEnd": [
                {"file": p.file, "owner": p.owner, "queueId": p.queue_id, "offset": p.offset, "end": p.end}
                for p in self.past_end
            ],
            "plan": self.plan.to_dict(),
        }


def find_cut(
    store: Store, *, offset: int | None = None, time_ms: int | None = None
) -> tuple[int | None, int]:
    """(cut offset, store timestamp of the last record kept) for ``--offset`` or ``--time``; the cut
    is None when no record lies at or after that point (already cut, or never reached)."""
    if (offset is None) == (time_ms is None):
        raise UsageError("give exactly one of --offset and --time")
    last_kept_ts = 0
    for rec in store.commitlog.records(skip_corrupt=True):  # damage is what one cuts away
        if not isinstance(rec, Record):
            continue
        if (offset is not None and rec.position >= offset) or (
            time_ms is not None and rec.store_timestamp > time_ms
        ):
            return rec.position, last_kept_ts
        last_kept_ts = rec.store_timestamp
    return None, last_kept_ts


def stage_truncate(
    store: Store, *, offset: int | None = None, time_ms: int | None = None, clamp_offsets: bool = False
) -> TruncateResult:
    cut, last_ts = find_cut(store, offset=offset, time_ms=time_ms)
    if cut is None:
        result = _converged(store, offset, time_ms)
    else:
        result = _stage_cut(store, cut, last_ts)
    cq_root = result.staged.staged if (result.staged.staged / CONSUMEQUEUE_DIR).is_dir() else store.root
    _plan_offsets(store, result, cq_root, clamp_offsets)
    return result


def _converged(store: Store, offset: int | None, time_ms: int | None) -> TruncateResult:
    """The plan of a truncate with nothing left to cut: no CommitLog step."""
    end = store.commitlog.max_offset()
    if offset is not None:
        where = f"no record starts at or after --offset {offset}"
    else:
        where = f"no record was stored after --time {time_ms} (epoch ms)"
    note = f"already cut: {where}; the CommitLog ends at offset {end}"
    staged = RebuildResult(Plan("truncate", store.root, [], [note]), staging_dir(store.root, STAGING_NAME))
    return TruncateResult(None, 0, staged)


def _stage_cut(store: Store, cut: int, last_ts: int) -> TruncateResult:
    removed = sum(1 for r in store.commitlog.records(cut, skip_corrupt=True) if isinstance(r, Record))
    log = store.commitlog
    # a DLedger entry starts BODY_OFFSET bytes before its record: the dispatch ends there
    until = log.entry_of(cut).pos if isinstance(log, DLedgerCommitLog) else cut
    staged = stage_rebuild(store, from_offset=cut, until=until)
    old = store.checkpoint() if store.checkpoint_path.exists() else Checkpoint()
    staged.checkpoint = Checkpoint(
        min(old.physic_msg_timestamp, last_ts),
        min(old.logics_msg_timestamp, last_ts),
        min(staged.checkpoint.index_msg_timestamp, last_ts),
        old.master_flushed_offset,
        old.confirm_phy_offset,
    )
    steps = staged.plan.steps
    steps[:] = [s for s in steps if s.path != CHECKPOINT_FILE]
    dledger = None
    if isinstance(log, DLedgerCommitLog):
        dledger = _dledger_cut(store, log, cut, staged)
    else:
        _cut_commitlog(store, cut, staged)
    steps.append(
        PlanStep(
            "replace",
            CHECKPOINT_FILE,
            f"timestamps capped at the last record kept ({last_ts})",
        )
    )
    staged.plan.command = "truncate"
    staged.plan.notes.append(f"{removed} records at and after offset {cut} are removed (they are backed up)")
    return TruncateResult(cut, removed, staged, dledger=dledger)


def _dledger_cut(store: Store, log: DLedgerCommitLog, cut: int, staged: RebuildResult) -> DLedgerCut:
    """A DLedger log is cut before the entry of the record at ``cut`` (``rmqcli.ops.dledger_cut``)."""
    entry = log.entry_of(cut)
    dcut = plan_cut(store, entry.pos, entry.index - 1)
    staged.plan.steps[:0] = dcut.steps
    staged.plan.roots = outside_roots(store.root, [log.home, *(mf.path.parent for mf in log.files)])
    staged.plan.notes.append(f"the log ends before entry {entry.index} (at offset {entry.pos})")
    return dcut


def _cut_commitlog(store: Store, cut: int, staged: RebuildResult) -> None:
    """The CommitLog files' steps of a cut at ``cut``."""
    steps = staged.plan.steps
    staged.plan.roots = outside_roots(store.root, store.commitlog_dirs)
    for mf in store.commitlog.files:
        rel = plan_path(store.root, mf.path)  # absolute when storePathCommitLog puts it elsewhere
        if mf.from_offset > cut or (mf.from_offset == cut and mf is not store.commitlog.files[0]):
            steps.insert(0, PlanStep("delete", rel, f"{mf.size} bytes after the cut", mf.size))
        elif cut < mf.from_offset + mf.size:
            pos = cut - mf.from_offset
            steps.insert(0, PlanStep("truncate", rel, f"cut at byte {pos}; the rest zeroed", mf.size - pos))


def offsets_past_end(store: Store, cq_root: Path) -> tuple[list[PastEnd], dict[str, dict], list[str]]:
    """Committed consumer and delay offsets past the ends of the queues under ``cq_root``.

    Returns them, the loaded config documents by store-relative path, and notes on files that
    cannot be read (their offsets are not checked).
    """
    given = store.settings
    size = (
        given.mapped_file_size_consume_queue if "mapped_file_size_consume_queue" in given.explicit else None
    )
    ends: dict[tuple[str, int], int] = {}

    def end_of(topic: str, queue_id: int) -> int:
        if (topic, queue_id) not in ends:
            try:
                directory = consume_queue_dir(cq_root, topic, queue_id)
            except UnsafeNameError:  # a name that cannot be a queue directory has no queue
                ends[(topic, queue_id)] = 0
            else:
                cq = ConsumeQueue(topic, queue_id, directory, size)
                ends[(topic, queue_id)] = cq.max_offset
                cq.close()
        return ends[(topic, queue_id)]

    found: list[PastEnd] = []
    docs: dict[str, dict] = {}
    notes: list[str] = []
    for name in (OFFSETS, DELAY):
        rel = f"{CONFIG_DIR}/{name}"
        try:
            loaded = load_config(store.config_dir, name)
            if name == OFFSETS:
                committed = [
                    (f"{topic}@{group}", topic, q, off)
                    for (topic, group), queues in parse_consumer_offsets(loaded.data, rel).items()
                    for q, off in queues.items()
                ]
            else:
                committed = [
                    (f"delay level {level}", fmt.SCHEDULE_TOPIC, level - 1, off)
                    for level, off in parse_delay_offsets(loaded.data, rel).items()
                ]
        except CorruptDataError as exc:
            notes.append(f"{rel} cannot be read ({exc}): its offsets are not checked")
            continue
        if loaded.source is not None:
            docs[rel] = loaded.data
        for owner, topic, queue_id, off in committed:
            if off > (end := end_of(topic, queue_id)):
                found.append(PastEnd(rel, owner, topic, queue_id, off, end))
    return found, docs, notes


def _plan_offsets(store: Store, result: TruncateResult, cq_root: Path, clamp: bool) -> None:
    """List the committed offsets past the queue ends; with ``clamp``, plan their clamping."""
    found, docs, notes = offsets_past_end(store, cq_root)
    plan = result.plan
    plan.notes += notes
    result.past_end = found
    if not found:
        return
    for p in found[:LISTED]:
        plan.notes.append(
            f"{p.file}: {p.owner}, {p.topic} queue {p.queue_id}: offset {p.offset} lies past the queue's "
            f"end {p.end}" + ("; clamped to it" if clamp else "")
        )
    if len(found) > LISTED:
        plan.notes.append(f"... and {len(found) - LISTED} more committed offset(s) past their queue's end")
    if not clamp:
        plan.notes.append(
            "a group would skip the messages later sent to such a queue up to its offset (a broker moves "
            "the offset to the end only when the group pulls while the queue is still shorter): re-run "
            "with --clamp-offsets to set each to its queue's end (the files are backed up)"
        )
        return
    for rel, data in docs.items():
        hits = [p for p in found if p.file == rel]
        if not hits:
            continue
        table = data["offsetTable"]
        for p in hits:
            if rel.endswith(OFFSETS):
                queues = next(v for k, v in table.items() if str(k) == p.owner)
                key = next(k for k in queues if int(k) == p.queue_id)
                queues[key] = p.end
            else:
                key = next(k for k in table if int(k) == p.queue_id + 1)
                table[key] = p.end
        result.configs[rel] = fastjson.dumps(data, pretty=True).encode("utf-8")
        plan.steps.append(
            PlanStep("replace", rel, f"{len(hits)} committed offset(s) clamped to their queue's end")
        )


def apply_truncate(
    store_root: Path, result: TruncateResult, argv: list[str] | None = None, *, force_unlocked: bool = False
) -> Path:
    """Apply a staged truncation through one ``Change``; returns the backup directory."""
    staged = result.staged
    roots = staged.plan.roots
    with Change(store_root, "truncate", argv, roots=roots, force_unlocked=force_unlocked) as change:
        for step in staged.plan.steps:
            if result.dledger is not None and result.dledger.apply(change, step):
                continue
            if change.apply_file_step(step, staged.staged):
                continue
            if step.action == "replace" and step.path in result.configs:
                change.replace_file(step.path, result.configs[step.path])
            elif step.action == "replace":
                change.replace_file(step.path, staged.checkpoint.to_bytes())
        backup = change.commit()
    shutil.rmtree(staged.staged, ignore_errors=True)
    return backup
