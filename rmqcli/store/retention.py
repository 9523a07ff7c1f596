"""The broker's retention rules: which CommitLog files a clean-up round deletes, and what goes with them.

One source for ``rmq serve``'s clean-up service (``rmqcli.broker.services.retention``) and the offline planner
(``rmq clean``, ``rmqcli.ops.clean``), so the plan is what the broker then does. The rules are
4.9.8's ``DefaultMessageStore.CleanCommitLogService`` / ``CleanConsumeQueueService``:

- a round deletes when the hour is in ``deleteWhen`` (``isTimeToDelete``), when the disk is fuller
  than ``diskMaxUsedSpaceRatio`` (clamped to [10, 95] as ``MessageStoreConfig`` clamps it; a path that
  cannot be measured counts as full: ``isSpaceToDelete``), or while a manual delete
  (DELETE_EXPIRED_COMMITLOG) still has rounds left (20);
- it deletes the oldest files, never the last, last modified at least ``fileReservedTime`` hours ago,
  up to the first that is younger, at most ``deleteFileBatchMax`` (``deleteExpiredFileByTime``); when
  ``cleanFileForciblyEnable`` and the disk is above ``diskSpaceCleanForciblyRatio`` (or the warning
  level) it deletes them whatever their age (``cleanImmediately``);
- above ``diskSpaceWarningLevelRatio`` the store is marked full and refuses writes until a round finds
  the disk below it again (``runningFlags.getAndMakeDiskFull`` / ``getAndMakeDiskOK``);
- then consume-queue files whose last unit points below the new CommitLog minimum (never a queue's last
  file) and index files that end below it go (``deleteExpiredFileByOffset``, ``IndexService``).

4.9.8 reads ``diskSpaceWarningLevelRatio`` (0.90) and ``diskSpaceCleanForciblyRatio`` (0.85) from JVM
system properties; ``deleteFileBatchMax`` is a constant there (10). rmq takes all three from broker.conf
under RocketMQ 5's names and units (percent, files).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from formats.consumequeue import CQ_UNIT_SIZE, CQ_UNIT_STRUCT
from rmqcli.conf.keys import setting
from rmqcli.conf.parse import conf_of
from rmqcli.errors import UsageError

MANUAL_DELETE_ROUNDS = 20  # CleanCommitLogService.MAX_MANUAL_DELETE_FILE_TIMES
FIRST_ROUND_DELAY_MS = 60_000  # DefaultMessageStore.addScheduleTask: the first clean-up, after start
HOUR_MS = 3_600_000


@dataclass(frozen=True)
class RetentionConfig:
    """The clean-up keys of ``MessageStoreConfig``, with 4.9.8's defaults (ms, hours, percent)."""

    file_reserved_time: int = setting("fileReservedTime")  # hours
    delete_when: str = setting("deleteWhen")  # hours of the day, ";"-separated
    # percent, as given (``max_used_ratio`` is the clamped one)
    disk_max_used_space_ratio: int = setting("diskMaxUsedSpaceRatio")
    clean_resource_interval: int = setting("cleanResourceInterval")
    delete_commit_log_files_interval: int = setting("deleteCommitLogFilesInterval")
    delete_consume_queue_files_interval: int = setting("deleteConsumeQueueFilesInterval")
    destroy_maped_file_interval_forcibly: int = setting("destroyMapedFileIntervalForcibly")
    redelete_hanged_file_interval: int = setting("redeleteHangedFileInterval")
    clean_file_forcibly_enable: bool = setting("cleanFileForciblyEnable")
    disk_space_warning_level_ratio: int = setting("diskSpaceWarningLevelRatio")  # percent
    disk_space_clean_forcibly_ratio: int = setting("diskSpaceCleanForciblyRatio")  # percent
    delete_file_batch_max: int = setting("deleteFileBatchMax")

    @property
    def max_used_ratio(self) -> float:
        """``getDiskMaxUsedSpaceRatio() / 100.0``: clamped to [10, 95] percent."""
        return min(max(self.disk_max_used_space_ratio, 10), 95) / 100.0

    @property
    def warning_ratio(self) -> float:
        return self.disk_space_warning_level_ratio / 100.0

    @property
    def forcibly_ratio(self) -> float:
        return self.disk_space_clean_forcibly_ratio / 100.0

    @property
    def reserved_ms(self) -> int:
        return self.file_reserved_time * HOUR_MS


def delete_hours(when: str) -> list[int]:
    """``deleteWhen``'s hours (``UtilAll.isItTimeToDo`` parses each with ``Integer.parseInt``)."""
    try:
        hours = [int(part.strip()) for part in when.split(";")]
    except ValueError:
        raise UsageError(f"deleteWhen={when!r} is not a list of hours like '04' or '04;16'") from None
    return hours


def retention_from_properties(
    props: Mapping[str, str], base: RetentionConfig | None = None
) -> RetentionConfig:
    """``RetentionConfig`` from broker.conf keys (``rmqcli.conf``: a value that does not parse, or a
    period or batch below 1, is a ``UsageError``); ``deleteWhen`` must be a list of hours."""
    config = replace(base or RetentionConfig(), **conf_of(props).values(RetentionConfig, given_only=True))
    delete_hours(config.delete_when)
    return config


