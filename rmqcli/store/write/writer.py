"""Write a store as an Apache RocketMQ 4.9.x broker does.

``StoreWriter`` appends records to the CommitLog (``CommitLog.putMessage`` /
``DefaultAppendMessageCallback``, formats.md §1.9-1.11, §1.13), dispatches each one at once to
its consume queue and the index (``ReputMessageService``, formats.md §7), and keeps the
checkpoint (§4), the ``abort``/``lock`` files and the config JSON (§5) up to date. It holds no
global state; the clock and the index file namer are injectable.

In DLedger mode (an ``EntrySink``, 4.9.8's ``DLedgerCommitLog``) each record is the body of an entry
of the member's log, its PHYSICALOFFSET the entry's position + 48; records are dispatched once
their entries are committed (``dispatch_committed``, the reput up to ``committedPos``), never at
the append, and the CommitLog's end is the committed position.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from formats import commitlog as fmt
from rmqcli.durable import fsync_dir
from rmqcli.errors import UsageError
from rmqcli.store.checkpoint import Checkpoint, read_checkpoint
from rmqcli.store.mapped import MappedFileQueue
from rmqcli.store.naming import index_file_name
from rmqcli.store.read.commitlog import CommitLog
from rmqcli.store.settings import StoreSettings
from rmqcli.store.store import (
    ABORT_FILE,
    CHECKPOINT_FILE,
    COMMITLOG_DIR,
    CONFIG_DIR,
    LOCK_FILE,
)
from rmqcli.store.write.config import BrokerConfigState
from rmqcli.store.write.dispatch import Dispatcher, DispatchRequest
from rmqcli.store.write.entry_reput import EntryReput
from rmqcli.store.write.files import DiskFullError, WritableFile, WritableFileQueue
from rmqcli.store.write.index import IndexNamer
from rmqcli.store.write.messages import (
    DEFAULT_STORE_HOST,
    QUEUED_TRANSACTION_TYPES,
    AppendResult,
    BatchAppendResult,
    BatchMessage,
    Host,
    InnerMessage,
    Message,
    apply_delay,
    batch_properties,
    delay_level,
    element_properties,
    inner_from_message,
)
from rmqcli.store.write.records import (
    BLANK_RECORD_SIZE,
    blank_record,
    check_lengths,
    encode_record,
    host_flags,
    record_length,
)

Clock = Callable[[], int]
DEFAULT_CLUSTER = "DefaultCluster"
log = logging.getLogger(__name__)

KEEP_FREE = 4 * 1024 * 1024  # a CommitLog chunk leaves this free for the queues and the index
LOCK_CONTENT = b"lock"  # DefaultMessageStore.start writes these bytes into the lock file
_QUEUED = QUEUED_TRANSACTION_TYPES


def system_clock() -> int:
    """Milliseconds since the epoch (``System.currentTimeMillis``)."""
    return time.time_ns() // 1_000_000


class EntrySink(Protocol):
    """A DLedger log the writer appends to (the member's, through its leader's replication)."""

    data: WritableFileQueue  # the entries' files: records are read from them as from a CommitLog

    def body_position(self, body_size: int) -> int:
        """Where the body of the next entry will be (its position + 48), after any file roll."""

    def append(self, body: bytes) -> None:
        """Append ``body`` as the next entry (a leader's append: replicated, committed by quorum)."""

    @property
    def committed_end(self) -> int:
        """``committedPos``: the end of the last committed entry (0 with none)."""


class StoreWriter:
    """A writable store directory; use as a context manager or call ``close()``.

    An existing store is continued: its end is found like a broker's recovery (last valid
    record), the consume queues and index catch up from the CommitLog, and queue offsets
    continue from the consume queues.
    """

    def __init__(
        self,
        root: Path | str,
        settings: StoreSettings | None = None,
        *,
        clock: Clock = system_clock,
        index_namer: IndexNamer | None = None,
        store_host: Host = DEFAULT_STORE_HOST,
        cluster: str | None = DEFAULT_CLUSTER,
        index_behind: bool = False,
        entries: EntrySink | None = None,
    ):
        self.root = Path(root)
        self.settings = settings or StoreSettings()
        self.clock = clock
        self.store_host = store_host
        self.cluster = cluster
        self._delay_millis = fmt.parse_delay_levels(self.settings.message_delay_level)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock_fd = _take_lock(self.root / LOCK_FILE)
        cl_size = self.settings.mapped_file_size_commitlog
        self.entries = entries
        self.commitlog = (
            entries.data
            if entries is not None
            else WritableFileQueue(self.root / COMMITLOG_DIR, cl_size, KEEP_FREE)
        )
        self.reput: EntryReput | None = None
        self.on_disk_full: Callable[[DiskFullError], None] | None = None  # told before it is raised
        self.queue_offsets: dict[tuple[str, int], int] = {}
        self.index_namer = index_namer or (lambda _ts: index_file_name(self.clock()))
        # index_behind: another worker builds the index of the records there are (index_caught_up)
        self.dispatcher = Dispatcher(self.root, self.settings, self.index_namer, index=not index_behind)
        self.index = self.dispatcher.index
        self.config = BrokerConfigState.load(self.root / CONFIG_DIR)
        self._topic_bytes: dict[str, bytes] = {}
        self._checkpoint = Checkpoint()
        self._last_store_timestamp = 0
        self._pending: list[DispatchRequest] = []  # appended with ``defer_dispatch``
        # a cut made while the index is built behind (truncate_store): its offset, and where index
        # files holding only records cut are moved; applied once the index is caught up
        self._index_cut: tuple[int, Path] | None = None
        self.dispatch_bound: Callable[[], int] | None = None  # records past it wait (release_held)
        self._held: list[DispatchRequest] = []
        self._closed = False
        self._recover()
        (self.root / ABORT_FILE).touch()

    # --- recovery of an existing store ----------------------------------------------------------
    def _recover(self) -> None:
        if (self.root / CHECKPOINT_FILE).exists():
            self._checkpoint = read_checkpoint(self.root / CHECKPOINT_FILE)
            self._last_store_timestamp = self._checkpoint.physic_msg_timestamp
        self.dispatcher.load()
        for key, cq in self.dispatcher.cqs.items():
            self.queue_offsets[key] = cq.max_offset
        if self.entries is not None:
            files = self.commitlog.files
            start = max(self.dispatcher.max_physic_offset, files[0].from_offset if files else 0)
            self.reput = EntryReput(self.commitlog, self.dispatch_replicated, start)
            self.dispatch_committed()
            return
        self.commitlog.open_existing()
        if not self.commitlog.files:
            return
        reader = CommitLog(MappedFileQueue.open(self.commitlog.directory, self.commitlog.file_size))
        try:
            end = reader.max_offset()
            kept: list[WritableFile] = []
            for f in self.commitlog.files:
                if f.from_offset > end or (kept and f.from_offset == end):
                    f.close()  # past the end: left on disk, never written (a broker would delete it)
                    continue
                f.wrote = min(end - f.from_offset, f.size)
                kept.append(f)
            self.commitlog.files = kept
            reput_from = max(self.dispatcher.max_physic_offset, reader.min_offset)
            for rec in reader.records(reput_from):
                if rec.physical_offset >= reput_from:
                    self._dispatch_record(rec)
                self._last_store_timestamp = rec.store_timestamp
            for cq in self.dispatcher.cqs.values():
                cq.correct_min_offset(reader.min_offset)
        finally:
            reader.close()

    def _dispatch_record(self, rec) -> None:
        self._dispatch(DispatchRequest.of(rec))
        if fmt.is_dispatched_to_queue(rec.sys_flag):
            key = (rec.topic, rec.queue_id)
            self.queue_offsets[key] = max(self.queue_offsets.get(key, 0), rec.queue_offset + 1)

    @property
    def index_behind(self) -> bool:
        """The index is built by another worker, up to the records there were (``index_caught_up``)."""
        return not self.dispatcher.build_index and self.settings.message_index_enable

    def index_caught_up(self, built_until: int) -> None:
        """The index files hold the entries of the records before ``built_until`` (built behind the
        CommitLog, as ``ReputMessageService`` catches up after a recovery): open them, index the
        records appended since, and index every record as it is appended from now on."""
        if not self.index_behind:
            return
        self.dispatch_pending()
        self.dispatcher.start_index()
        if self._index_cut is not None:  # the worker may have indexed records cut since it began
            (offset, backup), self._index_cut = self._index_cut, None
            self.cut_index(offset, backup)
            built_until = min(built_until, offset)
        if built_until >= self.max_offset:
            return
        reader = CommitLog(MappedFileQueue.open(self.commitlog.directory, self.commitlog.file_size))
        try:
            for rec in reader.records(built_until):
                if rec.physical_offset >= built_until:
                    self.dispatcher.index_record(rec)
        finally:
            reader.close()

    def cut_index(self, offset: int, backup: Path) -> None:
        """The index keys of the records at or past ``offset`` removed (a CommitLog cut); index
        files holding nothing else are moved into ``backup``. While the index is built behind, the
        cut waits for ``index_caught_up`` (the files are not open, and the worker may still index
        records from before the cut)."""
        if self.index_behind:
            earlier = self._index_cut
            self._index_cut = (offset, backup) if earlier is None or offset < earlier[0] else earlier
            return
        dropped = self.dispatcher.index.cut(offset)
        if dropped:
            backup.mkdir(parents=True, exist_ok=True)
            for path in dropped:
                os.replace(path, backup / path.name)
            fsync_dir(backup)
        self.dispatcher.index.flush()

    def dispatch_committed(self) -> int:
        """DLedger mode: dispatch the records of the entries committed since the last call."""
        if self.reput is None or self.entries is None:
            return 0
        return self.reput.dispatch_to(self.entries.committed_end)

    def reset_queue_offsets(self) -> None:
        """``recoverTopicQueueTable``: the next queue offsets from the consume queues (a new DLedger
        leader, once everything committed is dispatched: what it appended uncommitted was cut)."""
        self.queue_offsets = {key: cq.max_offset for key, cq in self.dispatcher.cqs.items()}

    def dispatch_replicated(self, rec) -> None:
        """A record an HA slave received in its master's bytes (already in ``commitlog``): its
        consume-queue unit and index keys, the queue offset it took, and the checkpoint's CommitLog
        time, as the slave's ``ReputMessageService`` does."""
        self._dispatch_record(rec)
        self._last_store_timestamp = rec.store_timestamp

    # --- appending ------------------------------------------------------------------------------
    def append(self, message: Message, *, defer_dispatch: bool = False) -> AppendResult:
        """A message as received from a producer (``SendMessageProcessor`` + ``CommitLog.putMessage``)."""
        return self.put_message(inner_from_message(message, self.cluster), defer_dispatch=defer_dispatch)

    def put_message(self, inner: InnerMessage, *, defer_dispatch: bool = False) -> AppendResult:
        """``CommitLog.putMessage``: delay rewrite, then one record; dispatched at once, or with
        ``defer_dispatch`` at the next ``dispatch_pending`` (the reput runs behind the CommitLog, as
        ``ReputMessageService`` does, so a broker can answer the send first)."""
        apply_delay(inner, len(self._delay_millis))
        props = inner.properties_string
        if props is None:
            props = fmt.encode_properties_as_broker(inner.properties)
            dispatch_props: dict[str, str] | bytes = inner.properties
        else:
            dispatch_props = props  # decoded from the stored string, as the reput service does
        store_host = inner.store_host or self.store_host
        physical, queue_offset, length, store_ts = self.write_record(
            inner.topic,
            inner.queue_id,
            inner.body,
            props,
            dispatch_props,
            flag=inner.flag,
            sys_flag=inner.sys_flag,
            born_timestamp=inner.born_timestamp,
            born_host=inner.born_host,
            store_host=store_host,
            reconsume_times=inner.reconsume_times,
            prepared_transaction_offset=inner.prepared_transaction_offset,
            store_timestamp=inner.store_timestamp,
            defer_dispatch=defer_dispatch,
        )
        return AppendResult(physical, queue_offset, length, store_ts, inner.topic, inner.queue_id, store_host)

    def write_record(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        properties: bytes,
        dispatch_props: dict[str, str] | bytes,
        *,
        flag: int,
        sys_flag: int,
        born_timestamp: int,
        born_host: Host,
        store_host: Host,
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
        store_timestamp: int | None = None,
        defer_dispatch: bool = False,
    ) -> tuple[int, int, int, int]:
        """One record of a message whose properties are serialised (``properties``, stored as
        given; ``dispatch_props`` is the map the reput sees, or the same bytes to decode then):
        ``(physical offset, queue offset, size, store timestamp)``. The host bits of ``sys_flag``
        are set from the hosts."""
        if not defer_dispatch:
            self.dispatch_pending()  # records are dispatched in CommitLog order
        sys_flag = (sys_flag & ~fmt.HOST_FLAGS) | host_flags(born_host.is_v6, store_host.is_v6)
        topic_bytes = self._encode_topic(topic)
        check_lengths(topic_bytes, properties)
        length = record_length(sys_flag, body, topic_bytes, properties)
        store_ts = self.clock() if store_timestamp is None else store_timestamp
        if self.entries is not None:
            mf = None
            physical = self.entries.body_position(length)
        else:
            mf = self._file_for(length)
            physical = mf.from_offset + mf.wrote
        queue_offset = self._take_queue_offset(topic, queue_id, sys_flag, 1)
        record = encode_record(
            sys_flag=sys_flag,
            queue_id=queue_id,
            flag=flag,
            queue_offset=queue_offset,
            physical_offset=physical,
            born_timestamp=born_timestamp,
            born_host=(born_host.address, born_host.port),
            store_timestamp=store_ts,
            store_host=(store_host.address, store_host.port),
            reconsume_times=reconsume_times,
            prepared_transaction_offset=prepared_transaction_offset,
            body=body,
            topic=topic_bytes,
            properties=properties,
        )
        self._last_store_timestamp = store_ts
        if mf is None:
            assert self.entries is not None
            self.entries.append(record)  # dispatched once committed
            return physical, queue_offset, length, store_ts
        mf.append(record)
        req = DispatchRequest(
            topic, queue_id, physical, length, queue_offset, sys_flag, store_ts, dispatch_props
        )
        if defer_dispatch:
            self._pending.append(req)
        else:
            self._dispatch(req)
        return physical, queue_offset, length, store_ts

    def dispatch_pending(self) -> None:
        """Dispatch the records appended with ``defer_dispatch``, in order (a no-op when none wait)."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        for req in pending:
            self._dispatch(req)

    def append_batch(self, batch: BatchMessage) -> BatchAppendResult:
        """A classic batch: one record per element, contiguous, one store timestamp (formats.md §1.11)."""
        self.dispatch_pending()
        if fmt.transaction_type(batch.sys_flag) != fmt.TransactionType.NOT_TYPE:
            raise UsageError("a batch cannot be transactional")
        if delay_level(batch.properties) > 0:
            raise UsageError("a batch cannot be delayed")
        if not batch.elements:
            raise UsageError("empty batch")
        store_host = batch.store_host or self.store_host
        sys_flag = (batch.sys_flag & ~fmt.HOST_FLAGS) | host_flags(batch.born_host.is_v6, store_host.is_v6)
        topic = self._encode_topic(batch.topic)
        shared = batch_properties(batch, self.cluster)
        props_list = [element_properties(e, shared) for e in batch.elements]
        lengths = []
        for element, props in zip(batch.elements, props_list, strict=True):
            check_lengths(topic, props)
            lengths.append(record_length(sys_flag, element.body, topic, props))
        store_ts = self.clock() if batch.store_timestamp is None else batch.store_timestamp
        mf = None if self.entries is not None else self._file_for(sum(lengths))
        first_queue_offset = self._take_queue_offset(batch.topic, batch.queue_id, sys_flag, len(lengths))
        chunks = []
        results = []
        physical = mf.from_offset + mf.wrote if mf is not None else 0
        for i, (element, props, length) in enumerate(zip(batch.elements, props_list, lengths, strict=True)):
            if self.entries is not None:  # DLedger: one entry per message (BatchAppendEntryRequest)
                physical = self.entries.body_position(length)
            chunk = encode_record(
                sys_flag=sys_flag,
                queue_id=batch.queue_id,
                flag=element.flag,
                queue_offset=first_queue_offset + i,
                physical_offset=physical,
                born_timestamp=batch.born_timestamp,
                born_host=(batch.born_host.address, batch.born_host.port),
                store_timestamp=store_ts,
                store_host=(store_host.address, store_host.port),
                reconsume_times=batch.reconsume_times,
                prepared_transaction_offset=0,
                body=element.body,
                topic=topic,
                properties=props,
            )
            if self.entries is not None:
                self.entries.append(chunk)
            else:
                chunks.append(chunk)
            where = (batch.topic, batch.queue_id, store_host)
            results.append(AppendResult(physical, first_queue_offset + i, length, store_ts, *where))
            physical += length
        self._last_store_timestamp = store_ts
        if mf is None:
            return BatchAppendResult(results)  # dispatched once committed
        mf.append(b"".join(chunks))
        for r, props in zip(results, props_list, strict=True):
            self._dispatch(
                DispatchRequest(
                    r.topic, r.queue_id, r.physical_offset, r.size, r.queue_offset, sys_flag, store_ts, props
                )
            )
        return BatchAppendResult(results)

    def _encode_topic(self, topic: str) -> bytes:
        cached = self._topic_bytes.get(topic)
        if cached is None:
            cached = self._topic_bytes[topic] = topic.encode("utf-8")
        return cached

    def _take_queue_offset(self, topic: str, queue_id: int, sys_flag: int, count: int) -> int:
        """``topicQueueTable``: 0 (and no increment) for PREPARED/ROLLBACK (formats.md §1.9)."""
        if sys_flag & fmt.TRANSACTION_MASK not in _QUEUED:
            return 0
        key = (topic, queue_id)
        offset = self.queue_offsets.get(key, 0)
        self.queue_offsets[key] = offset + count
        return offset

    def _file_for(self, length: int) -> WritableFile:
        """The file to append ``length`` bytes to, their blocks reserved; ends a file with a BLANK
        when they do not fit. A full disk (``DiskFullError``) is told to ``on_disk_full`` first."""
        files = self.commitlog.files
        if files and files[-1].size - files[-1].wrote >= length + BLANK_RECORD_SIZE:
            mf = files[-1]  # the usual case: room left in the last file
            if not mf.reserved(length):
                self._reserve(mf, length)
            return mf
        if length + BLANK_RECORD_SIZE > self.commitlog.file_size:
            raise UsageError(f"a {length}-byte record does not fit a {self.commitlog.file_size}-byte file")
        try:
            mf = self.commitlog.last_for(self.commitlog.max_offset)
            if length + BLANK_RECORD_SIZE > mf.remaining:
                remaining = mf.remaining
                mf.write_at(mf.wrote, blank_record(remaining))
                mf.wrote = mf.size
                mf = self.commitlog.last_for(self.commitlog.max_offset)
        except DiskFullError as exc:
            self._out_of_space(exc)
            raise
        except OSError as exc:
            log.error(
                "CommitLog: cannot create or map the next file in %s: %s", self.commitlog.directory, exc
            )
            raise
        self._reserve(mf, length)
        return mf

    def _reserve(self, mf: WritableFile, length: int) -> None:
        try:
            mf.reserve(mf.wrote, mf.wrote + length)
        except DiskFullError as exc:
            self._out_of_space(exc)
            raise

    def _out_of_space(self, exc: DiskFullError) -> None:
        if self.on_disk_full is not None:
            self.on_disk_full(exc)

    # --- dispatch -------------------------------------------------------------------------------
    def _dispatch(self, req: DispatchRequest) -> None:
        """Reput right after the append; a queued record also registers its topic in topics.json.
        With a ``dispatch_bound`` (controller mode's confirm offset) a record that ends past it
        is held, in order, until ``release_held``."""
        if self.dispatch_bound is not None and (
            self._held or req.physical_offset + req.size > self.dispatch_bound()
        ):
            self._held.append(req)
            return
        self._dispatch_now(req)

    def release_held(self, everything: bool = False) -> list[DispatchRequest]:
        """Dispatch the held records that end within the bound now (all with ``everything``), in
        order; the ones dispatched."""
        if not self._held:
            return []
        bound = None if everything or self.dispatch_bound is None else self.dispatch_bound()
        count = 0
        for req in self._held:
            if bound is not None and req.physical_offset + req.size > bound:
                break
            self._dispatch_now(req)
            count += 1
        released, self._held = self._held[:count], self._held[count:]
        return released

    def drop_held(self, offset: int) -> None:
        """The CommitLog was cut at ``offset``: held records from there on are gone."""
        self._held = [req for req in self._held if req.physical_offset + req.size <= offset]

    def _dispatch_now(self, req: DispatchRequest) -> None:
        if self.dispatcher.dispatch(req):
            self._checkpoint.logics_msg_timestamp = req.store_timestamp
            self.config.ensure_topic(req.topic, req.queue_id, self.clock, len(self._delay_millis))

    # --- state ----------------------------------------------------------------------------------
    @property
    def max_offset(self) -> int:
        """Global CommitLog offset after the last record (``getMaxPhyOffset``; DLedger: committedPos)."""
        if self.entries is not None:
            return self.entries.committed_end
        return self.commitlog.max_offset

    def queue_max_offset(self, topic: str, queue_id: int) -> int:
        """``maxOffsetInQueue``: the next queue offset of a consume queue (0 when there is none)."""
        self.dispatch_pending()
        cq = self.dispatcher.cqs.get((topic, queue_id))
        return cq.max_offset if cq else 0

    @property
    def checkpoint(self) -> Checkpoint:
        """The checkpoint as the next flush writes it."""
        self.dispatch_pending()
        return Checkpoint(
            self._last_store_timestamp,
            self._checkpoint.logics_msg_timestamp,
            max(self.index.completed_end_timestamp, self._checkpoint.index_msg_timestamp),
            # controller mode: the confirm offset (its dispatch bound), as 5.1.1 keeps it at byte 32
            confirm_phy_offset=self.dispatch_bound() if self.dispatch_bound is not None else 0,
        )

    # --- config ---------------------------------------------------------------------------------
    def create_topic(self, name: str, queue_nums: int, *, order: bool = False, perm: int = 6) -> None:
        self.config.set_topic(name, queue_nums, self.clock(), perm=perm, order=order)

    def create_group(self, name: str) -> None:
        self.config.set_group(name, self.clock())

    def set_consumer_offset(self, topic: str, group: str, queue_id: int, offset: int) -> None:
        self.config.set_consumer_offset(topic, group, queue_id, offset)

    def set_delay_offset(self, level: int, offset: int) -> None:
        """delayOffset.json: next offset to deliver in ``SCHEDULE_TOPIC_XXXX`` queue ``level-1``."""
        self.config.delay_offsets[level] = offset

    # --- flush and close ------------------------------------------------------------------------
    def flush(self, *, config: bool = True) -> None:
        """Everything to disk with fsync: CommitLog, consume queues, index, checkpoint, and the
        config files unless their owner writes them (``config=False``: the broker's config writer)."""
        self.dispatch_pending()
        self.commitlog.flush()
        self.dispatcher.flush()
        self._write_checkpoint()
        if config:
            self.config.write(self.root / CONFIG_DIR)
        fsync_dir(self.root)

    def flush_checkpoint(self) -> None:
        """Write and fsync the checkpoint as it stands; call it once what it vouches for is flushed."""
        self._write_checkpoint()

    def _write_checkpoint(self) -> None:
        path = self.root / CHECKPOINT_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, self.checkpoint.to_bytes(), 0)
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Flush, unmap, remove ``abort`` (a clean shutdown) and release the lock."""
        if self._closed:
            return
        self.flush()
        self.commitlog.close()
        self.dispatcher.close()
        (self.root / ABORT_FILE).unlink(missing_ok=True)
        fsync_dir(self.root)
        os.close(self._lock_fd)
        self._closed = True

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _take_lock(path: Path) -> int:
    """``DefaultMessageStore.start``: a POSIX lock on byte 0 of ``lock``, which holds ``lock``."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
    except OSError as exc:
        os.close(fd)
        raise UsageError(f"{path}: the store is in use (lock held)") from exc
    os.pwrite(fd, LOCK_CONTENT, 0)
    return fd
