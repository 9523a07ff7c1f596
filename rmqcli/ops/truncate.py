"""Cut the CommitLog at a record boundary and make the queues, index and checkpoint agree.

The cut is the first record at or after ``--offset``, or the first record stored after
``--time``. As ``MappedFileQueue.truncateDirtyFiles`` does, files after the cut are deleted and
the file holding it keeps its size (``rmq`` zeroes the bytes after the cut, the broker would
leave them). Consume-queue units at or past the cut go (``truncateDirtyLogicFiles``); index files
that reach the cut are rebuilt from the records before it; the checkpoint's timestamps are capped
at the last record kept.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from rmqcli.errors import NotFoundError, UsageError
from rmqcli.ops.rebuild import RebuildResult, stage_rebuild
from rmqcli.ops.safety import Change, PlanStep, outside_roots, plan_path
from rmqcli.store import Store
from rmqcli.store.checkpoint import Checkpoint
from rmqcli.store.commitlog import Record
from rmqcli.store.store import CHECKPOINT_FILE


@dataclass
class TruncateResult:
    cut: int
    records_removed: int
    staged: RebuildResult

    @property
    def plan(self):
        return self.staged.plan

    def to_dict(self) -> dict:
        return {"cut": self.cut, "recordsRemoved": self.records_removed, "plan": self.plan.to_dict()}


def find_cut(store: Store, *, offset: int | None = None, time_ms: int | None = None) -> tuple[int, int]:
    """(cut offset, store timestamp of the last record kept) for ``--offset`` or ``--time``."""
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
    raise NotFoundError("no record at or after that point: nothing to cut")


def stage_truncate(store: Store, *, offset: int | None = None, time_ms: int | None = None) -> TruncateResult:
    cut, last_ts = find_cut(store, offset=offset, time_ms=time_ms)
    removed = sum(1 for r in store.commitlog.records(cut, skip_corrupt=True) if isinstance(r, Record))
    staged = stage_rebuild(store, from_offset=cut, until=cut)
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
    staged.plan.roots = outside_roots(store.root, store.commitlog_dirs)
    for mf in store.commitlog.files:
        rel = plan_path(store.root, mf.path)  # absolute when storePathCommitLog puts it elsewhere
        if mf.from_offset > cut or (mf.from_offset == cut and mf is not store.commitlog.files[0]):
            steps.insert(0, PlanStep("delete", rel, f"{mf.size} bytes after the cut", mf.size))
        elif cut < mf.from_offset + mf.size:
            pos = cut - mf.from_offset
            steps.insert(0, PlanStep("truncate", rel, f"cut at byte {pos}; the rest zeroed", mf.size - pos))
    steps.append(
        PlanStep(
            "replace",
            CHECKPOINT_FILE,
            f"timestamps capped at the last record kept ({last_ts})",
        )
    )
    staged.plan.command = "truncate"
    staged.plan.notes.append(f"{removed} records at and after offset {cut} are removed (they are backed up)")
    return TruncateResult(cut, removed, staged)


def apply_truncate(
    store_root: Path, result: TruncateResult, argv: list[str] | None = None, *, force_unlocked: bool = False
) -> Path:
    """Apply a staged truncation through one ``Change``; returns the backup directory."""
    staged = result.staged
    roots = staged.plan.roots
    with Change(store_root, "truncate", argv, roots=roots, force_unlocked=force_unlocked) as change:
        for step in staged.plan.steps:
            if step.action == "delete":
                change.delete_file(step.path)
            elif step.action == "truncate":
                size = (store_root / step.path).stat().st_size
                change.truncate_file(step.path, size - step.bytes_removed, keep_size=True)
            elif step.action == "replace-dir":
                change.replace_dir(step.path, staged.staged / step.path)
            elif step.action == "replace":
                change.replace_file(step.path, staged.checkpoint.to_bytes())
        backup = change.commit()
    shutil.rmtree(staged.staged, ignore_errors=True)
    return backup
