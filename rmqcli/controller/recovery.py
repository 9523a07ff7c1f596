"""A controller's log recovered at its start, as ``DLedgerMmapFileStore.recover`` does when a 5.1.1
controller starts (controller.md §3.3): after a kill the log may end in a torn entry, or in entries
whose index units were not written. The recovery walk (``rmqcli.ops.dledger_walk``) finds the last
sound entry; the data after it is cut, index units that disagree are written again and the
checkpoint's indexes capped, through a ``Change`` of ``controllerStorePath``: every byte removed is
kept in its backup and a recovery killed half way is rolled back by the next start."""

from __future__ import annotations

from pathlib import Path

from formats import dledger as dfmt
from rmqcli.ops.dledger_cut import plan_log_cut
from rmqcli.ops.dledger_walk import walk
from rmqcli.ops.safety import Change, finish_interrupted
from rmqcli.store.mapped import MappedFileQueue
from rmqcli.store.read.dledger import DLedgerCommitLog


def recover_log(root: Path, home: Path, data_file_size: int) -> str | None:
    """Recover the log of ``home`` (``root/dledger-<selfId>``); a line saying what was cut and where
    its backup is, None when the log needed nothing."""
    if not (home / dfmt.DATA_DIR).is_dir():
        return None
    finish_interrupted(root)  # a recovery killed half way: rolled back first, then done again
    reader = DLedgerCommitLog(
        MappedFileQueue.open(home / dfmt.DATA_DIR, data_file_size),
        MappedFileQueue.open(home / dfmt.INDEX_DIR, dfmt.DEFAULT_INDEX_FILE_SIZE),
        home,
    )
    try:
        found = walk(reader)
        cut = plan_log_cut(root, reader, found.end, found.last_index, found.units)
    finally:
        reader.close()
    if not cut.steps:
        return None
    with Change(root, "recover", ["rmq controller"], replan=False) as change:
        for step in cut.steps:
            if not cut.apply(change, step):
                change.apply_file_step(step, root)
        backup = change.commit()
    removed = sum(step.bytes_removed for step in cut.steps)
    why = found.stop[2] if found.stop else "index units that disagree with the data"
    return (
        f"recovered the controller's log at {home}: it ends at entry {found.last_index} (byte {found.end}); "
        f"{why}; {removed} bytes cut, kept in {backup}"
    )
