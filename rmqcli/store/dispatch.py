"""Dispatch CommitLog records to consume queues and index files, as a broker's reput does.

``ReputMessageService.doDispatch`` (FORMATS.md §7): ``CommitLogDispatcherBuildConsumeQueue``
(NOT and COMMIT transaction types only; the tags code of a delay record is its delivery time)
then ``CommitLogDispatcherBuildIndex`` (every type but ROLLBACK; UNIQ_KEY then each KEYS token).
Used by the store writer (right after each append) and by offline rebuild and recovery.
"""

from __future__ import annotations

from pathlib import Path

from formats import commitlog as fmt
from rmqcli.store.commitlog import Record
from rmqcli.store.settings import StoreSettings
from rmqcli.store.store import CONSUMEQUEUE_DIR, INDEX_DIR
from rmqcli.store.writer_cq import ConsumeQueueWriter
from rmqcli.store.writer_index import IndexNamer, IndexWriter
from rmqcli.store.writer_messages import INDEXED_TRANSACTION_TYPES, QUEUED_TRANSACTION_TYPES


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
        self.index = IndexWriter(
            self.root / INDEX_DIR, settings.max_hash_slot_num, settings.max_index_num, index_namer
        )
        self.logics_msg_timestamp = 0  # store time of the last unit written (checkpoint)

    def queue(self, topic: str, queue_id: int) -> ConsumeQueueWriter:
        key = (topic, queue_id)
        cq = self.cqs.get(key)
        if cq is None:
            directory = self.root / CONSUMEQUEUE_DIR / topic / str(queue_id)
            cq = self.cqs[key] = ConsumeQueueWriter(directory, self.settings.mapped_file_size_consume_queue)
        return cq

    def load(self) -> None:
        """Open what is already there: ``ConsumeQueue.recover`` for each queue, the index files."""
        cq_root = self.root / CONSUMEQUEUE_DIR
        if cq_root.is_dir():
            for tdir in sorted(p for p in cq_root.iterdir() if p.is_dir()):
                for qdir in sorted(p for p in tdir.iterdir() if p.is_dir() and p.name.isdigit()):
                    self.queue(tdir.name, int(qdir.name)).recover()
        self.index.load()

    @property
    def max_physic_offset(self) -> int:
        """``max over queues of maxPhysicOffset`` (-1 without units): where reput resumes."""
        return max([cq.max_physic_offset for cq in self.cqs.values()] + [-1])

    def dispatch(
        self,
        topic: str,
        queue_id: int,
        physical: int,
        size: int,
        queue_offset: int,
        sys_flag: int,
        store_ts: int,
        props: dict[str, str],
    ) -> bool:
        """Dispatch one record; True when its type puts it in a consume queue."""
        if self.topic is not None and topic != self.topic:
            return False
        tran = sys_flag & fmt.TRANSACTION_MASK
        queued = tran in QUEUED_TRANSACTION_TYPES
        if queued and self.build_queues:
            tags = fmt.dispatch_tags_code(topic, props, store_ts, self.delay_millis)
            self.queue(topic, queue_id).put(physical, size, tags, queue_offset)
            self.logics_msg_timestamp = store_ts
        if self.build_index and tran in INDEXED_TRANSACTION_TYPES:
            self.index.build_index(
                topic,
                physical,
                store_ts,
                sys_flag,
                props.get(fmt.PROPERTY_UNIQ_KEY) or None,
                props.get(fmt.PROPERTY_KEYS),
            )
        return queued

    def dispatch_record(self, rec: Record) -> bool:
        return self.dispatch(
            rec.topic, rec.queue_id, rec.physical_offset, rec.total_size, rec.queue_offset,
            rec.sys_flag, rec.store_timestamp, rec.properties,
        )  # fmt: skip

    def flush(self) -> None:
        for cq in self.cqs.values():
            cq.flush()
        self.index.flush()

    def close(self) -> None:
        for cq in self.cqs.values():
            cq.close()
        self.index.close()
