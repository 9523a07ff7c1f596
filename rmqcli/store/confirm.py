"""The confirm offset of a RocketMQ 5 controller-mode store: where its confirmed records end.

5.1.1 keeps ``CommitLog.confirmOffset`` in the checkpoint's ``confirmPhyOffset`` (byte 32,
``StoreCheckpoint``, ``CommitLog.setConfirmOffset``). In controller mode (``enableControllerMode``,
``AutoSwitchHAService``) it is the offset every replica of the SyncStateSet acknowledged (a slave:
the master's, capped at its own end; ``AutoSwitchHAClient``). A starting broker loads it
(``DefaultMessageStore.load``), and its recovery (``CommitLog.recoverNormally`` /
``recoverAbnormally``) keeps the CommitLog whole but clamps the value into ``[minPhyOffset, end]``
(abnormally: to the end of the last record it re-dispatched), dispatches only records with
``offset + size <= confirmOffset``, and the reput (``ReputMessageService``) stops there too. The
records after it are not confirmed: no consumer sees them, and when the broker joins a master
that lacks them it truncates them (``AutoSwitchHAClient`` -> ``truncateDirtyFiles``).

Outside controller mode a 5.x broker writes the start of the last record it recovered there once
and never reads it back (``getConfirmOffset`` is the max offset), and 4.x writes nothing there:
those stores have no confirm bound (``confirm_bound`` answers None) and read exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rmqcli.errors import NotFoundError
from rmqcli.store.epochs import is_controller_store
from rmqcli.store.read.commitlog import CommitLog

CONTROLLER_MODE = "enableControllerMode"  # BrokerConfig


@dataclass(frozen=True)
class ConfirmBound:
    """``checkpoint``: confirmPhyOffset as stored; ``offset``: the value recovery keeps (clamped
    into ``[min_offset, end]``); ``boundary``: the first record that does not end at or before
    ``offset`` starts here (records from it on are not confirmed); ``end``: the CommitLog's end."""

    checkpoint: int
    offset: int
    boundary: int
    min_offset: int
    end: int

    @property
    def clamped(self) -> str | None:
        """Why recovery would correct the stored value (its ``log.error``), None when it keeps it."""
        if self.checkpoint < self.min_offset:
            return f"confirmPhyOffset {self.checkpoint} is below minPhyOffset {self.min_offset}"
        if self.checkpoint > self.end:
            return f"confirmPhyOffset {self.checkpoint} is past the CommitLog's end {self.end}"
        return None

    @property
    def unconfirmed_bytes(self) -> int:
        return self.end - self.boundary

    def confirmed(self, offset: int, size: int) -> bool:
        """``recoverAbnormally``/the reput: the record at ``offset`` is dispatched."""
        return offset + size <= self.offset


def controller_mode(root: Path, conf: Mapping[str, str] | None) -> bool:
    """The store at ``root`` is a controller-mode store: its broker.conf ``conf`` says so, or the
    store holds the files only that mode writes (``epochs.is_controller_store``)."""
    value = (conf or {}).get(CONTROLLER_MODE)
    if value is not None:
        return str(value).strip().lower() == "true"
    return is_controller_store(root)


def confirm_bound(commitlog: CommitLog, confirm_phy_offset: int, end: int | None = None) -> ConfirmBound:
    """The bound of a controller-mode CommitLog whose checkpoint holds ``confirm_phy_offset``;
    ``end``: where its records end (default: its max offset; a recovery: where it ends the log)."""
    low = commitlog.min_offset
    end = commitlog.max_offset() if end is None else end
    offset = min(max(confirm_phy_offset, low), end)
    return ConfirmBound(confirm_phy_offset, offset, _boundary(commitlog, offset, end), low, end)


def _boundary(commitlog: CommitLog, offset: int, end: int) -> int:
    """Start of the first record that does not end at or before ``offset`` (``end`` if none)."""
    if offset >= end:
        return end
    try:
        mf = commitlog.queue.find(offset)
    except NotFoundError:  # no file holds it (a gap): no record there is in doubt
        return offset
    import numpy as np

    for batch in commitlog.header_batches(mf.from_offset, on_corrupt=lambda _c: None):
        ends = batch.position.astype(np.int64) + batch.total_size.astype(np.int64)
        i = int(np.searchsorted(ends, offset, side="right"))
        if i < len(batch):
            return int(batch.position[i])
    return end
