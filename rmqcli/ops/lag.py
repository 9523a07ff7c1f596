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

In a RocketMQ 5 controller-mode store (``rmqcli.store.confirm``) a queue's max offset counts only
the units whose records end at or before the checkpoint's confirmPhyOffset: what the group serves.
A running 5.1.1 broker builds no unit past its confirm offset (``ReputMessageService`` stops at
``CommitLog.getConfirmOffset``), so units past the stored value exist where the consume queue was
flushed after the checkpoint (a broker killed before ``StoreCheckpoint.flush``: the master alone in
its SyncStateSet of an unclean election). Their records may be lacking on the other replicas: the
elected master answers without them (``topicStatus``), and this broker truncates them when it
rejoins as its slave (``AutoSwitchHAClient`` -> ``DefaultMessageStore.truncateFiles``, consume
queues included). 5.1.1's own recovery does not cut them (``CommitLog.recoverNormally`` and
``recoverAbnormally`` cut consume queues at the log's end only): each row counts them
(``unconfirmed``) rather than dropping them silently.
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
    unconfirmed: int = 0  # units past a controller-mode store's confirm boundary, not counted

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
            "lastTimestamp=last_time", "oldestUnconsumedTimestamp=oldest_unconsumed", "flags", "unconfirmed",
        )  # fmt: skip


class _Queues:
    """Min and max offsets of the store's queues, each read once (``queueends``, lean: a report
    may cover tens of thousands of queues)."""

    def __init__(self, store: Store, boundary: int | None = None):
        self.store = store
        self.boundary = boundary  # a controller-mode store's first unconfirmed record, when any
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

    def bounds(self, topic: str, queue_id: int) -> tuple[int, int, int]:
        """Min offset, max offset (cut at the confirm boundary) and the units cut."""
        ends = self.ends(topic, queue_id)
        if ends is None:
            return 0, 0, 0
        high = self.confirmed_end(ends)
        return ends.min_offset, high, ends.max_offset - high

    def confirmed_end(self, ends: QueueEnds) -> int:
        """The queue offset of the first unit pointing at or past the confirm boundary (the max
        offset when none does): units are in CommitLog order, so a bisection over the valid units,
        one read when the last unit is confirmed."""
        low, high = ends.min_offset, ends.max_offset
        if self.boundary is None or high <= low or self._confirmed(ends, high - 1):
            return high
        while low < high:  # the first unit not confirmed lies in [low, high)
            middle = (low + high) // 2
            if self._confirmed(ends, middle):
                low = middle + 1
            else:
                high = middle
        return low

    def _confirmed(self, ends: QueueEnds, queue_offset: int) -> bool:
        offset = ends.commitlog_offset(queue_offset)
        return offset is None or self.boundary is None or offset < self.boundary

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
    boundary = store.unconfirmed_from()
    workers = _workers(sum(w[3] for w in work))
    if workers <= 1:
        yield from _rows(store, work, boundary)
        return
    import concurrent.futures
    import multiprocessing

    chunks = [work[i::workers] for i in range(workers)]  # interleaved: each gets a share of big topics
    context = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(workers - 1, mp_context=context) as pool:
        others = pool.map(_rows_of, [(store.root, store.settings, boundary, chunk) for chunk in chunks[1:]])
        parts = [list(_rows(store, chunks[0], boundary)), *others]  # this process takes the first share
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


def _rows_of(task: tuple[Path, StoreSettings, int | None, list[Work]]) -> list[LagRow]:
    root, settings, boundary, work = task
    store = Store(root, settings)
    try:
        return list(_rows(store, work, boundary))
    finally:
        store.close()


def _rows(store: Store, work: list[Work], boundary: int | None) -> Iterator[LagRow]:
    queues = _Queues(store, boundary)
    for owner, name, committed, read_queues in work:
        for queue_id in range(read_queues):
            low, high, cut = queues.bounds(name, queue_id)
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
                unconfirmed=cut,
            )
