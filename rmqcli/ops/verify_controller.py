"""``rmq verify`` on a RocketMQ 5 controller-mode store: the confirm offset (``rmqcli.store.confirm``),
``epochFileCheckpoint`` (+ ``.bak``) and ``brokerIdentity`` (``formats.epoch``).

What is an error: a confirmPhyOffset past the CommitLog's end (records the in-sync replicas
acknowledged are gone; 5.1.1's recovery logs an error and lowers it), a consume-queue unit pointing
at a record past the confirm offset (5.1.1 never dispatches one there: ``recoverAbnormally`` and
``ReputMessageService`` stop at ``confirmOffset``, so consumers would read a record the group may
truncate), an epoch file the broker cannot load (``CheckpointFile.read`` throws, the count or the
CRC does not match) when no ``.bak`` stands in, epochs not increasing, start offsets going back or
past the CommitLog's end, and a ``brokerIdentity`` that ``BrokerMetadata.decodeFromStr`` rejects.
Warnings: the records past the confirm offset (with their count: the broker keeps them and
dispatches them once confirmed, or truncates them when it follows a master that lacks them), a
confirmPhyOffset below the CommitLog's first offset (corrected on start), a damaged main epoch file
whose ``.bak`` the broker falls back to, and a ``.bak`` that disagrees with the main file.
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
    past = int(np.count_nonzero(table.position >= bound.boundary)) if len(table) else 0
    if past:
        p.warning(
            "unconfirmed",
            path,
            32,
            f"{past} record(s) ({bound.end - bound.boundary} bytes) from offset {bound.boundary} are past "
            f"confirmPhyOffset {bound.checkpoint}: not confirmed by the in-sync replicas, so not in the log; "
            "the broker dispatches them once confirmed, or truncates them when it follows a master that "
            "lacks them",
        )
    for q in queues:
        _check_queue_confirm(q, bound, p)
    return past


def _check_queue_confirm(q: QueueUnits, bound: ConfirmBound, p: Collector) -> None:
    held = q.loaded
    q.reload()
    try:
        beyond = np.flatnonzero((q.offset >= bound.boundary) & (q.offset < bound.end))
        if not len(beyond):
            return
        first = int(beyond[0])
        mf = q.cq.files[int(q.file_no[first])]
        at = int(q.index[first]) * CQ_UNIT_SIZE - mf.from_offset
        p.error(
            "cq-past-confirm",
            mf.path,
            at,
            f"{len(beyond)} unit(s) of {q.topic}:{q.queue_id} from queue offset {int(q.index[first])} "
            f"point at records past confirmPhyOffset {bound.checkpoint} (the first at "
            f"{int(q.offset[first])}): 5.1.1 dispatches none there, and the group may truncate them",
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
