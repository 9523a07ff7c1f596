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

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqcli.errors import CorruptDataError, NotFoundError, UnsafeNameError
from rmqcli.store import Store
from rmqcli.store.configfiles import OFFSETS, TOPICS, load_config, parse_consumer_offsets
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
        return {
            "group": self.group,
            "topic": self.topic,
            "queueId": self.queue_id,
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "diff": self.diff,
            "minOffset": self.min_offset,
            "lastTimestamp": self.last_time,
            "oldestUnconsumedTimestamp": self.oldest_unconsumed,
            "flags": self.flags,
        }


class _Queues:
    """Min and max offsets of the store's queues, each computed once."""

    def __init__(self, store: Store):
        self.store = store
        self.low = store.commitlog.min_offset if store.commitlog.files else 0
        self._bounds: dict[tuple[str, int], tuple[int, int]] = {}

    def bounds(self, topic: str, queue_id: int) -> tuple[int, int]:
        key = (topic, queue_id)
        if key not in self._bounds:
            try:
                cq = self.store.consume_queue(topic, queue_id)
                self._bounds[key] = (cq.min_offset(self.low), cq.max_offset) if cq.files else (0, 0)
            except UnsafeNameError:
                self._bounds[key] = (0, 0)
        return self._bounds[key]

    def store_time(self, topic: str, queue_id: int, queue_offset: int) -> int | None:
        """The store time of the message at ``queue_offset``, None when it is not in the store."""
        try:
            unit = self.store.consume_queue(topic, queue_id).unit(queue_offset)
        except (NotFoundError, CorruptDataError, UnsafeNameError):
            return None
        return self.store.commitlog.store_timestamp(unit.commitlog_offset)


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
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        parts = list(pool.map(_rows_of, [(store.root, store.settings, chunk) for chunk in chunks]))
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
