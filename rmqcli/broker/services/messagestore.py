"""The broker's store engine over ``StoreWriter`` (``DefaultMessageStore`` of RocketMQ 4.9.x).

Appends go through the writer, which dispatches each record to its consume queue and the index
at once (the reput). Reads serve pulls and queries straight from the writer's mapped files:
consume-queue units (20 bytes, B.8) and stored records, byte for byte. Flushing is
``FlushRealTimeService`` (ASYNC_FLUSH: every ``flushIntervalCommitLog`` ms when something was
appended) or ``GroupCommitService`` (SYNC_FLUSH: a send is answered after the flush that covers it;
every append made before the flush starts shares it). The flushes and the config writes run in
worker threads (``fdatasync``, which releases the GIL), never blocking the event loop.
``on_arrival`` listeners are told of every new consume-queue unit
(``NotifyMessageArrivingListener``: wakes held pulls).
"""

from __future__ import annotations

import asyncio
import bisect
import concurrent.futures
import logging
import os
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from formats.consumequeue import CQ_UNIT_SIZE, CQ_UNIT_STRUCT
from rmqcli.durable import fsync_dir
from rmqcli.store.checkpoint import Checkpoint
from rmqcli.store.read.commitlog import Record, RecordError, decode_record
from rmqcli.store.read.index import IndexService
from rmqcli.store.store import CHECKPOINT_FILE, CONFIG_DIR, INDEX_DIR
from rmqcli.store.timesearch import offset_by_time
from rmqcli.store.write import messages  # the message and result types the store takes
from rmqcli.store.write.configsync import ConfigWriter
from rmqcli.store.write.cq import ConsumeQueueWriter
from rmqcli.store.write.files import WritableFile, datasync_path
from rmqcli.store.write.writer import StoreWriter

log = logging.getLogger(__name__)

ArrivalListener = Callable[[str, int], None]
FULL_FLUSH_SECONDS = 10.0  # checkpoint, consume queues and index (``FlushConsumeQueueService`` & co.)
FIRST_FULL_FLUSH_SECONDS = 1.0  # the first comes about a second after start, as the broker's does


@dataclass
class Unit:
    """One consume-queue unit: where the record is, and its tags code."""

    physical_offset: int
    size: int
    tags_code: int


