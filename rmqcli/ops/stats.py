"""Store statistics from one header-only CommitLog scan plus the consume queues' own bounds.

Topics of the CommitLog that cannot name a consume-queue directory (``naming.topic_dir_problem``:
``..``, a ``/``, ...) are listed in ``unsafe_topics``: no queue is ever written for them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from formats.dledger import DIR_PREFIX as DLEDGER_PREFIX
from rmqcli.store import Store
from rmqcli.store.naming import topic_dir_problem
from rmqcli.store.store import (
    ABORT_FILE,
    CHECKPOINT_FILE,
    COMMITLOG_DIR,
    CONFIG_DIR,
    CONSUMEQUEUE_DIR,
    INDEX_DIR,
    LOCK_FILE,
)

if TYPE_CHECKING:
    from rmqcli.store.confirm import ConfirmBound
    from rmqcli.store.read.commitlog import Corruption
    from rmqcli.store.scan.headerscan import HeaderBatch


@dataclass
class QueueStats:
    """One (topic, queueId): what the CommitLog holds for it and what its consume queue says."""

    topic: str
    queue_id: int
    messages: int = 0
    bytes: int = 0
    min_queue_offset: int | None = None
    max_queue_offset: int | None = None
    first_store_timestamp: int | None = None
    last_store_timestamp: int | None = None
    cq_min_offset: int | None = None  # minOffsetInQueue (after correctMinOffset)
    cq_max_offset: int | None = None  # maxOffsetInQueue (next offset)


@dataclass
class TopicStats:
    topic: str
    queues: int = 0
    messages: int = 0
    bytes: int = 0
    first_store_timestamp: int | None = None
    last_store_timestamp: int | None = None


@dataclass
class CommitLogStats:
    files: int
    min_offset: int  # first byte of the first file (minPhyOffset)
    max_offset: int  # just past the last record (maxPhyOffset)
    records: int
    bytes: int
    first_store_timestamp: int | None
    last_store_timestamp: int | None


@dataclass
class FileGroupStats:
    """Files of one kind (commitlog, consumequeue, index, config, checkpoint, abort, lock, dledger
    (``dledger-<selfId>/``: a DLedger-mode log), other)."""

    kind: str
    count: int
    bytes: int


@dataclass
class UnsafeTopicStats:
    """A topic whose records go to no consume queue: its name cannot be a directory there."""

    topic: str
    reason: str
    queues: int
    messages: int


@dataclass
class UnconfirmedQueue:
    topic: str
    queue_id: int
    messages: int
    min_queue_offset: int | None
    max_queue_offset: int | None


@dataclass
class ConfirmStats:
    """A controller-mode store (``rmqcli.store.confirm``): the checkpoint's confirmPhyOffset, the
    value recovery keeps, and the records after it, which are not counted as in the log."""

    confirm_phy_offset: int
    confirm_offset: int
    unconfirmed_from: int  # the first record not confirmed starts here
    unconfirmed_records: int
    unconfirmed_bytes: int
    clamped: str | None
    queues: list[UnconfirmedQueue] = field(default_factory=list)


@dataclass
class StoreStats:
    store: str
    commitlog: CommitLogStats
    topics: list[TopicStats] = field(default_factory=list)
    queues: list[QueueStats] = field(default_factory=list)
    files: list[FileGroupStats] = field(default_factory=list)
    unsafe_topics: list[UnsafeTopicStats] = field(default_factory=list)
    confirm: ConfirmStats | None = None  # controller-mode stores only


def earliest(a: int | None, b: int) -> int:
    return b if a is None or b < a else a


def latest(a: int | None, b: int) -> int:
    return b if a is None or b > a else a


def store_stats(
    store: Store,
    progress: Callable[[int], None] | None = None,
    on_corrupt: Callable[[Corruption], None] | None = None,
) -> StoreStats:
    """Count every record per topic and queue; ``progress`` gets the physical offset reached.

    What stops the scan short of records on disk (a corrupt record, zeros with records after
    them, a file cut short: ``CommitLog.header_batches``) raises ``CorruptDataError``; with
    ``on_corrupt`` it is passed there and the records after it are counted too.
    """
    queues: dict[tuple[str, int], QueueStats] = {}
    bound = store.confirm_bound()
    unconfirmed: dict[tuple[str, int], QueueStats] = {}
    for batch in store.commitlog.header_batches(hints=store.record_offsets(), on_corrupt=on_corrupt):
        if bound is not None and batch.position[-1] >= bound.boundary:
            keep = batch.position < bound.boundary
            add_batch(queues, subset(batch, keep))
            add_batch(unconfirmed, subset(batch, ~keep))
        else:
            add_batch(queues, batch)
        if progress is not None:
            progress(int(batch.position[-1]))
    result = finish_stats(store, queues)
    if bound is not None:
        finish_confirm(result, bound, unconfirmed)
    return result


def finish_confirm(
    result: StoreStats, bound: ConfirmBound, unconfirmed: dict[tuple[str, int], QueueStats]
) -> None:
    """A controller-mode store's statistics: the records past the bound (``unconfirmed``) counted
    apart, and the log ending where they start."""
    result.confirm = _confirm_stats(bound, unconfirmed)
    result.commitlog.max_offset = bound.boundary  # the log's end: the records after it are not in it


def subset(batch: HeaderBatch, keep) -> HeaderBatch:  # type: ignore[no-untyped-def]
    """The records of ``batch`` that the boolean array ``keep`` selects (the header fields only)."""
    names = (
        "position",
        "total_size",
        "queue_id",
        "queue_offset",
        "sys_flag",
        "store_timestamp",
        "topic_index",
    )
    return replace(batch, **{n: getattr(batch, n)[keep] for n in names})


def _confirm_stats(bound: ConfirmBound, unconfirmed: dict[tuple[str, int], QueueStats]) -> ConfirmStats:
    rows = [
        UnconfirmedQueue(q.topic, q.queue_id, q.messages, q.min_queue_offset, q.max_queue_offset)
        for _k, q in sorted(unconfirmed.items())
        if q.messages
    ]
    return ConfirmStats(
        bound.checkpoint,
        bound.offset,
        bound.boundary,
        sum(q.messages for q in rows),
        bound.unconfirmed_bytes,
        bound.clamped,
        rows,
    )


def finish_stats(store: Store, queues: dict[tuple[str, int], QueueStats]) -> StoreStats:
    """``StoreStats`` from the per-queue counts of every record (``add_batch``): CommitLog totals,
    every queue's consume-queue bounds (queues without records too), topics and file groups."""
    records = sum(q.messages for q in queues.values())
    total_bytes = sum(q.bytes for q in queues.values())
    firsts = [q.first_store_timestamp for q in queues.values() if q.first_store_timestamp is not None]
    lasts = [q.last_store_timestamp for q in queues.values() if q.last_store_timestamp is not None]
    first = min(firsts) if firsts else None
    last = max(lasts) if lasts else None
    cl = store.commitlog
    cl_min = cl.min_offset
    for topic, qid in store.queue_ids():
        q = queues.get((topic, qid))
        if q is None:
            q = queues[(topic, qid)] = QueueStats(topic, qid)
        cq = store.consume_queue(topic, qid)
        q.cq_min_offset = cq.min_offset(cl_min)
        q.cq_max_offset = cq.max_offset
    ordered = [queues[k] for k in sorted(queues)]
    topics = topic_totals(ordered)
    return StoreStats(
        store=str(store.root),
        commitlog=CommitLogStats(len(cl.files), cl_min, cl.max_offset(), records, total_bytes, first, last),
        topics=topics,
        queues=ordered,
        files=file_groups(store.root),
        unsafe_topics=[
            UnsafeTopicStats(t.topic, reason, t.queues, t.messages)
            for t in topics
            if (reason := topic_dir_problem(t.topic)) is not None
        ],
    )


