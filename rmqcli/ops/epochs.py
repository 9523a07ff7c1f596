"""``rmq dump-epoch``: a controller-mode store's epochs (``epochFileCheckpoint``, falling back to
``.bak`` as ``CheckpointFile.read`` does) and ``brokerIdentity`` (layouts: ``formats.epoch``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from formats import epoch as efmt
from rmqcli.errors import CorruptDataError
from rmqcli.store import Store
from rmqcli.store.epochs import EpochFileRead, Epochs, read_epoch_file, read_epochs, read_identity


@dataclass
class EpochDump:
    file: dict[str, Any]
    rows: list[dict[str, Any]]
    identity: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)


def epoch_dump(path: Path) -> EpochDump:
    """The epochs of the store at ``path`` (with the CommitLog's records per epoch), or of one
    epoch file. ``CorruptDataError`` when no file gives entries the broker would load."""
    if path.is_dir():
        epochs = read_epochs(path)
        store = Store.open(path) if (path / "commitlog").is_dir() else None
    else:
        one = read_epoch_file(path)
        epochs = Epochs(
            one, EpochFileRead(path.with_name(path.name + efmt.BAK_SUFFIX), False), one.entries, path
        )
        store = None
    warnings = [f"{f.path}: {f.problem}" for f in (epochs.main, epochs.bak) if f.problem is not None]
    if epochs.source is None:
        where = path / efmt.EPOCH_FILE if path.is_dir() else path
        if not epochs.present:
            raise CorruptDataError("no epoch file (the store is not in controller mode)", str(where))
        raise CorruptDataError("neither the file nor its .bak holds epochs the broker would load", str(where))
    if epochs.source != epochs.main.path and path.is_dir():
        warnings.append(f"{epochs.main.path}: unusable; the broker loads {epochs.source.name}")
    chosen = epochs.main if epochs.source == epochs.main.path else epochs.bak
    parsed = chosen.parsed
    assert parsed is not None
    file = {"source": str(epochs.source), "count": parsed.count, "crc": parsed.crc, "crcOk": parsed.crc_ok}
    identity = _identity(path, warnings) if path.is_dir() else None
    try:
        rows = _rows(epochs.entries, store)
    finally:
        if store is not None:
            store.close()
    return EpochDump(file, rows, identity, warnings)


def _rows(entries: list[efmt.EpochEntry], store: Store | None) -> list[dict[str, Any]]:
    """One row per epoch: start, end (the next start; the last: the CommitLog's end, as
    ``EpochFileCache.setLastEpochEntryEndOffset(maxPhyOffset)`` gives it), records in it."""
    end = store.commitlog.max_offset() if store is not None else None
    starts = [e.start_offset for e in entries]
    ends: list[int | None] = [*starts[1:], end]
    counts = _records_per_epoch(store, starts) if store is not None else [None] * len(entries)
    return [
        {"epoch": e.epoch, "startOffset": e.start_offset, "endOffset": stop, "records": n}
        for e, stop, n in zip(entries, ends, counts, strict=True)
    ]


def _records_per_epoch(store: Store, starts: list[int]) -> list[int]:
    import numpy as np

    counts = np.zeros(len(starts), dtype=np.int64)
    edges = np.array(starts, dtype=np.int64)
    for batch in store.commitlog.header_batches():
        slot = np.searchsorted(edges, batch.position, side="right") - 1
        slot = slot[slot >= 0]
        counts += np.bincount(slot, minlength=len(starts))[: len(starts)]
    return [int(n) for n in counts]


def _identity(root: Path, warnings: list[str]) -> dict[str, Any] | None:
    try:
        ident = read_identity(root / efmt.IDENTITY_FILE)
    except CorruptDataError as exc:
        warnings.append(str(exc))
        return None
    if ident is None:
        return None
    return {"clusterName": ident.cluster, "brokerName": ident.broker_name, "brokerId": ident.broker_id}