def disk_used_ratio(path: Path) -> float:
    """``UtilAll.getDiskPartitionSpaceUsedPercent``: used / (used + usable) of ``path``'s disk, rounded
    up to hundredths; -1 when the path does not exist or cannot be measured."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    total = st.f_blocks * st.f_frsize
    if total <= 0:
        return -1.0
    used = total - st.f_bfree * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    if entire <= 0:
        return -1.0
    return (used * 100 // entire + (1 if used * 100 % entire else 0)) / 100.0


@dataclass(frozen=True)
class Disk:
    """The used share of the CommitLog's and the consume queues' disks (-1: not measured)."""

    commitlog: float
    consumequeue: float


@dataclass(frozen=True)
class Round:
    """What one clean-up round decides before it looks at the files."""

    time_up: bool  # the hour is in deleteWhen
    space_full: bool  # a disk above diskMaxUsedSpaceRatio (or not measured)
    manual: bool  # a manual delete has rounds left
    clean_at_once: bool  # cleanFileForciblyEnable and a disk above the forcibly/warning ratio
    disk_full: bool | None  # True: mark the store full; False: mark it writable; None: leave it

    @property
    def deletes(self) -> bool:
        return self.time_up or self.space_full or self.manual

    def reasons(self) -> list[str]:
        named = [("time", self.time_up), ("space", self.space_full), ("manual", self.manual)]
        return [name for name, yes in named if yes] + (["forcibly"] if self.clean_at_once else [])


def decide(config: RetentionConfig, hour: int, disk: Disk, manual: bool) -> Round:
    """``CleanCommitLogService.deleteExpiredFiles``'s three tests and ``isSpaceToDelete``'s flags: the
    CommitLog disk is judged first, and when it alone already asks for deletion the consume queues'
    disk is not looked at (4.9.8 returns early)."""
    time_up = hour in delete_hours(config.delete_when)
    immediately = False
    disk_full: bool | None = None
    space_full = False
    for ratio in (disk.commitlog, disk.consumequeue):
        if ratio > config.warning_ratio:
            disk_full, immediately = True, True
        elif ratio > config.forcibly_ratio:
            immediately = True
        else:
            disk_full = False  # each disk's verdict overwrites the last, as in 4.9.8
        if ratio < 0 or ratio > config.max_used_ratio:
            space_full = True
            break
    return Round(
        time_up=time_up,
        space_full=space_full,
        manual=manual,
        clean_at_once=config.clean_file_forcibly_enable and immediately,
        disk_full=disk_full,
    )


@dataclass(frozen=True)
class CommitLogFile:
    """A CommitLog file as the rules see it: its name, first offset, size and mtime in ms."""

    path: Path
    from_offset: int
    size: int
    mtime_ms: int


def expired_commitlog(
    files: Sequence[CommitLogFile], now_ms: int, config: RetentionConfig, clean_at_once: bool
) -> list[CommitLogFile]:
    """``MappedFileQueue.deleteExpiredFileByTime``: the oldest files but the last, each expired (or
    ``clean_at_once``), stopping at the first that is not, at most ``deleteFileBatchMax``."""
    chosen: list[CommitLogFile] = []
    for f in files[:-1]:
        if not (clean_at_once or now_ms >= f.mtime_ms + config.reserved_ms):
            break
        chosen.append(f)
        if len(chosen) >= config.delete_file_batch_max:
            break
    return chosen


def expired_queue_files(last_units: Sequence[int | None], low: int) -> int:
    """``deleteExpiredFileByOffset``: how many of a queue's oldest files go, given each file's last
    unit's CommitLog offset (``None``: the file holds no unit); never the last file."""
    count = 0
    for last in last_units[:-1]:
        if last is None or last >= low:
            break
        count += 1
    return count


def expired_index_files(end_offsets: Sequence[int], low: int) -> int:
    """``IndexService.deleteExpiredFile``: how many of the oldest index files end below ``low``; never
    the last."""
    count = 0
    for end in end_offsets[:-1]:
        if end >= low:
            break
        count += 1
    return count


def last_unit_offset(read: Callable[[int, int], bytes], end: int) -> int | None:
    """The CommitLog offset in the consume-queue unit that ends at byte ``end`` of a file read by
    ``read(position, length)``; None when no unit ends there."""
    if end < CQ_UNIT_SIZE:
        return None
    return CQ_UNIT_STRUCT.unpack(read(end - CQ_UNIT_SIZE, CQ_UNIT_SIZE))[0]


def min_unit_index(units: Callable[[], bytes], low: int) -> int | None:
    """``ConsumeQueue.correctMinOffset``: the index in the first file's ``units`` bytes of the first
    unit pointing at or above ``low``; ``None`` when there is none."""
    data = units()
    for i, (offset, _, _) in enumerate(
        CQ_UNIT_STRUCT.iter_unpack(data[: len(data) - len(data) % CQ_UNIT_SIZE])
    ):
        if offset >= low:
            return i
    return None
