"""The clean-up services of ``rmq serve``: ``CleanCommitLogService`` and ``CleanConsumeQueueService`` of
4.9.8's ``DefaultMessageStore``, one round every ``cleanResourceInterval`` ms from 60 s after start.

The rules (which files, when, the disk thresholds) are ``rmqcli.store.retention``'s, shared with
``rmq clean``. A round here: measures the disks (``usage``: the file system's figures, or a drill
file's, ``--disk-usage-from``), marks the store full or writable, deletes the CommitLog files the
rules pick, ``deleteCommitLogFilesInterval`` ms apart, then, when the CommitLog minimum moved, the
consume-queue files and index files wholly below it (``deleteConsumeQueueFilesInterval`` ms after each
queue that lost files), and moves each queue's minimum offset (``correctMinOffset``).

A file is unlinked first and unmapped after, so a file that cannot be deleted stays readable; it is
kept as "hanged" and tried again every ``redeleteHangedFileInterval`` ms (``redeleteHangedFile``).
rmq's reads copy bytes out of the maps, so no reader ever holds a file and
``destroyMapedFileIntervalForcibly`` (how long 4.9.8 waits for readers) never has to elapse.
Between rounds the writer's own guard (``rmqcli.store.write.files``: blocks reserved before they are
written) marks the store full the moment a record finds no room on the disk.
DELETE_EXPIRED_COMMITLOG gives the next 20 rounds leave to delete whatever the hour
(``executeDeleteFilesManually``) and, unlike 4.9.8, runs the first of them at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from formats.consumequeue import CQ_UNIT_SIZE
from rmqcli.durable import fsync_dir
from rmqcli.store import retention as rules
from rmqcli.store.naming import CONSUMEQUEUE_DIR

if TYPE_CHECKING:
    from rmqcli.broker.ha.member import Replication
    from rmqcli.broker.services.messagestore import MessageStore
    from rmqcli.store.write.cq import ConsumeQueueWriter
    from rmqcli.store.write.files import WritableFile
    from rmqcli.store.write.index import IndexFileWriter
    from rmqcli.store.write.writer import StoreWriter

log = logging.getLogger(__name__)

Usage = Callable[[Path], float]


def drill_usage(path: Path) -> Usage:
    """A usage figure read from ``path`` at every measurement (``rmq serve --disk-usage-from``): a
    fraction like ``0.93`` (``commitLogDiskRatio``'s form); unreadable or bad content measures the
    real disk."""

    def usage(disk: Path) -> float:
        try:
            value = float(path.read_text().strip())
        except (OSError, ValueError):
            return rules.disk_used_ratio(disk)
        return value

    return usage


class RetentionService:
    """One broker's clean-up state: manual rounds left, the hanged file, the last CommitLog minimum.
    ``config`` gives the settings of the moment (UPDATE_BROKER_CONFIG changes them between rounds)."""

    def __init__(
        self,
        store: MessageStore,
        ha: Replication,
        config: Callable[[], rules.RetentionConfig],
        usage: Usage = rules.disk_used_ratio,
    ):
        self.store = store
        self.writer: StoreWriter = store.writer
        self.ha = ha
        self._config = config
        self.usage = usage
        self.manual_rounds = 0
        self.hanged: WritableFile | None = None
        self._last_redelete = 0.0
        self._last_min_offset = 0
        self._full_warned = False
        self.deleted_commitlog: list[str] = []  # every CommitLog file name deleted since start
        self._lock = asyncio.Lock()
        self.writer.on_disk_full = self._out_of_space

    def _out_of_space(self, exc: OSError) -> None:
        """The writer found no room for a record (rmq's own guard, between rounds): the store is
        marked full at once, so the sends are refused (14) until a round finds space again."""
        if not self.store.disk_full:
            self.store.disk_full = True
            log.error("disk full (%s), so mark disk full: sends are refused", exc)

    @property
    def config(self) -> rules.RetentionConfig:
        return self._config()

    def disk(self) -> rules.Disk:
        writer = self.writer
        return rules.Disk(self.usage(writer.commitlog.directory), self.usage(writer.root / CONSUMEQUEUE_DIR))

    async def run(self) -> None:
        """Rounds for ever: the first 60 s after start, then every ``cleanResourceInterval`` ms."""
        await asyncio.sleep(rules.FIRST_ROUND_DELAY_MS / 1000)
        while True:
            try:
                await self.round()
            except Exception:  # a round that fails is logged; the next one tries again (as 4.9.8)
                log.exception("clean-up round failed")
            await asyncio.sleep(self.config.clean_resource_interval / 1000)

    def delete_manually(self) -> None:
        """DELETE_EXPIRED_COMMITLOG: ``executeDeleteFilesManually``."""
        self.manual_rounds = rules.MANUAL_DELETE_ROUNDS
        log.info("executeDeleteFilesManually was invoked")

    async def round(self, now_ms: int | None = None) -> list[str]:
        """``cleanFilesPeriodically``: the CommitLog files deleted this round (by name)."""
        async with self._lock:
            deleted = await self._clean_commitlog(now_ms)
            self._redelete_hanged()
            await self._clean_queues()
            return deleted

    # --- CleanCommitLogService --------------------------------------------------------------------
    async def _clean_commitlog(self, now_ms: int | None) -> list[str]:
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        config = self.config
        decision = rules.decide(
            config, time.localtime(now_ms / 1000).tm_hour, self.disk(), self.manual_rounds > 0
        )
        self._mark_disk(decision.disk_full)
        if not decision.deletes:
            self._full_warned = False
            return []
        if decision.manual:
            self.manual_rounds -= 1
        files = self.writer.commitlog.files
        chosen = rules.expired_commitlog(
            [_described(f) for f in files], now_ms, config, decision.clean_at_once
        )
        log.info(
            "clean-up: deleting CommitLog files older than %d hours (%s): %d chosen",
            config.file_reserved_time,
            ", ".join(decision.reasons()),
            len(chosen),
        )
        deleted: list[str] = []
        for i, described in enumerate(chosen):
            if not files or files[0].path != described.path or not self._delete_commitlog(files[0]):
                break
            deleted.append(described.path.name)
            if config.delete_commit_log_files_interval > 0 and i + 1 < len(chosen):
                await asyncio.sleep(config.delete_commit_log_files_interval / 1000)
        if deleted:
            fsync_dir(self.writer.commitlog.directory)
            self.deleted_commitlog.extend(deleted)
            log.warning("clean-up: deleted CommitLog files %s", ", ".join(deleted))
        elif decision.space_full and not self._full_warned:  # once, not every round
            log.warning("disk space will be full soon, but delete file failed.")
        self._full_warned = decision.space_full and not deleted
        return deleted

    def _mark_disk(self, full: bool | None) -> None:
        store = self.store
        if full is True and not store.disk_full:
            store.disk_full = True
            log.error("disk maybe full soon, so mark disk full: sends are refused")
        elif full is False and store.disk_full:
            store.disk_full = False
            log.warning("disk space OK, so mark disk ok: sends are accepted again")

    def _delete_commitlog(self, f: WritableFile) -> bool:
        """Unlink the oldest CommitLog file, then unmap it; a file that cannot be unlinked is kept,
        readable, as the hanged file."""
        try:
            f.path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("clean-up: cannot delete %s: %s; trying again later", f.path, exc.strerror or exc)
            self.hanged = f
            self._last_redelete = time.monotonic()
            return False
        self.writer.commitlog.files.remove(f)
        f.close()
        self.ha.commitlog_file_deleted(f.from_offset)
        if self.hanged is f:
            self.hanged = None
        return True

    def _redelete_hanged(self) -> None:
        """``redeleteHangedFile``: the file that could not be deleted, again, once per interval."""
        hanged = self.hanged
        if hanged is None:
            return
        if (time.monotonic() - self._last_redelete) * 1000 <= self.config.redelete_hanged_file_interval:
            return
        self._last_redelete = time.monotonic()
        files = self.writer.commitlog.files
        if files and files[0] is hanged and len(files) > 1 and self._delete_commitlog(hanged):
            fsync_dir(self.writer.commitlog.directory)
            self.deleted_commitlog.append(hanged.path.name)
            log.warning("clean-up: deleted the hanged CommitLog file %s", hanged.path.name)

    # --- CleanConsumeQueueService -----------------------------------------------------------------
    async def _clean_queues(self) -> None:
        files = self.writer.commitlog.files
        low = files[0].from_offset if files else 0
        if low <= self._last_min_offset:
            return
        self._last_min_offset = low
        pause = self.config.delete_consume_queue_files_interval / 1000
        for cq in list(self.writer.dispatcher.cqs.values()):
            if delete_queue_files(cq, low) and pause > 0:
                await asyncio.sleep(pause)
        delete_index_files(self.writer, low)


def _described(f: WritableFile) -> rules.CommitLogFile:
    try:
        mtime_ms = int(os.stat(f.path).st_mtime * 1000)
    except OSError:
        mtime_ms = 0
    return rules.CommitLogFile(f.path, f.from_offset, f.size, mtime_ms)


def _delete_oldest(files: list[WritableFile] | list[IndexFileWriter], count: int, directory: Path) -> int:
    """Unlink, then unmap, the ``count`` oldest of ``files``, taking them off the list; stops at one
    that cannot be deleted (it stays, served). How many went."""
    gone = 0
    for _ in range(count):
        first = files[0]
        try:
            first.path.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("clean-up: cannot delete %s: %s", first.path, exc.strerror or exc)
            break
        files.pop(0)
        first.close()
        gone += 1
    if gone:
        fsync_dir(directory)
    return gone


def delete_queue_files(cq: ConsumeQueueWriter, low: int) -> int:
    """``ConsumeQueue.deleteExpiredFile``: the queue's files wholly below ``low`` go (never the last),
    then ``correctMinOffset``; how many went."""
    queue = cq.files.files
    gone = _delete_oldest(
        queue,
        rules.expired_queue_files([rules.last_unit_offset(f.read, f.wrote) for f in queue], low),
        cq.files.directory,
    )
    if queue:
        first = queue[0]
        index = rules.min_unit_index(lambda: first.read(0, first.wrote), low)
        if index is not None:
            cq.min_logic_offset = first.from_offset + index * CQ_UNIT_SIZE
    return gone


def delete_index_files(writer: StoreWriter, low: int) -> int:
    """``IndexService.deleteExpiredFile``: index files that end below ``low`` (never the last)."""
    files = writer.index.files
    count = rules.expired_index_files([f.end_phy_offset for f in files], low)
    return _delete_oldest(files, count, files[0].path.parent if files else writer.root)
