"""``rmq verify`` on a RocketMQ 5 controller-mode store: the confirm offset (``rmqcli.store.confirm``),
``epochFileCheckpoint`` (+ ``.bak``) and ``brokerIdentity`` (``formats.epoch``).

What is an error: a confirmPhyOffset past the CommitLog's end (records the in-sync replicas
acknowledged are gone; 5.1.1's recovery logs an error and lowers it), stale records past it (they
repeat queue offsets of confirmed records: an older epoch's bytes that the truncation of a replica
after a master change left, ``MappedFile`` truncation does not zero them) and consume-queue units
pointing at them (seen with the 5.1.1 kit: the old master rejoining as a slave kept 20 such records
and units after its new end, apache/rocketmq#10666), an epoch file the broker
cannot load (``CheckpointFile.read`` throws, the count or the CRC does not match) when no ``.bak``
stands in, epochs not increasing, start offsets going back or past the CommitLog's end, and a
``brokerIdentity`` that ``BrokerMetadata.decodeFromStr`` rejects.
Warnings: the records past the confirm offset (with their count: the broker keeps them and
dispatches them once confirmed, or truncates them when it follows a master that lacks them), the
consume-queue units pointing at them, a confirmPhyOffset below the CommitLog's first offset
(corrected on start), a damaged main epoch file whose ``.bak`` the broker falls back to, and a
``.bak`` that disagrees with the main file.

Units past the confirm offset are a warning, not an error: a master alone in its SyncStateSet
confirms every record without writing the checkpoint (``CommitLog.getConfirmOffset`` returns the
max offset), so its consume queues run past the stored value; seen with the 5.1.1 kit, a master
whose replica died wrote 50 records, all dispatched, past confirmPhyOffset. A slave's never do
(its reput stops at the confirm offset), but offline the two cannot be told apart.
"""

from __future__ import annotations

import numpy as np

from formats import epoch as efmt
from formats.consumequeue import CQ_UNIT_SIZE
from rmqcli.errors import CorruptDataError
from rmqcli.ops.verify_common import Collector
from rmqcli.ops.verify_queues import QueueUnits
from rmqcli.ops.verify_table import RecordTable
from rmqcli.store.confirm import ConfirmBound
from rmqcli.store.epochs import EpochFileRead, read_epochs, read_identity
from rmqcli.store.store import Store


def check_confirm(
    store: Store, bound: ConfirmBound, queues: list[QueueUnits], table: RecordTable, p: Collector
) -> int:
    """The confirm offset against the CommitLog and the consume queues; returns the number of
    records past it (not in the log until confirmed)."""
    path = store.checkpoint_path
    if bound.checkpoint > bound.end:
        p.error(
            "confirm-past-end",
            path,
            32,
            f"confirmPhyOffset {bound.checkpoint} is past the CommitLog's end {bound.end}: records the "
            "in-sync replicas acknowledged are missing (a starting broker lowers it to the end)",
        )
    elif bound.checkpoint < bound.min_offset:
        p.warning(
            "confirm-below-min",
            path,
            32,
            f"confirmPhyOffset {bound.checkpoint} is below the CommitLog's first offset {bound.min_offset}: "
            f"a starting broker raises it to {bound.min_offset}",
        )
    past_rows = np.flatnonzero(table.position >= bound.boundary) if len(table) else np.empty(0, np.int64)
    if len(past_rows):
        p.warning(
            "unconfirmed",
            path,
            32,
            f"{len(past_rows)} record(s) ({bound.end - bound.boundary} bytes) from offset {bound.boundary} "
            f"are past confirmPhyOffset {bound.checkpoint}: not confirmed by the in-sync replicas, so not in "
            "the log; the broker dispatches them once confirmed, or truncates them when it follows a master "
            "that lacks them",
        )
    stale = stale_rows(table, bound.boundary)
    if len(stale):
        first = int(stale[0])
        p.error(
            "stale-past-confirm",
            store.checkpoint_path,
            32,
            f"{len(stale)} record(s) past confirmPhyOffset {bound.checkpoint} are stale, older than the "
            f"confirmed ones or repeating their queue offsets (the first at {int(table.position[first])}, "
            f"{table.topics[int(table.topic_id[first])]}:{int(table.queue_id[first])} queue offset "
            f"{int(table.queue_offset[first])}): an older epoch's, left by a truncation that does not zero "
            "bytes; if confirmed they would be served again as new messages",
        )
    stale_at = set(table.position[stale].tolist())
    for q in queues:
        _check_queue_confirm(q, bound, stale_at, p)
    return len(past_rows)


_NEWEST_OF = 64  # the newest confirmed store time is looked for among the last records before the bound