def add_batch(queues: dict[tuple[str, int], QueueStats], batch: HeaderBatch) -> None:
    """Fold one file's header arrays into the per-queue totals, grouped with numpy."""
    import numpy as np

    if not len(batch):
        return

    group_key = (batch.topic_index.astype(np.int64) << 32) | (batch.queue_id.astype(np.int64) & 0xFFFFFFFF)
    keys, inverse = np.unique(group_key, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    starts = np.searchsorted(inverse[order], np.arange(len(keys)))
    counts = np.diff(np.append(starts, len(order)))
    size = np.add.reduceat(batch.total_size[order].astype(np.int64), starts)
    qoff = batch.queue_offset[order]
    stamp = batch.store_timestamp[order]
    qmin, qmax = np.minimum.reduceat(qoff, starts), np.maximum.reduceat(qoff, starts)
    tmin, tmax = np.minimum.reduceat(stamp, starts), np.maximum.reduceat(stamp, starts)
    for i, k in enumerate(keys.tolist()):
        topic = batch.topics[k >> 32]
        qid = int(np.int32(np.uint32(k & 0xFFFFFFFF)))
        q = queues.get((topic, qid))
        if q is None:
            q = queues[(topic, qid)] = QueueStats(topic, qid)
        q.messages += int(counts[i])
        q.bytes += int(size[i])
        q.min_queue_offset = earliest(q.min_queue_offset, int(qmin[i]))
        q.max_queue_offset = latest(q.max_queue_offset, int(qmax[i]))
        q.first_store_timestamp = earliest(q.first_store_timestamp, int(tmin[i]))
        q.last_store_timestamp = latest(q.last_store_timestamp, int(tmax[i]))


def topic_totals(queues: list[QueueStats]) -> list[TopicStats]:
    topics: dict[str, TopicStats] = {}
    for q in queues:
        t = topics.setdefault(q.topic, TopicStats(q.topic))
        t.queues += 1
        t.messages += q.messages
        t.bytes += q.bytes
        if q.first_store_timestamp is not None:
            t.first_store_timestamp = earliest(t.first_store_timestamp, q.first_store_timestamp)
        if q.last_store_timestamp is not None:
            t.last_store_timestamp = latest(t.last_store_timestamp, q.last_store_timestamp)
    return list(topics.values())


_KINDS = {
    COMMITLOG_DIR: "commitlog",
    CONSUMEQUEUE_DIR: "consumequeue",
    INDEX_DIR: "index",
    CONFIG_DIR: "config",
    CHECKPOINT_FILE: "checkpoint",
    ABORT_FILE: "abort",
    LOCK_FILE: "lock",
}


def file_groups(root: Path) -> list[FileGroupStats]:
    """Count and total size of the store's files, grouped by the top-level entry they are under."""
    groups: dict[str, list[int]] = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        top = path.relative_to(root).parts[0]
        kind = _KINDS.get(top, "dledger" if top.startswith(DLEDGER_PREFIX) else "other")
        entry = groups.setdefault(kind, [0, 0])
        entry[0] += 1
        entry[1] += path.stat().st_size
    order = list(_KINDS.values()) + ["dledger", "other"]
    return [FileGroupStats(k, *groups[k]) for k in order if k in groups]
