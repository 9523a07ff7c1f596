"""Write index files as ``IndexService.buildIndex`` / ``IndexFile.putKey`` (4.9.x) do (formats.md §3)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from formats import commitlog as fmt
from formats import indexfile as ifmt
from rmqcli.store.naming import is_index_name
from rmqcli.store.write.files import map_writable
from rmqcli.store.write.messages import INDEXED_TRANSACTION_TYPES


class IndexFileWriter:
    """One index file: header fields kept in memory and written through on every key."""

    def __init__(self, path: Path, hash_slot_num: int, index_num: int):
        self.path = path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        size = ifmt.file_size(hash_slot_num, index_num)
        self._map = map_writable(path, size)
        (
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            index_count,
        ) = ifmt.HEADER_STRUCT.unpack_from(self._map, 0)
        self.index_count = max(index_count, 1)  # IndexHeader: starts at 1, loaded <= 0 becomes 1
        self._entries_base = ifmt.entry_position(0, hash_slot_num)

    @classmethod
    def create(
        cls, path: Path, hash_slot_num: int, index_num: int, end_phy_offset: int, end_timestamp: int
    ) -> IndexFileWriter:
        """``new IndexFile(..., endPhyOffset, endTimestamp)``: seeded with the previous file's end."""
        f = cls(path, hash_slot_num, index_num)
        if end_phy_offset > 0:
            f.begin_phy_offset = f.end_phy_offset = end_phy_offset
        if end_timestamp > 0:
            f.begin_timestamp = f.end_timestamp = end_timestamp
        f._write_header()
        return f

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def full(self) -> bool:
        """``IndexFile.isWriteFull``."""
        return self.index_count >= self.index_num

    def _write_header(self) -> None:
        ifmt.HEADER_STRUCT.pack_into(
            self._map,
            0,
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        )

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """``IndexFile.putKey``; False when the file is full."""
        if self.index_count >= self.index_num:
            return False
        hashed = ifmt.key_hash(key)
        slot_pos = ifmt.slot_position(ifmt.slot_of(hashed, self.hash_slot_num))
        slot_value = ifmt.SLOT_STRUCT.unpack_from(self._map, slot_pos)[0]
        if slot_value <= ifmt.INVALID_INDEX or slot_value > self.index_count:
            slot_value = ifmt.INVALID_INDEX
        time_diff = ifmt.time_diff_seconds(store_timestamp, self.begin_timestamp)
        count = self.index_count
        ifmt.ENTRY_STRUCT.pack_into(
            self._map,
            self._entries_base + count * ifmt.ENTRY_SIZE,
            hashed,
            phy_offset,
            time_diff,
            slot_value,
        )
        ifmt.SLOT_STRUCT.pack_into(self._map, slot_pos, count)
        if count <= 1:
            self.begin_phy_offset = phy_offset
            self.begin_timestamp = store_timestamp
        if slot_value == ifmt.INVALID_INDEX:
            self.hash_slot_count += 1
        self.index_count = count + 1
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        self._write_header()
        return True

    def cut(self, phy_offset: int) -> int:
        """Remove the entries of records at or past ``phy_offset`` (a CommitLog cut): they are the
        newest, so each one's hash slot goes back to the entry it had replaced (its ``prevIndex``);
        the entries removed."""
        removed = 0
        count = self.index_count
        while count > 1:
            pos = self._entries_base + (count - 1) * ifmt.ENTRY_SIZE
            hashed, entry_phy, _diff, prev = ifmt.ENTRY_STRUCT.unpack_from(self._map, pos)
            if entry_phy < phy_offset:
                break
            slot_pos = ifmt.slot_position(ifmt.slot_of(hashed, self.hash_slot_num))
            if ifmt.SLOT_STRUCT.unpack_from(self._map, slot_pos)[0] == count - 1:
                ifmt.SLOT_STRUCT.pack_into(self._map, slot_pos, prev)
                if prev == ifmt.INVALID_INDEX:
                    self.hash_slot_count = max(0, self.hash_slot_count - 1)
            self._map[pos : pos + ifmt.ENTRY_SIZE] = bytes(ifmt.ENTRY_SIZE)
            count -= 1
            removed += 1
        if removed:
            self.index_count = count
            if count > 1:
                _h, last_phy, last_diff, _p = ifmt.ENTRY_STRUCT.unpack_from(
                    self._map, self._entries_base + (count - 1) * ifmt.ENTRY_SIZE
                )
                self.end_phy_offset = last_phy
                self.end_timestamp = self.begin_timestamp + last_diff * 1000
            else:
                self.end_phy_offset, self.end_timestamp = self.begin_phy_offset, self.begin_timestamp
            self._write_header()
        return removed

    def flush(self) -> None:
        self._write_header()
        self._map.flush()

    def close(self) -> None:
        if not self._map.closed:
            self.flush()
            self._map.close()


