"""Cut a DLedger log at an entry boundary: the data files, the entry index files and the checkpoint.

What ``DLedgerMmapFileStore.recover`` leaves after its walk (DLedger 0.3.1.2): ``dataFileList.
truncateOffset(processOffset)`` and ``indexFileList.truncateOffset((lastEntryIndex + 1) * 32)``
(``MmapFileList.truncateOffset``: a file that starts past the offset is deleted, a file that starts
at it or holds it keeps its size; rmq zeroes its bytes from the offset on, the broker would leave
them for its next append to overwrite), and ``persistCheckPoint``: ``endIndex`` is the last entry
kept and ``committedIndex`` no more than it (``updateCommittedIndex`` caps it so). The previous
checkpoint text goes to ``checkpoint.bak`` as ``IOUtils.string2File`` does. ``rmq recover`` and
``rmq truncate`` plan these steps; units to rewrite in the index files are writes of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from formats import dledger as dfmt
from rmqcli.ops.safety import Change, PlanStep, plan_path
from rmqcli.store import Store
from rmqcli.store.mapped import MappedFile
from rmqcli.store.read.dledger import DLedgerCommitLog
from rmqcli.store.write.dledger_files import checkpoint_text, read_index_values


@dataclass
class DLedgerCut:
    """The steps of a cut and what they write: ``writes`` (store-relative path -> [(offset, bytes)])
    for index units, ``files`` (path -> new content) for the checkpoint texts."""

    steps: list[PlanStep] = field(default_factory=list)
    writes: dict[str, list[tuple[int, bytes]]] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)

    def apply(self, change: Change, step: PlanStep) -> bool:
        """Apply ``step`` if it is one of this cut's (True), through ``change``."""
        if step.path in self.writes and step.action == "write":
            for offset, data in self.writes[step.path]:
                change.write_range(step.path, offset, data)
            return True
        if step.path in self.files and step.action == "replace":
            change.replace_file(step.path, self.files[step.path])
            return True
        return False


def _cut_files(root: Path, files: list[MappedFile], offset: int, what: str) -> list[PlanStep]:
    """``truncateOffset(offset)`` over ``files``: later files deleted, the one holding it zeroed on."""
    steps = []
    for mf in files:
        rel = plan_path(root, mf.path)
        size = mf.size
        if mf.from_offset > offset:
            steps.append(PlanStep("delete", rel, f"{size} bytes of {what} after the end", size))
        elif offset < mf.from_offset + size:
            at = offset - mf.from_offset
            tail = bytes(mf.map()[at:])
            if any(tail):
                steps.append(
                    PlanStep("truncate", rel, f"{what} end at byte {at}; the rest zeroed", size - at)
                )
    return steps


def plan_cut(store: Store, end: int, last_index: int, units: dict[int, bytes] | None = None) -> DLedgerCut:
    """The steps that leave the data ending at ``end`` and the entries up to ``last_index``, with the
    index ``units`` (entry index -> 32 bytes) written where they differ."""
    log = store.commitlog
    assert isinstance(log, DLedgerCommitLog) and store.dledger is not None
    return plan_log_cut(store.root, log, end, last_index, units)


def plan_log_cut(
    root: Path, log: DLedgerCommitLog, end: int, last_index: int, units: dict[int, bytes] | None = None
) -> DLedgerCut:
    """``plan_cut`` of any DLedger log (a broker's, a controller's) under ``root``, paths relative to it."""
    cut = DLedgerCut()
    cut.steps += _cut_files(root, log.files, end, "entry data")
    index_end = (last_index + 1) * dfmt.INDEX_UNIT_SIZE
    cut.steps += _cut_files(root, log.index_queue.files, index_end, "entry index")
    for index, unit in sorted((units or {}).items()):
        if index > last_index:
            continue
        at = index * dfmt.INDEX_UNIT_SIZE
        mf = log.index_queue.find(at)
        rel = plan_path(root, mf.path)
        cut.writes.setdefault(rel, []).append((at - mf.from_offset, unit))
    for rel, writes in cut.writes.items():
        first = writes[0][0] // dfmt.INDEX_UNIT_SIZE
        detail = f"{len(writes)} index units written again from the data (the first at unit {first})"
        cut.steps.append(PlanStep("write", rel, detail, len(writes) * dfmt.INDEX_UNIT_SIZE))
    _plan_checkpoint(root, log.home, last_index, cut)
    return cut


def _plan_checkpoint(root: Path, home: Path, last_index: int, cut: DLedgerCut) -> None:
    """``checkpoint`` with endIndex = ``last_index`` and committedIndex capped at it."""
    path = home / dfmt.CHECKPOINT_FILE
    if not path.is_file():
        return
    old = path.read_bytes()
    values = read_index_values(old)
    committed = min(values.get(dfmt.COMMITTED_INDEX_KEY, -1), last_index)
    new = checkpoint_text(old, committed, last_index)
    if new == old:
        return
    rel = plan_path(root, path)
    bak = plan_path(root, path.with_name(path.name + dfmt.BAK_SUFFIX))
    cut.files[bak] = old
    cut.files[rel] = new
    cut.steps.append(PlanStep("replace", bak, "the previous checkpoint, as string2File keeps it"))
    cut.steps.append(PlanStep("replace", rel, f"committedIndex={committed} endIndex={last_index}"))


def committed_index(store: Store) -> int | None:
    """The checkpoint's committedIndex (its ``.bak``'s when the file is missing; ``None`` without)."""
    assert store.dledger is not None
    for name in (dfmt.CHECKPOINT_FILE, dfmt.CHECKPOINT_FILE + dfmt.BAK_SUFFIX):
        path = store.dledger.home / name
        if path.is_file():
            return read_index_values(path.read_bytes()).get(dfmt.COMMITTED_INDEX_KEY)
    return None
