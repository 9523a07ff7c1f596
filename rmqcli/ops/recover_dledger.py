"""``rmq recover`` on a DLedger CommitLog store: what a 4.9.8 broker in DLedger mode does at start, offline.

``DLedgerCommitLog.recoverNormally`` and ``recoverAbnormally`` are one method (``recover``), so
``--normal`` and ``--abnormal`` plan the same thing:

1. ``DLedgerMmapFileStore.recover`` (DLedger 0.3.1.2): the walk of ``rmqcli.ops.dledger_walk``;
   the data and the entry index are cut where it stopped and index units that disagree with the
   data are written again (``rmqcli.ops.dledger_cut``); the checkpoint's endIndex follows and
   committedIndex is capped at it.
2. ``DefaultMessageStore.truncateDirtyLogicFiles(processOffset)``: consume-queue units at or past
   the new end go.
3. The reput the broker runs before it serves (``ReputMessageService`` from the queues' largest
   physical offset, up to ``committedPos``, the end of the committed entry): the committed entries
   the queues lack are dispatched to the consume queues and the index; an entry whose message fails
   is skipped as the reput skips it. Index files that reach the place the dispatch starts from are
   indexed again from the entries (``rmq truncate``'s way); the checkpoint's timestamps follow.
4. ``abort`` is removed, as after a clean shutdown.

Like the broker, recovery checks entry headers only: a sound entry whose message is torn is kept
(``rmq verify`` reports it); the reput skips it.

A store switched to DLedger mode keeps its old ``commitlog/`` below ``dividedCommitlogOffset`` (the
first data file's start). Once the data files exist, ``DLedgerCommitLog.recover`` recovers the
entries alone and leaves the old files as they are: so does this (the reput dispatches old records
the queues lack, as the broker's ``getData`` serves them from the old CommitLog). A store whose
``dledger-<selfId>/`` has no data file yet, the state before the first start in DLedger mode, is
refused: that start recovers the old CommitLog (``rmq recover`` without the DLedger broker.conf)
and writes the blank that ends it, a broker's job.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from formats import dledger as dfmt
from rmqcli.errors import UsageError
from rmqcli.ops.dledger_cut import DLedgerCut, committed_index, plan_cut
from rmqcli.ops.dledger_walk import Walk, walk
from rmqcli.ops.rebuild import STAGING_NAME, RebuildResult, stage_rebuild
from rmqcli.ops.safety import Change, PlanStep, outside_roots, plan_path
from rmqcli.store import Store
from rmqcli.store.checkpoint import Checkpoint
from rmqcli.store.read.commitlog import Corruption
from rmqcli.store.read.dledger import DLedgerCommitLog
from rmqcli.store.store import ABORT_FILE, CHECKPOINT_FILE

__all__ = ["STAGING_NAME", "DLedgerRecoverResult", "apply", "dispatch_start", "stage"]


@dataclass
class DLedgerRecoverResult:
    walk: Walk
    committed: int  # the committed index after recovery (-1: none)
    reput_from: int  # where the reput starts (a physical offset)
    reput_until: int  # committedPos: where it ends
    staged: RebuildResult
    cut: DLedgerCut

    @property
    def plan(self):
        return self.staged.plan

    def to_dict(self) -> dict:
        return {
            "end": self.walk.end,
            "lastIndex": self.walk.last_index,
            "lastTerm": self.walk.last_term,
            "committedIndex": self.committed,
            "reputFrom": self.reput_from,
            "reputUntil": self.reput_until,
            "plan": self.plan.to_dict(),
        }


def dispatch_start(store: Store, end: int) -> int:
    """Where the reput starts: the largest physical offset the consume queues reach (offset + size
    of a queue's last unit; ``DefaultMessageStore.start``), the log's minimum without units, and
    never past ``end`` (units past it are cut first)."""
    start = store.commitlog.min_offset
    for topic, queue_id in store.queue_ids():
        cq = store.consume_queue(topic, queue_id)
        last = cq.max_offset - 1
        if last >= cq.min_logic_offset:
            unit = cq.unit(last)
            start = max(start, unit.commitlog_offset + unit.size)
    return min(start, end)


def stage(store: Store) -> DLedgerRecoverResult:
    """Walk, plan the cut of the log and stage the queues and index the broker's start leaves."""
    log = store.commitlog
    assert isinstance(log, DLedgerCommitLog)
    if log.old is not None and not log.data_files:
        raise UsageError(
            f"{log.home / dfmt.DATA_DIR}: no data file below a store's old commitlog/: the first start in "
            "DLedger mode divides the log (a broker's job); recover the old CommitLog without the DLedger "
            "broker.conf first"
        )
    found = walk(log)
    stored = committed_index(store)
    committed = min(stored if stored is not None else -1, found.last_index)
    until = _committed_pos(found, committed, log)
    reput_from = dispatch_start(store, found.end)
    # units at or past reput_from (so those past the new end: truncateDirtyLogicFiles) go, the
    # committed entries after it are dispatched
    staged = stage_rebuild(store, from_offset=reput_from, until=max(until, reput_from))
    cut = plan_cut(store, found.end, found.last_index, found.units)
    data = {plan_path(store.root, mf.path) for mf in log.files}
    _keep_timestamps(store, staged, found, cutting=any(st.path in data for st in cut.steps))
    staged.plan.command = "recover"
    staged.plan.roots = outside_roots(store.root, [log.home, *(mf.path.parent for mf in log.files)])
    staged.plan.steps[:0] = cut.steps
    if store.abort_path.exists():
        staged.plan.steps.append(PlanStep("delete", ABORT_FILE, "as after a clean shutdown", 0))
    if not staged.plan.steps:
        staged.plan.notes.append("nothing to recover: the log, its index and the queues agree")
    _notes(staged, found, committed, reput_from, until)
    _note_torn(log, found, staged)
    staged.plan.details = {
        "end": found.end,
        "lastIndex": found.last_index,
        "lastTerm": found.last_term,
        "committedIndex": committed,
    }
    return DLedgerRecoverResult(found, committed, reput_from, until, staged, cut)


def _committed_pos(found: Walk, committed: int, log: DLedgerCommitLog) -> int:
    """``committedPos``: the end of the committed entry (where the entries start with none)."""
    if committed < 0:
        return log.divided if log.old is not None else log.min_offset
    if committed in found.positions:
        pos, size = found.positions[committed]
        return pos + size
    # the committed entry lies before the file the walk started at: its unit says where it ends
    unit = log.index_queue.find(committed * dfmt.INDEX_UNIT_SIZE)
    buf = unit.map()
    at = committed * dfmt.INDEX_UNIT_SIZE - unit.from_offset
    _, pos, size, _, _ = dfmt.INDEX_UNIT_STRUCT.unpack_from(buf, at)
    return pos + size


def _keep_timestamps(store: Store, staged: RebuildResult, found: Walk, *, cutting: bool) -> None:
    """The checkpoint's timestamps: the reput's when it dispatched records, else the old ones; when
    the data is ``cutting``, none after the last entry kept (``rmq truncate``'s cap)."""
    old = store.checkpoint() if store.checkpoint_path.exists() else None
    if old is None:
        return
    cp = staged.checkpoint if staged.records else old
    last_ts = _last_store_timestamp(store, found) if cutting else None
    if last_ts is not None:
        cp = Checkpoint(
            min(cp.physic_msg_timestamp, last_ts),
            min(cp.logics_msg_timestamp, last_ts),
            min(cp.index_msg_timestamp, last_ts),
            cp.master_flushed_offset,
            cp.confirm_phy_offset,
        )
    staged.checkpoint = cp
    staged.plan.steps[:] = [s for s in staged.plan.steps if s.path != CHECKPOINT_FILE]
    if cp.to_bytes() != store.checkpoint_path.read_bytes():
        detail = f"timestamps up to the last entry kept: logicsMsgTimestamp={cp.logics_msg_timestamp}"
        staged.plan.steps.append(PlanStep("replace", CHECKPOINT_FILE, detail))


def _last_store_timestamp(store: Store, found: Walk) -> int | None:
    """The store time of the last kept entry's message that reads (``None``: no such entry)."""
    for index in sorted(found.positions, reverse=True):
        ts = store.commitlog.store_timestamp(found.positions[index][0] + dfmt.BODY_OFFSET)
        if ts is not None:
            return ts
    return None


def _notes(staged: RebuildResult, found: Walk, committed: int, reput_from: int, until: int) -> None:
    notes = staged.plan.notes
    if found.stop is not None and not found.stop[2].startswith("size 0"):  # size 0: the data's end
        file, at, why = found.stop
        notes.append(
            f"the entry walk stops in {Path(file).name} at byte {at} ({why}): the log ends at offset "
            f"{found.end}, its last entry is index {found.last_index} (term {found.last_term})"
        )
    if found.rewrite_from is not None:
        notes.append(
            f"the index unit of entry {found.rewrite_from} disagrees with the data: units from there "
            f"are written again ({len(found.units)} differ)"
        )
    if until > reput_from:
        notes.append(
            f"the reput dispatches the committed entries (up to index {committed}) from offset "
            f"{reput_from} to {until}"
        )


def _note_torn(log: DLedgerCommitLog, found: Walk, staged: RebuildResult) -> None:
    """Kept entries whose message fails: the broker keeps them too; say how to cut them."""
    if not found.positions:
        return
    first = min(found.positions)
    for item in log.records(found.positions[first][0] + dfmt.BODY_OFFSET, skip_corrupt=True):
        if (
            isinstance(item, Corruption)
            and item.kind == "bad-record"
            and item.position - dfmt.BODY_OFFSET < found.end
        ):
            staged.plan.notes.append(
                f"{Path(item.file).name} at byte {item.file_position}: {item.reason}; a broker keeps "
                "this entry too (its reput skips it, consumers of its queue stop there): "
                f"`rmq truncate --offset {item.position}` cuts the log before it"
            )


def apply(store_root: Path, result: DLedgerRecoverResult, argv: list[str] | None = None, *,
          force_unlocked: bool = False) -> Path:  # fmt: skip
    """Apply a staged recovery through one ``Change``; returns the backup directory."""
    staged = result.staged
    with Change(
        store_root, "recover", argv, roots=staged.plan.roots, force_unlocked=force_unlocked
    ) as change:
        apply_steps(change, store_root, staged, result.cut)
        backup = change.commit()
    shutil.rmtree(staged.staged, ignore_errors=True)
    return backup


def apply_steps(change: Change, store_root: Path, staged: RebuildResult, cut: DLedgerCut) -> None:
    """The steps of a DLedger cut and of the staged rebuild, in plan order."""
    for step in staged.plan.steps:
        if cut.apply(change, step) or change.apply_file_step(step, staged.staged):
            continue
        if step.action == "replace" and step.path == CHECKPOINT_FILE:
            change.replace_file(step.path, staged.checkpoint.to_bytes())


def discard(result: DLedgerRecoverResult) -> None:
    shutil.rmtree(result.staged.staged, ignore_errors=True)
