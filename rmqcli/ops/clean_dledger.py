"""Which data and entry-index files of a DLedger log one clean-up round deletes (``rmq clean``).

In DLedger mode a 4.9.8 broker's own CommitLog round deletes nothing (``DLedgerCommitLog.
deleteExpiredFile`` only hands its settings on); DLedger 0.3.1.2's ``DLedgerMmapFileStore.
CleanSpaceService`` does, with ``fileReservedHours = fileReservedTime + 1`` (at least 1),
``deleteWhen``, ``diskSpaceRatioToCheckExpired = diskMaxUsedSpaceRatio / 100`` and
``enableDiskForceClean = cleanFileForciblyEnable`` (``DLedgerCommitLog.refreshConfig``): at a
``deleteWhen`` hour, or with the store's or the data's disk above the check ratio, the oldest data
files but the last, each last modified ``fileReservedHours`` ago or more, go (all but the last above
``diskSpaceRatioToForceClean``, 0.85, when forced cleaning is enabled), stopping at the first that
is not expired, at most ``DELETE_FILES_BATCH_MAX`` (10) (``MmapFileList.deleteExpiredFileByTime``).
``reviseLedgerBeginIndex`` then deletes the entry-index files wholly below the first entry left
(``MmapFileList.resetOffset``). A manual delete (``deleteExpiredCommitLog``) does not reach these
files: ``--manual`` plans what the next ``deleteWhen`` hour's round deletes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from formats import dledger as dfmt
from rmqcli.store import Store
from rmqcli.store import retention as rules
from rmqcli.store.mapped import MappedFile
from rmqcli.store.read.dledger import DLedgerCommitLog

FORCE_CLEAN_RATIO = 0.85  # DLedgerConfig.diskSpaceRatioToForceClean (dledger.disk.ratio.clean)
BATCH_MAX = 10  # MmapFileList.DELETE_FILES_BATCH_MAX
HOUR_MS = 3600 * 1000


@dataclass(frozen=True)
class DLedgerRound:
    """What ``CleanSpaceService.doWork`` decides before it looks at the files."""

    time_up: bool
    check_expired: bool
    force: bool  # forced cleaning: enabled and a disk above FORCE_CLEAN_RATIO
    disk_full: bool | None = None  # DLedger's own isDiskFull refuses appends; not reported here

    @property
    def deletes(self) -> bool:
        return self.time_up or self.check_expired

    def reasons(self) -> list[str]:
        named = [("time", self.time_up), ("space", self.check_expired), ("forcibly", self.force)]
        return [name for name, yes in named if yes]


def reserved_ms(config: rules.RetentionConfig) -> int:
    """``fileReservedHours`` in ms: ``fileReservedTime + 1`` hours, never under one hour."""
    return max((config.file_reserved_time + 1) * HOUR_MS, HOUR_MS)


def decide(config: rules.RetentionConfig, hour: int, disk: rules.Disk, manual: bool) -> DLedgerRound:
    """``isTimeToDelete`` (``--manual``: as at a deleteWhen hour), ``isNeedCheckExpired``,
    ``isNeedForceClean``; ``disk``: the data's disk (commitlog) and the store's (consumequeue)."""
    ratios = (disk.commitlog, disk.consumequeue)
    return DLedgerRound(
        time_up=manual or hour in rules.delete_hours(config.delete_when),
        check_expired=any(r > config.max_used_ratio for r in ratios),
        force=config.clean_file_forcibly_enable and any(r > FORCE_CLEAN_RATIO for r in ratios),
    )


def expired(files: list[rules.CommitLogFile], now_ms: int, config: rules.RetentionConfig, force: bool):
    """``deleteExpiredFileByTime``: the oldest files but the last, stopping at one not expired."""
    chosen: list[rules.CommitLogFile] = []
    for f in files[:-1]:
        if not (force or now_ms >= f.mtime_ms + reserved_ms(config)):
            break
        chosen.append(f)
        if len(chosen) >= BATCH_MAX:
            break
    return chosen


def index_files_below(store: Store, first_kept: MappedFile | None) -> list[MappedFile]:
    """``reviseLedgerBeginIndex``: the entry-index files wholly below the first entry of
    ``first_kept`` (the first data file left)."""
    log = store.commitlog
    assert isinstance(log, DLedgerCommitLog)
    if first_kept is None:
        return []
    buf = first_kept.map()
    if len(buf) < dfmt.BODY_OFFSET:
        return []
    begin = dfmt.ENTRY_HEADER_STRUCT.unpack_from(buf, 0)[2] * dfmt.INDEX_UNIT_SIZE
    return [mf for mf in log.index_queue.files if mf.from_offset + log.index_queue.file_size <= begin]


def disk(store: Store) -> rules.Disk:
    """The data directory's disk and the store root's (``calcDataStorePathPhysicRatio``,
    ``storeBaseRatio``)."""
    assert store.dledger is not None
    return rules.Disk(rules.disk_used_ratio(store.dledger.data_dir), rules.disk_used_ratio(Path(store.root)))