IndexNamer = Callable[[int], str]
"""Names a new index file; given the store timestamp of the record that needs it."""


class IndexWriter:
    """``IndexService``: the index files of a store, newest last."""

    def __init__(self, directory: Path, hash_slot_num: int, index_num: int, namer: IndexNamer):
        self.directory = directory
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.namer = namer
        self.files: list[IndexFileWriter] = []
        self.completed_end_timestamp = 0  # endTimestamp of the last completed file (checkpoint)

    def load(self) -> None:
        """Open the files already in the directory, oldest first."""
        if not self.directory.is_dir():
            return
        for name in sorted(p.name for p in self.directory.iterdir() if is_index_name(p.name)):
            self.files.append(IndexFileWriter(self.directory / name, self.hash_slot_num, self.index_num))
        for f in self.files:
            if f.full:
                self.completed_end_timestamp = f.end_timestamp

    def _new_name(self, store_timestamp: int) -> str:
        name = self.namer(store_timestamp)
        if self.files and name <= self.files[-1].name:
            # Files load in name order: never let a new file sort before an older one.
            name = str(int(self.files[-1].name) + 1).zfill(len(self.files[-1].name))
        return name

    def last_file(self, store_timestamp: int) -> IndexFileWriter:
        """``getAndCreateLastIndexFile``: the last file, or a new one seeded from a full last file."""
        prev = self.files[-1] if self.files else None
        if prev is not None and not prev.full:
            return prev
        self.directory.mkdir(parents=True, exist_ok=True)
        end_phy, end_ts = (prev.end_phy_offset, prev.end_timestamp) if prev else (0, 0)
        path = self.directory / self._new_name(store_timestamp)
        created = IndexFileWriter.create(path, self.hash_slot_num, self.index_num, end_phy, end_ts)
        self.files.append(created)
        if prev is not None:
            prev.flush()  # IndexService.flush(prev): a full file moves indexMsgTimestamp
            self.completed_end_timestamp = prev.end_timestamp
        return created

    def _put(self, f: IndexFileWriter, key: str, phy_offset: int, store_timestamp: int) -> IndexFileWriter:
        while not f.put_key(key, phy_offset, store_timestamp):
            f = self.last_file(store_timestamp)
        return f

    def build_index(
        self,
        topic: str,
        phy_offset: int,
        store_timestamp: int,
        sys_flag: int,
        uniq_key: str | None,
        keys: str | None,
    ) -> None:
        """``IndexService.buildIndex``: UNIQ_KEY, then every KEYS token; ROLLBACK excluded."""
        f = self.last_file(store_timestamp)
        if phy_offset < f.end_phy_offset:
            return
        if sys_flag & fmt.TRANSACTION_MASK not in INDEXED_TRANSACTION_TYPES:
            return
        if uniq_key is not None:
            f = self._put(f, ifmt.index_key(topic, uniq_key), phy_offset, store_timestamp)
        if keys:
            for key in keys.split(fmt.KEY_SEPARATOR):
                if key:
                    f = self._put(f, ifmt.index_key(topic, key), phy_offset, store_timestamp)

    def cut(self, phy_offset: int) -> list[Path]:
        """The entries of records at or past ``phy_offset`` removed; the files that held nothing
        else are closed and returned (for the caller to move away)."""
        dropped: list[Path] = []
        while self.files:
            f = self.files[-1]
            f.cut(phy_offset)
            if f.index_count > 1 or len(self.files) == 1 or f.begin_phy_offset < phy_offset:
                break
            f.close()
            dropped.append(f.path)
            self.files.pop()
        return dropped

    def flush(self) -> None:
        for f in self.files:
            f.flush()

    def close(self) -> None:
        for f in self.files:
            f.close()