class MessageStore:
    """Appends, reads and flushes of one store, held open by a ``StoreWriter``."""

    def __init__(self, writer: StoreWriter, *, sync_flush: bool = False, flush_interval_ms: int = 500):
        self.writer = writer
        self.sync_flush = sync_flush
        self.flush_interval = max(flush_interval_ms, 10) / 1000
        self.listeners: list[ArrivalListener] = []
        self.append_hooks: list[Callable[[], None]] = []  # told of new CommitLog bytes (the HA master)
        self.put_count = 0
        self.put_bytes = 0  # record bytes stored (``StoreStatsService.getPutMessageSizeTotal``)
        self.get_count = 0
        self.boot_timestamp = int(time.time() * 1000)
        self.disk_full = False  # runningFlags' DISK_FULL: set and cleared by the clean-up rounds
        self._dirty = False
        self._dirty_full = False
        self._group_commit: asyncio.Future[None] | None = None  # the sends waiting for a flush
        self._committing = False  # a CommitLog flush runs, or is about to start
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None  # the flush threads
        self._threads: set[concurrent.futures.Future[None]] = set()  # flushes running in them
        # each consume queue's (end, file count) at the last full flush
        self._queue_marks: weakref.WeakKeyDictionary[ConsumeQueueWriter, tuple[int, int]] = (
            weakref.WeakKeyDictionary()
        )
        self._index_files = -1
        self.config_writer = ConfigWriter(writer.root / CONFIG_DIR)
        self._flushed_offset = 0  # CommitLog offset the last flush covered
        self._flushed_files = -1
        self._arrivals: list[tuple[str, int]] = []  # deferred puts whose listeners wait for catch_up

    # --- appending ----------------------------------------------------------------------------
    def put(self, message: messages.Message, *, defer_dispatch: bool = False) -> messages.AppendResult:
        """``DefaultMessageStore.putMessage``. With ``defer_dispatch`` the consume-queue and index
        entries and the arrival listeners wait for ``catch_up`` (``ReputMessageService`` runs behind
        the CommitLog): the send processor answers first, the connection catches up right after."""
        result = self.writer.append(message, defer_dispatch=defer_dispatch)
        self.put_bytes += result.size
        if defer_dispatch:
            self._put_deferred(result.topic, result.queue_id)
        else:
            self._appended(result.topic, result.queue_id, 1)
        return result

    def put_serialized(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        properties: bytes,
        *,
        flag: int,
        sys_flag: int,
        born_timestamp: int,
        born_host: messages.Host,
        reconsume_times: int,
        stored_map: dict[str, str] | None = None,
    ) -> tuple[int, int]:
        """``put`` with deferred dispatch of a plain message whose properties string the caller
        serialised as the broker does (the send lane): ``(physical offset, queue offset)``.
        ``stored_map``, when given, is what ``properties`` decodes to: the reput takes it instead
        of decoding the string again."""
        writer = self.writer
        physical, queue_offset, size, _ = writer.write_record(
            topic,
            queue_id,
            body,
            properties,
            properties if stored_map is None else stored_map,
            flag=flag,
            sys_flag=sys_flag,
            born_timestamp=born_timestamp,
            born_host=born_host,
            store_host=writer.store_host,
            reconsume_times=reconsume_times,
            defer_dispatch=True,
        )
        self.put_bytes += size
        self._put_deferred(topic, queue_id)
        return physical, queue_offset

    def _put_deferred(self, topic: str, queue_id: int) -> None:
        self.put_count += 1
        self._dirty = self._dirty_full = True
        self._arrivals.append((topic, queue_id))
        for hook in self.append_hooks:
            hook()

    def catch_up(self) -> None:
        """Dispatch the deferred puts and tell the listeners (a no-op when nothing waits)."""
        if not self._arrivals:
            return
        arrivals, self._arrivals = self._arrivals, []
        try:
            self.writer.dispatch_pending()
        except Exception:  # the senders have their answers; a reput that fails is logged (as Java's)
            log.exception("dispatch of stored messages failed")
        for topic, queue_id in dict.fromkeys(arrivals):
            self._notify(topic, queue_id)

    def release_held(self, everything: bool = False) -> None:
        """Controller mode: dispatch what the confirm offset now covers (``StoreWriter.release_held``)
        and tell the listeners."""
        released = self.writer.release_held(everything)
        for topic, queue_id in dict.fromkeys((req.topic, req.queue_id) for req in released):
            self._notify(topic, queue_id)

    def put_inner(self, inner: messages.InnerMessage) -> messages.AppendResult:
        """``putMessage`` of a ``MessageExtBrokerInner`` the broker builds itself (send-back, delayed
        delivery, transactions): its properties string is stored as given."""
        result = self.writer.put_message(inner)
        self.put_bytes += result.size
        self._appended(result.topic, result.queue_id, 1)
        return result

    def put_batch(self, batch: messages.BatchMessage) -> messages.BatchAppendResult:
        """``DefaultMessageStore.putMessages``: a classic batch, one record per element."""
        result = self.writer.append_batch(batch)
        self.put_bytes += sum(record.size for record in result.records)
        self._appended(batch.topic, batch.queue_id, len(result.records))
        return result

    def _appended(self, topic: str, queue_id: int, count: int) -> None:
        self.catch_up()
        self.put_count += count
        self._dirty = self._dirty_full = True
        for hook in self.append_hooks:
            hook()
        self._notify(topic, queue_id)

    def replicated(self, rec: Record) -> None:
        """A slave's reput of one record its master's bytes brought: queue unit, index keys, held
        pulls woken (a 4.9.8 slave leaves them to the hold service's next check)."""
        self.writer.dispatch_replicated(rec)
        self._dirty_full = True
        self._notify(rec.topic, rec.queue_id)

    def _notify(self, topic: str, queue_id: int) -> None:
        for listener in self.listeners:
            try:
                listener(topic, queue_id)
            except Exception:
                log.exception("arrival listener failed")

    def flushed(self) -> asyncio.Future[None]:
        """A future done once everything appended so far is on disk: the result of a CommitLog flush
        that starts after this call (``GroupCommitService``: the sends of one loop iteration share
        a flush, those appended while it runs share the next). SYNC_FLUSH sends wait for it; the
        periodic flushes use it too, so that one CommitLog flush runs at a time."""
        if self._group_commit is None:
            loop = asyncio.get_running_loop()
            self._group_commit = loop.create_future()
            if not self._committing:
                self._committing = True
                loop.call_soon(self._start_commit)
        return self._group_commit

    @property
    def flushed_offset(self) -> int:
        """The CommitLog offset the last finished flush covered (``CommitLog.getFlushedWhere``)."""
        return self._flushed_offset

    def wake_group_commit(self) -> None:
        """``GroupCommitService.wakeup``: a group commit soon, for a SYNC_FLUSH send nobody waits
        for (oneway, or ``WAIT=false``); a failure is logged by the flush itself."""
        self.flushed().add_done_callback(_retrieved)

    # --- flushing -----------------------------------------------------------------------------
    # The flushes run in worker threads (``fdatasync`` of each file by path releases the GIL; an
    # ``mmap.flush`` would hold it): what a flush covers is taken on the loop before it starts, and
    # its bookkeeping (flushed offset, checkpoint) is written after it finished. The CommitLog's
    # flushes form one chain of callbacks (no task, no lock: each costs a thread's round trip and
    # no more loop iterations than needed).
    def _start_commit(self) -> None:
        """Take the waiting future and the CommitLog's dirty files in one step, and flush them in a
        worker thread; done at once when nothing was appended since the last flush finished."""
        future, self._group_commit = self._group_commit, None
        if future is None:
            self._committing = False
            return
        taken = self._take_commitlog()
        if taken is None:
            if not future.done():
                future.set_result(None)
            self._start_commit()  # nothing waits now: ends the chain
            return
        sync, end, count = taken
        loop = asyncio.get_running_loop()
        work = self._submit(sync)

        def finished(done: concurrent.futures.Future[None]) -> None:  # in the worker thread
            loop.call_soon_threadsafe(self._commit_done, done, future, end, count)

        work.add_done_callback(finished)

    def _commit_done(
        self, work: concurrent.futures.Future[None], future: asyncio.Future[None], end: int, count: int
    ) -> None:
        error = work.exception()
        if error is None:
            self._flushed_offset = max(self._flushed_offset, end)
            self._flushed_files = count
            if not future.done():
                future.set_result(None)
        else:  # a failed fsync answers FLUSH_DISK_TIMEOUT to the senders; flushed again next time
            self._dirty = True
            log.error("flush of the CommitLog failed: %s", error)
            if not future.done():
                future.set_exception(error)
        self._start_commit()  # the sends appended meanwhile, if any

    def _take_commitlog(self) -> tuple[Callable[[], None], int, int] | None:
        """What ``MappedFileQueue.flush`` would sync now: the files written since the last flush
        (normally just the last one), and the directory when a file was created or removed since;
        with the CommitLog offset and file count it covers. None when nothing was appended."""
        if not self._dirty:
            return None
        self._dirty = False
        queue = self.writer.commitlog
        files = list(queue.files)  # a snapshot: the loop may add files while the thread syncs
        end = queue.max_offset
        start = bisect.bisect_right(files, self._flushed_offset, key=lambda f: f.from_offset) - 1
        paths = [f.path for f in files[max(start, 0) :]]
        directory = queue.directory if len(files) != self._flushed_files else None

        def sync() -> None:
            for path in paths:
                datasync_path(path)
            if directory is not None:
                fsync_dir(directory)

        return sync, end, len(files)

    async def sync_commitlog(self) -> None:
        """``FlushRealTimeService``'s flush (ASYNC_FLUSH), off the loop: what was appended before
        the call is on disk when it returns."""
        await asyncio.shield(self.flushed())

    def _submit(self, work: Callable[[], None]) -> concurrent.futures.Future[None]:
        """``work`` in one of the store's flush threads; ``settle`` waits for it."""
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="flush")
        done = self._executor.submit(work)
        self._threads.add(done)
        done.add_done_callback(self._threads.discard)
        return done

    async def _in_thread(self, work: Callable[[], None]) -> None:
        """``work`` in a flush thread; ``settle`` waits for it even when the caller is cancelled."""
        await asyncio.shield(asyncio.wrap_future(self._submit(work)))

    def flush_all(self) -> None:
        """CommitLog, consume queues, index, checkpoint and config files, with fsync; the config
        files through the config writer, after a background write under way (its older texts
        never replace these)."""
        self.catch_up()
        self._dirty = self._dirty_full = False
        self.persist_config()
        self.writer.flush(config=False)

    def persist_config(self) -> None:
        """``ConfigManager.persist`` of topics.json, subscriptionGroup.json, consumerOffset.json
        and delayOffset.json (each written beside and renamed into place, the old one kept as .bak),
        here and now: an admin request is answered once its file is on disk, as 4.9.8 does."""
        self.config_writer.write_now(self.writer.config.texts())

    def persist_config_soon(self, *, topics: bool = True) -> None:
        """``persist_config`` in a worker thread: the texts are taken now, the files written
        behind (the periodic persist, topics created by sends, the slave's sync); without
        topics.json when ``topics`` is false (just written)."""
        self.config_writer.write_later(self.writer.config.texts(topics=topics))

    def persist_topics(self) -> None:
        """topics.json alone, after a topic's update (``TopicConfigManager.persist``), now."""
        self.config_writer.write_now(self.writer.config.texts(topics_only=True))

    async def flush_loop(self) -> None:
        """ASYNC_FLUSH ``FlushRealTimeService`` plus the periodic full flush."""
        last_full = time.monotonic() - FULL_FLUSH_SECONDS + FIRST_FULL_FLUSH_SECONDS
        while True:
            await asyncio.sleep(self.flush_interval)
            try:
                if not self.sync_flush:
                    await self.sync_commitlog()
                if self._dirty_full and time.monotonic() - last_full >= FULL_FLUSH_SECONDS:
                    last_full = time.monotonic()
                    self._dirty_full = False
                    await self.flush_with_checkpoint()
            except Exception:
                log.exception("flush failed")

    async def flush_with_checkpoint(self) -> None:
        """``FlushConsumeQueueService``'s thorough flush: CommitLog, consume queues and index to
        disk in a worker thread, then the checkpoint, whose timestamps vouch only for flushed data
        (so a crash recovers from the file they name, not from the first). The timestamps are taken
        before the flushes start: what is appended meanwhile is left to the next checkpoint."""
        self.catch_up()
        stamps = self.writer.checkpoint  # dispatches what waits, then reads the three times
        self._dirty = True  # even so: a slave's CommitLog is written by its HA appender
        await self.sync_commitlog()
        await self._in_thread(self._take_queues())
        path = self.writer.root / CHECKPOINT_FILE
        await self._in_thread(lambda: _write_checkpoint(path, stamps))

    def _take_queues(self) -> Callable[[], None]:
        """The consume-queue files written since the last full flush (each queue's directory too
        when its files changed) and the index files, to sync in a worker thread."""
        paths: list[Path] = []
        directories: list[Path] = []
        marks = self._queue_marks
        for cq in self.writer.dispatcher.cqs.values():
            files = cq.files.files
            mark = (cq.files.max_offset, len(files))
            seen = marks.get(cq)
            if seen == mark:
                continue
            marks[cq] = mark
            since = seen[0] if seen is not None else 0
            start = bisect.bisect_right(files, since, key=lambda f: f.from_offset) - 1
            paths.extend(f.path for f in files[max(start, 0) :])
            if seen is None or seen[1] != len(files):
                directories.append(cq.files.directory)
        index = self.writer.index
        paths.extend(f.path for f in index.files)
        if len(index.files) != self._index_files:
            self._index_files = len(index.files)
            directories.append(index.directory)

        def sync() -> None:
            for path in paths:
                datasync_path(path)
            for directory in directories:
                fsync_dir(directory)

        return sync

    async def settle(self) -> None:
        """Wait for the flushes and config writes under way (shutdown, before ``close``)."""
        while self._committing or self._threads:
            running = list(self._threads)
            if running:
                await asyncio.gather(*(asyncio.wrap_future(f) for f in running), return_exceptions=True)
            else:
                await asyncio.sleep(0)  # the chain's next step is scheduled
        await self.config_writer.settle()

    # --- consume queues -----------------------------------------------------------------------
    def queue(self, topic: str, queue_id: int) -> ConsumeQueueWriter | None:
        if self._arrivals:
            self.catch_up()
        return self.writer.dispatcher.cqs.get((topic, queue_id))

    def max_offset(self, topic: str, queue_id: int) -> int:
        """``getMaxOffsetInQueue``: the next queue offset (0 for an unknown queue)."""
        cq = self.queue(topic, queue_id)
        return cq.max_offset if cq else 0

    def min_offset(self, topic: str, queue_id: int) -> int:
        """``getMinOffsetInQueue`` (0 for an unknown queue; GET_MIN_OFFSET answers that too)."""
        cq = self.queue(topic, queue_id)
        return cq.min_logic_offset // CQ_UNIT_SIZE if cq else 0

    def units_per_file(self, topic: str, queue_id: int) -> int:
        cq = self.queue(topic, queue_id)
        return (
            cq.files.file_size if cq else self.writer.settings.mapped_file_size_consume_queue
        ) // CQ_UNIT_SIZE

    def units(self, topic: str, queue_id: int, offset: int, max_units: int) -> list[Unit]:
        """``ConsumeQueue.getIndexBuffer``: units from ``offset`` to the end of its file, at most
        ``max_units``; empty when ``offset`` is in no file (a hole)."""
        return [Unit(o, s, t) for o, s, t in self.unit_tuples(topic, queue_id, offset, max_units)]

    def unit_tuples(
        self, topic: str, queue_id: int, offset: int, max_units: int
    ) -> Iterator[tuple[int, int, int]]:
        """``units`` as ``(physical offset, size, tags code)`` tuples, decoded lazily: a pull that
        stops after a few units does not pay for the rest of the buffer."""
        cq = self.queue(topic, queue_id)
        if cq is None or offset < 0:
            return iter(())
        pos = offset * CQ_UNIT_SIZE
        f = _file_at(cq.files.files, pos)
        if f is None:
            return iter(())
        start = pos - f.from_offset
        end = min(f.wrote, start + max_units * CQ_UNIT_SIZE)
        if end <= start:
            return iter(())
        return CQ_UNIT_STRUCT.iter_unpack(f.read(start, end - start))

    # --- commit log ---------------------------------------------------------------------------
    def read(self, physical_offset: int, size: int) -> bytes | None:
        """``CommitLog.getMessage``: ``size`` bytes of the record at ``physical_offset``."""
        f = _file_at(self.writer.commitlog.files, physical_offset)
        if f is None:
            return None
        pos = physical_offset - f.from_offset
        if pos + size > f.wrote:
            return None
        return f.read(pos, size)

    def record_at(self, physical_offset: int) -> tuple[Record, bytes] | None:
        """The decoded record at ``physical_offset`` and its bytes; None when no record starts there."""
        f = _file_at(self.writer.commitlog.files, physical_offset)
        if f is None:
            return None
        pos = physical_offset - f.from_offset
        head = f.read(pos, 4) if pos + 4 <= f.wrote else b""
        if len(head) < 4:
            return None
        size = int.from_bytes(head, "big", signed=True)
        if size <= 0 or pos + size > f.wrote:
            return None
        data = f.read(pos, size)
        try:
            rec = decode_record(data, 0, len(data), f.path.name, physical_offset)
        except RecordError:
            return None
        if rec.physical_offset != physical_offset:
            return None
        return rec, data

    def look_message(self, physical_offset: int) -> Record | None:
        """``lookMessageByOffset``: the record at ``physical_offset`` (body as stored), None if none."""
        found = self.record_at(physical_offset)
        return found[0] if found else None

    def store_timestamp(self, unit: Unit) -> int | None:
        found = self.record_at(unit.physical_offset)
        return found[0].store_timestamp if found else None

    def search_offset(self, topic: str, queue_id: int, timestamp: int) -> int:
        """``ConsumeQueue.getOffsetInQueueByTime`` (``rmqcli.store.timesearch``)."""

        def store_time(offset: int) -> int | None:
            units = self.units(topic, queue_id, offset, 1)
            return self.store_timestamp(units[0]) if units else None

        low, end = self.min_offset(topic, queue_id), self.max_offset(topic, queue_id)
        return offset_by_time(low, end, store_time, timestamp)

    def earliest_store_time(self, topic: str, queue_id: int) -> int:
        """``getEarliestMessageTime``: store time of the first message of the queue, -1 when none."""
        units = self.units(topic, queue_id, self.min_offset(topic, queue_id), 1)
        if not units:
            return -1
        value = self.store_timestamp(units[0])
        return -1 if value is None else value

    def earliest_message_time(self) -> int:
        """Store time of the first record in the CommitLog (runtime info), -1 when empty."""
        files = self.writer.commitlog.files
        if not files:
            return -1
        found = self.record_at(files[0].from_offset)
        return found[0].store_timestamp if found else -1

    # --- index --------------------------------------------------------------------------------
    def query(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[bytes]:
        """``queryMessage``: the stored records indexed under ``topic#key`` (newest first)."""
        settings = self.writer.settings
        service = IndexService(
            self.writer.root / INDEX_DIR, settings.max_hash_slot_num, settings.max_index_num
        )
        try:
            offsets = service.query(topic, key, max_num, begin, end)
        finally:
            service.close()
        records = []
        for offset in offsets:
            found = self.record_at(offset)
            if found is not None and found[0].topic == topic:
                records.append(found[1])
        return records

    @property
    def index_last_update(self) -> tuple[int, int]:
        """``(indexLastUpdateTimestamp, indexLastUpdatePhyoffset)`` of the newest index file."""
        files = self.writer.index.files
        if not files:
            return 0, 0
        return files[-1].end_timestamp, files[-1].end_phy_offset

    def close(self) -> None:
        """Flush everything, persist config and close the writer (removes ``abort``), once the
        flush threads are done (``settle`` first, on the loop)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        self.catch_up()
        self.writer.close()


def _retrieved(future: asyncio.Future[None]) -> None:
    """Marks a future's exception as seen (a group commit nobody awaits)."""
    if not future.cancelled():
        future.exception()


def _write_checkpoint(path: Path, stamps: Checkpoint) -> None:
    """The checkpoint file with ``stamps``, fsynced (``StoreCheckpoint.flush``)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, stamps.to_bytes(), 0)
        os.fsync(fd)
    finally:
        os.close(fd)


def _file_at(files: list[WritableFile], offset: int) -> WritableFile | None:
    i = bisect.bisect_right(files, offset, key=lambda f: f.from_offset) - 1
    if i < 0:
        return None
    f = files[i]
    return f if offset < f.from_offset + f.size else None