def stale_rows(table: RecordTable, boundary: int) -> np.ndarray:
    """Rows of the records from ``boundary`` on that an older epoch left: a master appends after
    its confirmed records, so its unconfirmed ones neither repeat a queue offset the records before
    hold in their queue nor were stored before the newest of those (STORETIMESTAMP is set inside the
    put lock); the bytes of an older epoch that a replica's truncation left do one or the other."""
    if not len(table):
        return np.empty(0, dtype=np.int64)
    before = table.position < boundary
    past = np.flatnonzero(~before)
    confirmed = np.flatnonzero(before)
    if not len(past) or not len(confirmed):
        return past[:0]
    key = table.topic_id.astype(np.int64) * (1 << 32) + (table.queue_id.astype(np.int64) & 0xFFFFFFFF)
    keys, inverse = np.unique(key[confirmed], return_inverse=True)
    top = np.full(len(keys), -1, dtype=np.int64)
    np.maximum.at(top, inverse, table.queue_offset[confirmed].astype(np.int64))
    slot = np.minimum(np.searchsorted(keys, key[past]), len(keys) - 1)
    repeat = (keys[slot] == key[past]) & (table.queue_offset[past].astype(np.int64) <= top[slot])
    newest = int(table.store_timestamps(confirmed[-_NEWEST_OF:]).max())
    older = table.store_timestamps(past) < newest
    return past[repeat | older]


def _check_queue_confirm(q: QueueUnits, bound: ConfirmBound, stale_at: set[int], p: Collector) -> None:
    held = q.loaded
    q.reload()
    try:
        beyond = np.flatnonzero((q.offset >= bound.boundary) & (q.offset < bound.end))
        if not len(beyond):
            return
        bad = [int(i) for i in beyond if int(q.offset[i]) in stale_at]
        first = bad[0] if bad else int(beyond[0])
        mf = q.cq.files[int(q.file_no[first])]
        at = int(q.index[first]) * CQ_UNIT_SIZE - mf.from_offset
        where = f"{q.topic}:{q.queue_id} from queue offset {int(q.index[first])}"
        if bad:
            p.error(
                "cq-stale",
                mf.path,
                at,
                f"{len(bad)} unit(s) of {where} point at stale records past confirmPhyOffset "
                f"{bound.checkpoint} (the first at {int(q.offset[first])}): consumers read messages of an "
                "older epoch that the group truncated",
            )
            return
        p.warning(
            "cq-past-confirm",
            mf.path,
            at,
            f"{len(beyond)} unit(s) of {where} point at records past confirmPhyOffset {bound.checkpoint} "
            f"(the first at {int(q.offset[first])}): consumers read records the group may truncate (only "
            "a master alone in its SyncStateSet dispatches past it)",
        )
    finally:
        if not held:
            q.release()


def check_epochs(store: Store, end: int, p: Collector) -> None:
    """``epochFileCheckpoint`` and its ``.bak`` (when either exists), and ``brokerIdentity``."""
    epochs = read_epochs(store.root)
    if epochs.present:
        main, bak = epochs.main, epochs.bak
        if main.exists and main.problem is not None:
            fallback = bak.usable and bool(bak.entries)
            report = p.warning if fallback else p.error
            then = "the broker loads the .bak" if fallback else "the broker cannot load its epochs"
            report("epoch-file", main.path, None, f"{main.problem}: {then}")
        elif not main.exists:
            p.warning("epoch-file", main.path, None, "missing: the broker loads the .bak")
        if bak.exists and bak.problem is not None:
            p.warning(
                "epoch-bak",
                bak.path,
                None,
                f"{bak.problem} (the previous epochs; used only without the main file)",
            )
        _check_entries(epochs.source, epochs.entries, end, p)
        if main.usable and bak.usable:
            _check_bak(main, bak, p)
    _check_identity(store, p)


def _check_entries(source, entries: list[efmt.EpochEntry], end: int, p: Collector) -> None:  # type: ignore[no-untyped-def]
    for before, entry in zip(entries, entries[1:], strict=False):
        if entry.epoch <= before.epoch:
            p.error(
                "epoch-order",
                source,
                None,
                f"epoch {entry.epoch} follows epoch {before.epoch}: epochs must increase (EpochFileCache)",
            )
        if entry.start_offset < before.start_offset:
            p.error(
                "epoch-order",
                source,
                None,
                f"epoch {entry.epoch} starts at {entry.start_offset}, before epoch {before.epoch} "
                f"({before.start_offset})",
            )
    for entry in entries:
        if entry.start_offset < 0 or entry.start_offset > end:
            p.error(
                "epoch-offset",
                source,
                None,
                f"epoch {entry.epoch} starts at {entry.start_offset}, outside the CommitLog (its end: {end})",
            )


def _check_bak(main: EpochFileRead, bak: EpochFileRead, p: Collector) -> None:
    """``.bak`` holds the file's previous content (``MixAll.string2File``): an epoch both name must
    start at the same offset in both."""
    now = {e.epoch: e.start_offset for e in main.entries}
    for e in bak.entries:
        if e.epoch in now and now[e.epoch] != e.start_offset:
            p.warning(
                "epoch-bak",
                bak.path,
                None,
                f"epoch {e.epoch} starts at {e.start_offset} here, at {now[e.epoch]} in {main.path.name}",
            )


def _check_identity(store: Store, p: Collector) -> None:
    for name in (efmt.IDENTITY_FILE, efmt.IDENTITY_TEMP_FILE):
        try:
            read_identity(store.root / name)
        except CorruptDataError as exc:
            p.error("broker-identity", store.root / name, 0, str(exc).split(": ", 1)[-1])
