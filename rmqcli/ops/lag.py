"""``rmq lag``: each consumer group's progress, read from a store without a broker.

The rows are those of a 4.9.8 broker's GET_CONSUME_STATS (``consumerProgress``): for every group in
``config/consumerOffset.json`` and every topic it committed offsets for (``whichTopicByConsumer``)
that ``config/topics.json`` still has, every read queue of the topic: the broker offset (the queue's
max offset, as the broker's recovery counts it), the consumer offset (0 when none was committed),
their difference, and the store time of the last message consumed. Added here: the queue's minimum
offset (``correctMinOffset`` against the CommitLog's minimum), the store time of the oldest message
not yet consumed, and two flags: ``below-min`` (the committed offset points at messages already
deleted: the group skips them) and ``past-max`` (it points past the queue's end: the group misses the
messages sent until the queue grows past it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqcli.errors import CorruptDataError, NotFoundError, UnsafeNameError
from rmqcli.remoting.javanames import camel_fields
from rmqcli.store import Store
from rmqcli.store.configfiles import OFFSETS, TOPICS, load_config, parse_consumer_offsets
from rmqcli.store.naming import consume_queue_dir, topic_dir
from rmqcli.store.read.queueends import QueueEnds, queue_ends
from rmqcli.store.settings import StoreSettings
from rmqcli.store.store import CONFIG_DIR

BELOW_MIN = "below-min"
PAST_MAX = "past-max"


@dataclass(frozen=True)
class LagRow:
    group: str
    topic: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    min_offset: int
    last_time: int | None  # store time of the last message consumed
    oldest_unconsumed: int | None  # store time of the first message not consumed yet
    committed: bool  # the group committed an offset for this queue

    @property
    def diff(self) -> int:
        return self.broker_offset - self.consumer_offset

    @property
    def flags(self) -> list[str]:
        flags = []
        if self.committed and self.consumer_offset < self.min_offset:
            flags.append(BELOW_MIN)
        if self.consumer_offset > self.broker_offset:
            flags.append(PAST_MAX)
        return flags

    def to_dict(self) -> dict[str, Any]:
        return camel_fields(
            self, "group", "topic", "queue_id", "broker_offset", "consumer_offset", "diff", "min_offset",
            "lastTimestamp=last_time", "oldestUnconsumedTimestamp=oldest_unconsumed", "flags",
        )  # fmt: skip


class _Queues:
    """Min and max offsets of the store's queues, each read once (``queueends``, lean: a report
    may cover tens of thousands of queues)."""

    def __init__(self, store: Store):
        self.store = store
        self.low = store.commitlog.min_offset if store.commitlog.files else 0
        self.file_size = store.settings.mapped_file_size_consume_queue
        if "mapped_file_size_consume_queue" not in store.settings.explicit:
            self.file_size = None
        self._topic_dirs: dict[str, str | None] = {}
        self._ends: dict[tuple[str, int], QueueEnds | None] = {}

    def _directory(self, topic: str, queue_id: int) -> str | None:
        """The queue's directory, inside ``consumequeue/`` (``naming``); None for a name that
        cannot be one."""
        if topic not in self._topic_dirs:
            try:
                self._topic_dirs[topic] = str(topic_dir(self.store.root, topic))
            except UnsafeNameError:
                self._topic_dirs[topic] = None
        base = self._topic_dirs[topic]
        if base is None:
            return None
        directory = os.path.join(base, str(queue_id))
        if os.path.islink(directory):  # a link may lead anywhere: checked as every queue path is
            try:
                return str(consume_queue_dir(self.store.root, topic, queue_id))
            except UnsafeNameError:
                return None
        return directory

    def ends(self, topic: str, queue_id: int) -> QueueEnds | None:
        key = (topic, queue_id)
        if key not in self._ends:
            directory = self._directory(topic, queue_id)
            self._ends[key] = None if directory is None else queue_ends(directory, self.file_size, self.low)
        return self._ends[key]

    def bounds(self, topic: str, queue_id: int) -> tuple[int, int]:
        ends = self.ends(topic, queue_id)
        return (0, 0) if ends is None else (ends.min_offset, ends.max_offset)

    def store_time(self, topic: str, queue_id: int, queue_offset: int) -> int | None:
        """The store time of the message at ``queue_offset``, None when it is not in the store."""
        ends = self.ends(topic, queue_id)
        offset = None if ends is None else ends.commitlog_offset(queue_offset)
        if offset is None:
            return None
        try:
            return self.store.commitlog.store_timestamp(offset)
        except (NotFoundError, CorruptDataError):
            return None


Work = tuple[str, str, dict[int, int], int]  # group, topic, committed offsets, read queues
PARALLEL_QUEUES = 2_000  # from this many queues on, the rows are computed by several processes


def lag_rows(store: Store, group: str | None = None, topic: str | None = None) -> Iterator[LagRow]:
    """Rows sorted by group, then topic and queue (``consumerProgress`` sorts its queues so)."""
    offsets = parse_consumer_offsets(
        load_config(store.root / CONFIG_DIR, OFFSETS).data, f"{CONFIG_DIR}/{OFFSETS}"
    )
    topics = load_config(store.root / CONFIG_DIR, TOPICS).data.get("topicConfigTable", {})
    by_group: dict[str, list[str]] = {}
    for name, owner in offsets:
        if (group is None or owner == group) and (topic is None or name == topic) and name in topics:
            by_group.setdefault(owner, []).append(name)
    work: list[Work] = [
        (owner, name, offsets[(name, owner)], int(topics[name].get("readQueueNums", 0)))
        for owner in sorted(by_group)
        for name in sorted(by_group[owner])
    ]
    workers = _workers(sum(w[3] for w in work))
    if workers <= 1:
        yield from _rows(store, work)
        return
    import concurrent.futures
    import multiprocessing

    chunks = [work[i::workers] for i in range(workers)]  # interleaved: each gets a share of big topics
    context = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(workers - 1, mp_context=context) as pool:
        others = pool.map(_rows_of, [(store.root, store.settings, chunk) for chunk in chunks[1:]])
        parts = [list(_rows(store, chunks[0])), *others]  # this process takes the first share
    merged = {(row.group, row.topic, row.queue_id): row for part in parts for row in part}
    for owner, name, _, queues in work:
        for queue_id in range(queues):
            yield merged[(owner, name, queue_id)]


def _workers(queues: int) -> int:
    """Processes for ``queues`` queues: one below ``PARALLEL_QUEUES`` or where fork is missing."""
    import multiprocessing
    import os

    if queues < PARALLEL_QUEUES or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(os.cpu_count() or 1, 8, queues // (PARALLEL_QUEUES // 2)))


def _rows_of(task: tuple[Path, StoreSettings, list[Work]]) -> list[LagRow]:
    root, settings, work = task
    store = Store(root, settings)
    try:
        return list(_rows(store, work))
    finally:
        store.close()


def _rows(store: Store, work: list[Work]) -> Iterator[LagRow]:
    queues = _Queues(store)
    for owner, name, committed, read_queues in work:
        for queue_id in range(read_queues):
            low, high = queues.bounds(name, queue_id)
            consumer = max(committed.get(queue_id, 0), 0)
            first_unread = max(consumer, low)
            yield LagRow(
                group=owner,
                topic=name,
                queue_id=queue_id,
                broker_offset=max(high, 0),
                consumer_offset=consumer,
                min_offset=low,
                last_time=queues.store_time(name, queue_id, consumer - 1) if consumer > 0 else None,
                oldest_unconsumed=queues.store_time(name, queue_id, first_unread)
                if first_unread < high
                else None,
                committed=queue_id in committed,
            )
