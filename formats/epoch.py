"""Controller-mode files of a RocketMQ 5 store: ``epochFileCheckpoint`` and ``brokerIdentity``.

``epochFileCheckpoint`` (+ ``.bak``) is a ``CheckpointFile<EpochEntry>`` (5.1.1
``common/utils/CheckpointFile.java``, ``store/ha/autoswitch/EpochFileCache.java``): text lines,
the number of entries, then the CRC of the entry lines, then one ``<epoch>-<startOffset>`` line per
entry. The CRC is ``UtilAll.crc32`` (java.util.zip.CRC32 & 0x7FFFFFFF) of the entry lines, each
followed by the line separator; a CRC of 0 is not checked. ``MixAll.string2File`` keeps the previous
content in ``.bak``, which ``CheckpointFile.read`` falls back to when the file is missing, holds no
entry or cannot be read.

``brokerIdentity`` (``BrokerMetadata.encodeToStr``): ``<cluster>#<brokerName>#<brokerId>``; a
``brokerIdentity-temp`` (``TempBrokerMetadata``) adds ``#<registerCheckCode>`` while the broker
registers with the controller. Both are written by ``MixAll.string2File`` (so ``.bak`` too).

Pure functions over text: no file I/O here.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

EPOCH_FILE = "epochFileCheckpoint"  # AutoSwitchHAService: storePathRootDir/epochFileCheckpoint
IDENTITY_FILE = "brokerIdentity"  # MessageStoreConfig.getStorePathBrokerIdentity
IDENTITY_TEMP_FILE = "brokerIdentity-temp"  # ReplicasManager: TempBrokerMetadata
BAK_SUFFIX = ".bak"  # MixAll.string2File
LINE_SEPARATOR = "\n"  # System.lineSeparator() on the brokers' platform
NOT_CHECK_CRC = 0  # CheckpointFile.NOT_CHECK_CRC_MAGIC_CODE
ENTRY_SEPARATOR = "-"  # EpochEntrySerializer: String.format("%d-%d", epoch, startOffset)
IDENTITY_SEPARATOR = "#"  # BrokerMetadata.encodeToStr


class EpochSyntaxError(ValueError):
    """The text is no ``CheckpointFile``: what is wrong and the 1-based line."""

    def __init__(self, message: str, line: int):
        super().__init__(message)
        self.line = line


@dataclass(frozen=True)
class EpochEntry:
    epoch: int
    start_offset: int


@dataclass(frozen=True)
class EpochFile:
    """A parsed ``epochFileCheckpoint``: the declared count and CRC, the entries, the CRC of the
    entry lines as read (``computed_crc``)."""

    count: int
    crc: int
    entries: list[EpochEntry]
    computed_crc: int

    @property
    def crc_ok(self) -> bool:
        return self.crc == NOT_CHECK_CRC or self.crc == self.computed_crc

    @property
    def count_ok(self) -> bool:
        return self.count == len(self.entries)


def java_crc32(data: bytes) -> int:
    """``UtilAll.crc32``: CRC32 with the sign bit cleared."""
    return zlib.crc32(data) & 0x7FFFFFFF


def _java_int(text: str, line: int, what: str) -> int:
    """``Integer.parseInt``/``Long.parseLong`` of one line: an optional sign and decimal digits."""
    body = text[1:] if text[:1] in "+-" else text
    if not body.isdigit() or not body.isascii():
        raise EpochSyntaxError(f"line {line}: {what} {text!r} is not a number", line)
    return int(text)


def entry_from_line(line: str, number: int) -> EpochEntry | None:
    """``EpochEntrySerializer.fromLine``: ``split("-")`` (trailing empty parts dropped); two parts
    make an entry, any other count none (the line still counts in the CRC)."""
    parts = line.split(ENTRY_SEPARATOR)
    while parts and parts[-1] == "":
        parts.pop()
    if len(parts) != 2:
        return None
    return EpochEntry(_java_int(parts[0], number, "epoch"), _java_int(parts[1], number, "start offset"))


def parse_epoch_file(text: str) -> EpochFile:
    """``CheckpointFile.read(path)`` of one file's text; ``EpochSyntaxError`` where Java's
    ``parseInt`` would throw (a missing or non-numeric count or CRC line, a bad entry number)."""
    lines = text.splitlines()
    if len(lines) < 2:
        raise EpochSyntaxError("no count and CRC lines", len(lines) + 1)
    count = _java_int(lines[0], 1, "entry count")
    crc = _java_int(lines[1], 2, "CRC")
    entries = []
    for number, line in enumerate(lines[2:], start=3):
        entry = entry_from_line(line, number)
        if entry is not None:
            entries.append(entry)
    body = "".join(line + LINE_SEPARATOR for line in lines[2:])
    return EpochFile(count, crc, entries, java_crc32(body.encode("utf-8")))


def build_epoch_file(entries: list[EpochEntry]) -> str:
    """``CheckpointFile.write``: the text a broker writes for ``entries``."""
    body = "".join(f"{e.epoch}{ENTRY_SEPARATOR}{e.start_offset}{LINE_SEPARATOR}" for e in entries)
    return f"{len(entries)}{LINE_SEPARATOR}{java_crc32(body.encode('utf-8'))}{LINE_SEPARATOR}{body}"


@dataclass(frozen=True)
class BrokerIdentity:
    cluster: str
    broker_name: str
    broker_id: int
    register_check_code: str | None = None  # brokerIdentity-temp only


def parse_identity(text: str) -> BrokerIdentity:
    """``BrokerMetadata.decodeFromStr`` (``TempBrokerMetadata``'s with a fourth part);
    ``ValueError`` for text it would fail on."""
    parts = text.strip("\r\n").split(IDENTITY_SEPARATOR)
    if len(parts) < 3:
        raise ValueError(f"{text!r} is not cluster#brokerName#brokerId")
    try:
        broker_id = int(parts[2])
    except ValueError:
        raise ValueError(f"brokerId {parts[2]!r} is not a number") from None
    return BrokerIdentity(parts[0], parts[1], broker_id, parts[3] if len(parts) > 3 else None)
