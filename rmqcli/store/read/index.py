"""Read index files and look keys up as ``IndexService.queryOffset`` does.

formats.md §3 (``IndexFile.java``, ``IndexService.java``): a 40-byte header, a table of hash
slots holding the newest entry number of each chain, and 20-byte entries linked newest to
oldest. Only the 31-bit key hash is compared, so a lookup may return false positives.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from formats import indexfile as ifmt
from rmqcli.errors import CorruptDataError, NotFoundError
from rmqcli.store.mapped import MappedFile
from rmqcli.store.naming import is_index_name

JAVA_LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class IndexHeader:
    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int


def read_header(path: Path) -> IndexHeader:
    """The header of the index file at ``path``, read without mapping the file."""
    with open(path, "rb") as handle:
        data = handle.read(ifmt.HEADER_SIZE)
    if len(data) < ifmt.HEADER_SIZE:
        raise CorruptDataError(f"index file is {len(data)} bytes, shorter than its header", str(path))
    return IndexHeader(*ifmt.HEADER_STRUCT.unpack(data))


@dataclass(frozen=True, slots=True)
class IndexEntry:
    index_no: int
    key_hash: int
    phy_offset: int
    time_diff: int
    prev_index: int


class IndexFile:
    def __init__(self, path: Path, hash_slot_num: int | None = None, index_num: int | None = None):
        self.path = path
        self.mapped = MappedFile(path, 0, path.stat().st_size)
        if hash_slot_num is None or index_num is None:
            geometry = ifmt.geometry_from_size(self.mapped.size)
            if geometry is None:
                raise CorruptDataError(
                    f"a {self.mapped.size}-byte index file does not have the default 1:4 slots to entries; "
                    "if the broker used other maxHashSlotNum/maxIndexNum, pass them with --config",
                    str(path),
                )
            hash_slot_num, index_num = geometry
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        expected = ifmt.file_size(hash_slot_num, index_num)
        if self.mapped.size != expected:
            raise CorruptDataError(
                f"index file is {self.mapped.size} bytes; {hash_slot_num} slots and {index_num} entries "
                f"need {expected}",
                str(path),
            )
        self.header = IndexHeader(*ifmt.HEADER_STRUCT.unpack_from(self.mapped.map(), 0))

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def effective_count(self) -> int:
        """``indexCount`` as loaded: values <= 0 count as 1 (entry 0 is never written)."""
        return max(self.header.index_count, 1)

    def slot(self, slot: int) -> int:
        return ifmt.SLOT_STRUCT.unpack_from(self.mapped.map(), ifmt.slot_position(slot))[0]

    def entry(self, index_no: int) -> IndexEntry:
        pos = ifmt.entry_position(index_no, self.hash_slot_num)
        buf = self.mapped.map()
        if pos + ifmt.ENTRY_SIZE > len(buf):
            raise CorruptDataError(f"index entry {index_no} past the end of the file", str(self.path), pos)
        return IndexEntry(index_no, *ifmt.ENTRY_STRUCT.unpack_from(buf, pos))

    def entries(self) -> Iterator[IndexEntry]:
        """Entries 1 .. indexCount-1 in write order."""
        buf = self.mapped.map()
        start = ifmt.entry_position(1, self.hash_slot_num)
        count = min(self.effective_count, self.index_num) - 1
        end = min(start + count * ifmt.ENTRY_SIZE, len(buf))
        for i, fields in enumerate(ifmt.ENTRY_STRUCT.iter_unpack(buf[start:end]), start=1):
            yield IndexEntry(i, *fields)

    def used_slots(self) -> Iterator[tuple[int, int]]:
        buf = self.mapped.map()
        table = buf[ifmt.HEADER_SIZE : ifmt.slot_position(self.hash_slot_num)]
        for slot, (value,) in enumerate(ifmt.SLOT_STRUCT.iter_unpack(table)):
            if value:
                yield slot, value

    def is_time_matched(self, begin: int, end: int) -> bool:
        """``IndexFile.isTimeMatched``."""
        h = self.header
        return (
            (begin < h.begin_timestamp and end > h.end_timestamp)
            or h.begin_timestamp <= begin <= h.end_timestamp
            or h.begin_timestamp <= end <= h.end_timestamp
        )

    def select(self, key: str, max_num: int, begin: int, end: int, found: list[int]) -> None:
        """``IndexFile.selectPhyOffset``: append matching offsets, newest first, to ``found``."""
        key_hash = ifmt.key_hash(key)
        count = self.effective_count
        slot_value = self.slot(ifmt.slot_of(key_hash, self.hash_slot_num))
        if slot_value <= ifmt.INVALID_INDEX or slot_value > count or count <= 1:
            return
        index_no = slot_value
        seen = 0
        while len(found) < max_num and seen <= count:
            seen += 1
            entry = self.entry(index_no)
            if entry.time_diff < 0:
                break
            time_read = self.header.begin_timestamp + entry.time_diff * 1000
            if entry.key_hash == key_hash and begin <= time_read <= end:
                found.append(entry.phy_offset)
            prev = entry.prev_index
            if prev <= ifmt.INVALID_INDEX or prev > count or prev == index_no or time_read < begin:
                break
            index_no = prev

    def close(self) -> None:
        self.mapped.close()


class IndexService:
    """All index files of a store, oldest first.

    ``cap``: the most offsets a query returns, ``maxMsgsNumBatch`` as a broker caps them; ``None``
    (``uncapped``) lets an offline reader follow a chain to its end.
    """

    def __init__(
        self,
        directory: Path | None,
        hash_slot_num: int | None = None,
        index_num: int | None = None,
        *,
        cap: int | None = ifmt.MAX_QUERY_RESULTS,
    ):
        self.directory = directory
        self.files: list[IndexFile] = []
        if directory is not None and directory.is_dir():
            names = sorted(p.name for p in directory.iterdir() if is_index_name(p.name))
            self.files = [IndexFile(directory / n, hash_slot_num, index_num) for n in names]
        self.cap = cap

    @classmethod
    def uncapped(cls, files: list[IndexFile]) -> IndexService:
        """The same walk over index files already open (oldest first), without the cap."""
        service = cls(None, cap=None)
        service.files = files
        return service

    def query(
        self,
        topic: str,
        key: str,
        max_num: int = ifmt.MAX_QUERY_RESULTS,
        begin: int = 0,
        end: int = JAVA_LONG_MAX,
    ) -> list[int]:
        """``IndexService.queryOffset``: physical offsets for ``topic#key``, newest file first."""
        if self.cap is not None:
            max_num = min(max_num, self.cap)
        found: list[int] = []
        full_key = ifmt.index_key(topic, key)
        for f in reversed(self.files):
            if f.is_time_matched(begin, end):
                f.select(full_key, max_num, begin, end, found)
            if f.header.begin_timestamp < begin or len(found) >= max_num:
                break
        return found

    def close(self) -> None:
        for f in self.files:
            f.close()


def open_index_file(path: Path, hash_slot_num: int | None = None, index_num: int | None = None) -> IndexFile:
    if not path.is_file():
        raise NotFoundError(f"{path}: no such index file")
    return IndexFile(path, hash_slot_num, index_num)
