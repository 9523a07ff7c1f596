"""A broker's epochs while it runs: 5.1.1's ``EpochFileCache`` over ``epochFileCheckpoint``
(layout: ``formats.epoch``; rules: docs/controller.md §7.1).

Each entry is an epoch and the CommitLog offset where it starts; an entry ends where the next
starts, the last at ``last_end`` (the CommitLog's max offset, given by the caller). Every change is
written at once through ``MixAll.string2File``'s steps (the old text kept as ``.bak``), beside and
renamed into place; an empty list is never written, as 5.1.1 never writes one."""

from __future__ import annotations

import logging
from pathlib import Path

from formats import epoch as efmt
from formats.epoch import EpochEntry
from rmqcli.durable import replace_file
from rmqcli.store.epochs import consistent_point, read_epochs

log = logging.getLogger(__name__)

NO_END = (1 << 63) - 1  # Long.MAX_VALUE: the open end of the last entry


class EpochCache:
    """The entries in ascending epoch order; ``path`` None keeps them in memory only (a peer's list)."""

    def __init__(self, path: Path | None, entries: list[EpochEntry] | None = None):
        self.path = path
        self.entries: list[EpochEntry] = list(entries or [])

    @classmethod
    def load(cls, path: Path) -> EpochCache:
        """``initCacheFromFile``: the main file, or its ``.bak`` (``rmqcli.store.epochs``)."""
        return cls(path, read_epochs(path.parent).entries if path.name == efmt.EPOCH_FILE else [])

    @property
    def last_epoch(self) -> int:
        """``lastEpoch``: -1 without entries."""
        return self.entries[-1].epoch if self.entries else -1

    def end_of(self, i: int, last_end: int) -> int:
        return self.entries[i + 1].start_offset if i + 1 < len(self.entries) else last_end

    def get(self, epoch: int) -> EpochEntry | None:
        return next((e for e in self.entries if e.epoch == epoch), None)

    def append(self, entry: EpochEntry) -> bool:
        """``appendEntry``: refused (logged) unless both its epoch and its start are above the last."""
        if self.entries:
            last = self.entries[-1]
            if last.epoch >= entry.epoch or last.start_offset >= entry.start_offset:
                log.warning("epoch entry %d-%d not appended: the last is %d-%d",
                            entry.epoch, entry.start_offset, last.epoch, last.start_offset)  # fmt: skip
                return False
        self.entries.append(entry)
        self._write()
        return True

    def entry_for(self, offset: int, last_end: int = NO_END) -> tuple[EpochEntry, int] | None:
        """``findEpochEntryByOffset``: the entry whose [start, end) holds ``offset``, with its end."""
        for i, e in enumerate(self.entries):
            end = self.end_of(i, last_end)
            if e.start_offset <= offset < end:
                return e, end
        return None

    def next_after(self, epoch: int) -> EpochEntry | None:
        """``nextEntry``: the entry after ``epoch``'s."""
        return next((e for e in self.entries if e.epoch > epoch), None)

    def truncate_suffix(self, offset: int) -> None:
        """``truncateSuffixByOffset``: entries starting at or after ``offset`` removed."""
        self._keep([e for e in self.entries if e.start_offset < offset])

    def truncate_from_epoch(self, epoch: int) -> None:
        """``truncateSuffixByEpoch``: entries of ``epoch`` and later removed."""
        self._keep([e for e in self.entries if e.epoch < epoch])

    def truncate_prefix(self, min_offset: int, last_end: int) -> None:
        """``truncatePrefixByOffset``: entries that end at or before ``min_offset`` (files deleted)."""
        kept = [e for i, e in enumerate(self.entries) if self.end_of(i, last_end) > min_offset]
        self._keep(kept)

    def consistent_point(self, own_end: int, other: list[EpochEntry], other_end: int) -> int:
        """``findConsistentPoint`` against a peer's list (``rmqcli.store.epochs.consistent_point``)."""
        return consistent_point(self.entries, own_end, other, other_end)

    def _keep(self, kept: list[EpochEntry]) -> None:
        if kept != self.entries:
            self.entries = kept
            self._write()

    def _write(self) -> None:
        if self.path is None or not self.entries:
            return
        replace_file(self.path, efmt.build_epoch_file(self.entries).encode(), backup=True)
