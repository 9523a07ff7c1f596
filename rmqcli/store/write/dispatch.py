"""Dispatch CommitLog records to consume queues and index files, as a broker's reput does.

``ReputMessageService.doDispatch`` (formats.md §7): ``CommitLogDispatcherBuildConsumeQueue``
(NOT and COMMIT transaction types only; the tags code of a delay record is its delivery time)
then ``CommitLogDispatcherBuildIndex`` (every type but ROLLBACK; UNIQ_KEY then each KEYS token).
Used by the store writer (right after each append) and by offline rebuild and recovery.

A record whose topic cannot name a directory under ``consumequeue/`` (``naming.topic_dir_problem``:
``..``, a ``/``, a NUL, ...) goes to no consume queue: a broker would create its queue outside the
store or fail. It is indexed as any other (the index holds no name as a path) and counted in
``unsafe``, per topic, for the caller to report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from formats import commitlog as fmt
from rmqcli.store.naming import CONSUMEQUEUE_DIR, consume_queue_dir, topic_dir_problem
from rmqcli.store.read.commitlog import Record
from rmqcli.store.settings import StoreSettings
from rmqcli.store.store import INDEX_DIR
from rmqcli.store.write.cq import ConsumeQueueWriter
from rmqcli.store.write.index import IndexNamer, IndexWriter
from rmqcli.store.write.messages import INDEXED_TRANSACTION_TYPES, QUEUED_TRANSACTION_TYPES


class DispatchRequest(NamedTuple):
    """One record as the reput hands it to the dispatchers (RocketMQ's ``DispatchRequest``)."""

    topic: str
    queue_id: int
    physical_offset: int  # commitLogOffset
    size: int  # msgSize
    queue_offset: int  # consumeQueueOffset
    sys_flag: int
    store_timestamp: int
    # the properties map, or the stored properties string: decoded when dispatched, as the reput
    # service reads it back from the CommitLog
    properties: dict[str, str] | bytes

    @classmethod
    def of(cls, rec: Record) -> DispatchRequest:
        """The request of a record read back from the CommitLog."""
        return cls(
            rec.topic, rec.queue_id, rec.physical_offset, rec.total_size, rec.queue_offset,
            rec.sys_flag, rec.store_timestamp, rec.properties,
        )  # fmt: skip

    def property_map(self) -> dict[str, str]:
        props = self.properties
        return fmt.decode_properties(props) if isinstance(props, bytes) else props


@dataclass
class UnsafeTopic:
    """The records of one topic that went to no consume queue: its name cannot be a directory there."""

    topic: str
    reason: str  # ``naming.topic_dir_problem``
    records: int = 0
    first_offset: int = -1  # CommitLog offset of the first such record
    last_offset: int = -1  # ... and of the last one
    queue_ids: set[int] = field(default_factory=set)

    def add(self, first: int, last: int, count: int, queue_ids: list[int]) -> None:
        """``count`` records from CommitLog offset ``first`` to ``last``; records dispatched again
        (at or before the last one counted, as a recovery's reput may) are not counted twice."""
        if last <= self.last_offset:
            return
        if self.records == 0:
            self.first_offset = first
        self.records += count
        self.last_offset = last
        self.queue_ids.update(queue_ids)


def note_unsafe(
    unsafe: dict[str, UnsafeTopic],
    topic: str,
    first: int,
    queue_ids: list[int],
    count: int = 1,
    last: int = -1,
) -> bool:
    """Count ``count`` records of ``topic`` (CommitLog offsets ``first`` .. ``last``, in order) when
    the topic cannot name a queue directory; returns whether it cannot."""
    entry = unsafe.get(topic)
    if entry is None:
        reason = topic_dir_problem(topic)
        if reason is None:
            return False
        entry = unsafe[topic] = UnsafeTopic(topic, reason)
    entry.add(first, max(first, last), count, queue_ids)
    return True


class Dispatcher:
    """Consume-queue and index writers over ``root`` (``root/consumequeue``, ``root/index``)."""

    def __init__(
        self,
        root: Path,
        settings: StoreSettings,
        index_namer: IndexNamer,
        *,
        consume_queues: bool = True,
        index: bool = True,
        topic: str | None = None,
    ):
        self.root = Path(root)
        self.settings = settings
        self.delay_millis = fmt.parse_delay_levels(settings.message_delay_level)
        self.build_queues = consume_queues
        self.build_index = index and settings.message_index_enable
        self.topic = topic
        self.cqs: dict[tuple[str, int], ConsumeQueueWriter] = {}
        self.unsafe: dict[str, UnsafeTopic] = {}  # topics whose records went to no queue
        self.index = IndexWriter(
            self.root / INDEX_DIR, settings.max_hash_slot_num, settings.max_index_num, index_namer
        )
        self.logics_msg_timestamp = 0  # store time of the last unit written (checkpoint)

    def queue(self, topic: str, queue_id: int) -> ConsumeQueueWriter:
        key = (topic, queue_id)
        cq = self.cqs.get(key)
        if cq is None:
            directory = consume_queue_dir(self.root, topic, queue_id)  # UnsafeNameError
            cq = self.cqs[key] = ConsumeQueueWriter(directory, self.settings.mapped_file_size_consume_queue)
        return cq

    def load(self) -> None:
        """Open what is already there: ``ConsumeQueue.recover`` for each queue, the index files."""
        cq_root = self.root / CONSUMEQUEUE_DIR
        if cq_root.is_dir():
            for tdir in sorted(p for p in cq_root.iterdir() if p.is_dir()):
                for qdir in sorted(p for p in tdir.iterdir() if p.is_dir() and p.name.isdigit()):
                    self.queue(tdir.name, int(qdir.name)).recover()
        if self.build_index:  # a dispatcher that builds no index leaves its files alone
            self.index.load()

    def start_index(self) -> None:
        """Build the index from now on (``index`` was off): open the index files as they are now."""
        if not self.build_index and self.settings.message_index_enable:
            self.build_index = True
            self.index.load()

    @property
    def max_physic_offset(self) -> int:
        """``max over queues of maxPhysicOffset`` (-1 without units): where reput resumes."""
        return max([cq.max_physic_offset for cq in self.cqs.values()] + [-1])

    def dispatch(self, req: DispatchRequest) -> bool:
        """Dispatch one record; True when it went to a consume queue (its type puts it in one and
        its topic can name one)."""
        topic = req.topic
        if self.topic is not None and topic != self.topic:
            return False
        props = req.property_map()
        tran = req.sys_flag & fmt.TRANSACTION_MASK
        queued = tran in QUEUED_TRANSACTION_TYPES
        if queued and self.build_queues:
            cq = self.cqs.get((topic, req.queue_id))
            if cq is None and note_unsafe(self.unsafe, topic, req.physical_offset, [req.queue_id]):
                queued = False
            else:
                tags = fmt.dispatch_tags_code(topic, props, req.store_timestamp, self.delay_millis)
                cq = cq or self.queue(topic, req.queue_id)
                cq.put(req.physical_offset, req.size, tags, req.queue_offset)
                self.logics_msg_timestamp = req.store_timestamp
        if self.build_index and tran in INDEXED_TRANSACTION_TYPES:
            self._index(req, props)
        return queued

    def _index(self, req: DispatchRequest, props: dict[str, str]) -> None:
        self.index.build_index(
            req.topic,
            req.physical_offset,
            req.store_timestamp,
            req.sys_flag,
            props.get(fmt.PROPERTY_UNIQ_KEY) or None,
            props.get(fmt.PROPERTY_KEYS),
        )

    def index_record(self, rec: Record) -> None:
        """``CommitLogDispatcherBuildIndex`` alone, for a record whose queue unit is written."""
        req = DispatchRequest.of(rec)
        if self.build_index and req.sys_flag & fmt.TRANSACTION_MASK in INDEXED_TRANSACTION_TYPES:
            if self.topic is None or req.topic == self.topic:
                self._index(req, req.property_map())

    def dispatch_record(self, rec: Record) -> bool:
        return self.dispatch(DispatchRequest.of(rec))

    def flush(self) -> None:
        for cq in self.cqs.values():
            cq.flush()
        self.index.flush()

    def close(self) -> None:
        for cq in self.cqs.values():
            cq.close()
        self.index.close()
