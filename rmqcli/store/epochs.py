"""Read a RocketMQ 5 controller-mode store's ``epochFileCheckpoint`` (+ ``.bak``) and
``brokerIdentity`` (layouts: ``formats.epoch``), as 5.1.1's ``CheckpointFile.read`` and
``BrokerMetadata.readFromFile`` do."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from formats import epoch as efmt
from rmqcli.errors import CorruptDataError


@dataclass(frozen=True)
class EpochFileRead:
    """One of the two files: its path, whether it exists, what was parsed, why it is unusable
    (``problem``: a syntax error, a count or CRC mismatch; None when usable)."""

    path: Path
    exists: bool
    parsed: efmt.EpochFile | None = None
    problem: str | None = None

    @property
    def usable(self) -> bool:
        """``CheckpointFile.read(path)`` returns entries without throwing."""
        return self.exists and self.problem is None

    @property
    def entries(self) -> list[efmt.EpochEntry]:
        return self.parsed.entries if self.parsed is not None and self.problem is None else []


@dataclass(frozen=True)
class Epochs:
    """Both files and the entries the broker loads (``CheckpointFile.read``): the main file's,
    or the ``.bak``'s when the main one is missing, empty or unreadable (``source``)."""

    main: EpochFileRead
    bak: EpochFileRead
    entries: list[efmt.EpochEntry] = field(default_factory=list)
    source: Path | None = None  # the file the entries come from; None: neither gives any

    @property
    def present(self) -> bool:
        return self.main.exists or self.bak.exists


def read_epoch_file(path: Path) -> EpochFileRead:
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return EpochFileRead(path, False)
    except OSError as exc:
        return EpochFileRead(path, True, problem=f"unreadable: {exc.strerror}")
    try:
        parsed = efmt.parse_epoch_file(text)
    except efmt.EpochSyntaxError as exc:
        return EpochFileRead(path, True, problem=str(exc))
    if not parsed.count_ok:
        problem = f"declares {parsed.count} entries, holds {len(parsed.entries)}"
        return EpochFileRead(path, True, parsed, problem)
    if not parsed.crc_ok:
        problem = f"CRC {parsed.crc} declared, {parsed.computed_crc} computed over the entry lines"
        return EpochFileRead(path, True, parsed, problem)
    return EpochFileRead(path, True, parsed)


def read_epochs(root: Path) -> Epochs:
    """The epoch entries of the store at ``root`` as ``EpochFileCache.initCacheFromFile`` loads
    them: the main file when it reads and has entries, else the ``.bak``."""
    main = read_epoch_file(root / efmt.EPOCH_FILE)
    bak = read_epoch_file(root / (efmt.EPOCH_FILE + efmt.BAK_SUFFIX))
    if main.usable and main.entries:
        return Epochs(main, bak, main.entries, main.path)
    if bak.usable and bak.entries:
        return Epochs(main, bak, bak.entries, bak.path)
    return Epochs(main, bak)


def read_identity(path: Path) -> efmt.BrokerIdentity | None:
    """``brokerIdentity`` (or ``-temp``) at ``path``; None when absent, ``CorruptDataError`` when
    ``BrokerMetadata.decodeFromStr`` would fail on it."""
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None
    try:
        return efmt.parse_identity(text)
    except ValueError as exc:
        raise CorruptDataError(str(exc), str(path), 0) from None


def is_controller_store(root: Path) -> bool:
    """Whether a broker in controller mode wrote the store at ``root``: it leaves
    ``epochFileCheckpoint`` or ``brokerIdentity`` (``ReplicasManager``, ``AutoSwitchHAService``)."""
    names = (efmt.EPOCH_FILE, efmt.EPOCH_FILE + efmt.BAK_SUFFIX, efmt.IDENTITY_FILE)
    return any((root / name).exists() for name in names)


def epoch_spans(entries: list[efmt.EpochEntry], end: int) -> list[tuple[int, int, int]]:
    """``(epoch, start, end)`` of each entry: an entry ends where the next starts, the last at
    ``end`` (the CommitLog's end, as 5.1.1's ``setLastEpochEntryEndOffset``)."""
    return [
        (e.epoch, e.start_offset, entries[i + 1].start_offset if i + 1 < len(entries) else end)
        for i, e in enumerate(entries)
    ]


def epoch_at(entries: list[efmt.EpochEntry], offset: int, end: int) -> int | None:
    """The epoch whose ``[start, end)`` holds ``offset`` (``findEpochEntryByOffset``)."""
    return next((epoch for epoch, lo, hi in epoch_spans(entries, end) if lo <= offset < hi), None)


def consistent_point(
    local: list[efmt.EpochEntry], local_end: int, remote: list[efmt.EpochEntry], remote_end: int
) -> int:
    """5.1.1's ``findConsistentPoint`` (docs/controller.md §6.8): from the local highest epoch down,
    the first epoch ``remote`` has with the same start; the smaller of the two ends. -1: none."""
    theirs = {epoch: (lo, hi) for epoch, lo, hi in epoch_spans(remote, remote_end)}
    for epoch, lo, hi in reversed(epoch_spans(local, local_end)):
        found = theirs.get(epoch)
        if found is not None and found[0] == lo:
            return min(hi, found[1])
    return -1
