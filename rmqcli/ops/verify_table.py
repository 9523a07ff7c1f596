"""The columns ``rmq verify``'s CommitLog scan keeps for the later checks (``verify_queues``,
``verify_index``): one row per valid record in the narrowest integer types that hold its values,
and the index keys spilled to temporary files and read back a run at a time."""

from __future__ import annotations

import os
import tempfile
from bisect import bisect_right
from dataclasses import dataclass, field

import numpy as np

from formats import commitlog as fmt
from rmqcli.memory import give_back_free_memory
from rmqcli.store.mapped import MappedFile

_KEYS_AT_ONCE = 1 << 18  # index keys read back from their files at once


@dataclass
class FileInfo:
    """Where one CommitLog file's data ends and how."""

    mapped: MappedFile
    data_end: int = 0  # position in the file just past the last record (valid or not)
    tail: str = "zeros"  # "blank", "zeros", "end", "garbage"
    records: int = 0
    first_store_timestamp: int | None = None


class KeyColumns:
    """The index keys of the records in record order (as ``buildIndex`` adds them): the record row
    (int64) and the key hash (int32) of each, appended to two unlinked temporary files and read
    back a run at a time (``records``, ``hashes``; whole where a check joins them at random), so
    that they do not stay in memory beside the index files' own arrays."""

    def __init__(self) -> None:
        self._files = {
            name: tempfile.TemporaryFile(prefix=f"rmq-verify-{name}-") for name in ("records", "hashes")
        }
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def append(self, records: np.ndarray, hashes: np.ndarray) -> None:
        self._files["records"].write(np.ascontiguousarray(records, dtype=np.int64).data)
        self._files["hashes"].write(np.ascontiguousarray(hashes, dtype=np.int32).data)
        self.n += len(records)

    def finish(self) -> None:
        for f in self._files.values():
            f.flush()

    def close(self) -> None:
        for f in self._files.values():
            f.close()

    def _read(self, name: str, dtype, lo: int, hi: int | None) -> np.ndarray:
        hi = self.n if hi is None else min(hi, self.n)
        if hi <= lo:
            return np.empty(0, dtype=dtype)
        size = np.dtype(dtype).itemsize
        data = os.pread(self._files[name].fileno(), (hi - lo) * size, lo * size)
        return np.frombuffer(data, dtype=dtype)

    def records(self, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """Record row of keys ``lo`` to ``hi`` (all by default)."""
        return self._read("records", np.int64, lo, hi)

    def hashes(self, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """Key hash of keys ``lo`` to ``hi`` (all by default)."""
        return self._read("hashes", np.int32, lo, hi)

    def first_of(self, row: int) -> int:
        """The first key of record ``row`` or of a later record (``searchsorted`` on the records)."""
        lo, hi = 0, self.n
        while lo < hi:
            mid = (lo + hi) // 2
            if int(self.records(mid, mid + 1)[0]) < row:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def runs(self):
        """(lo, hi) of the keys, ``_KEYS_AT_ONCE`` at a time."""
        for lo in range(0, self.n, _KEYS_AT_ONCE):
            yield lo, min(lo + _KEYS_AT_ONCE, self.n)


@dataclass
class RecordTable:
    """Every valid record of the CommitLog, as parallel arrays sorted by position.

    Only the columns the later checks join on, each in the narrowest integer type that holds its
    values (``Parts.column``): a queue id, a topic id or a size takes a byte or two where the
    record has four or eight. ``sys_flag`` keeps only the transaction and inner-batch bits; the
    store time of a record is read from its file when a message needs it (``store_timestamps``);
    the index keys wait in temporary files (``KeyColumns``). About 21 bytes a record in all where
    the whole columns took 64 (issue 20: verify of a 4 GiB store under 200 MB).
    """

    position: np.ndarray
    total_size: np.ndarray
    queue_id: np.ndarray
    queue_offset: np.ndarray
    sys_flag: np.ndarray  # TRANSACTION_MASK and INNER_BATCH_FLAG bits only
    topic_id: np.ndarray
    tags_code: np.ndarray
    topics: list[str]
    keys: KeyColumns  # one row per index key: the record it belongs to, its hash
    files: list[FileInfo] = field(default_factory=list)
    valid_end: int = 0  # global offset just past the last valid record (maxPhyOffset)
    bytes: int = 0
    crc_checked: int = 0
    max_store_timestamp: int | None = None  # the latest STORETIMESTAMP of a valid record

    def __len__(self) -> int:
        return len(self.position)

    def drop_queue_columns(self) -> None:
        """Let go of the columns only the consume-queue checks join on (the index checks need
        positions, flags, topics and keys)."""
        empty = np.empty(0, dtype=np.int8)
        self.total_size = self.queue_id = self.queue_offset = self.tags_code = empty

    def store_timestamps(self, rows: np.ndarray) -> np.ndarray:
        """STORETIMESTAMP of the records in ``rows``, read from their files (for a few rows)."""
        out = np.zeros(len(rows), dtype=np.int64)
        starts = [info.mapped.from_offset for info in self.files]
        for i, pos in enumerate(self.position[rows].tolist()):
            k = bisect_right(starts, pos) - 1
            if k >= 0:
                out[i] = store_timestamp_at(self.files[k].mapped, pos - starts[k])
        return out

    def locate(self, offsets: np.ndarray) -> np.ndarray:
        """Row of the record starting at each offset, or -1."""
        if not len(self.position):
            return np.full(len(offsets), -1, dtype=np.int64)
        i = np.searchsorted(self.position, offsets)
        i = np.minimum(i, len(self.position) - 1)
        return np.where(self.position[i] == offsets, i, -1)


# columns whose type is fixed (SYSFLAG's transaction and inner-batch bits, non-negative i32 key
# hashes, positions); the others take the narrowest signed type that holds their values
_DTYPES = {
    "position": np.int64,
    "sys_flag": np.uint8,
}
SYS_FLAG_BITS = fmt.TRANSACTION_MASK | fmt.INNER_BATCH_FLAG
assert SYS_FLAG_BITS <= 0xFF
_NARROW = (np.int8, np.int16, np.int32, np.int64)


class Parts:
    """Per-window column pieces (each already as narrow as its values allow), concatenated at
    the end into the narrowest type that holds every piece."""

    def __init__(self) -> None:
        self.cols: dict[str, list[np.ndarray]] = {}
        self.bounds: dict[str, tuple[int, int]] = {}
        self.topic_ids: dict[str, int] = {}
        self.count = 0

    def topic_id(self, topic: str) -> int:
        return self.topic_ids.setdefault(topic, len(self.topic_ids))

    def add(self, **cols: np.ndarray) -> None:
        for k, v in cols.items():
            dtype = _DTYPES.get(k)
            if dtype is None and len(v):
                lo, hi = int(v.min()), int(v.max())
                was = self.bounds.get(k)
                self.bounds[k] = (min(lo, was[0]), max(hi, was[1])) if was else (lo, hi)
                dtype = narrowest(lo, hi)
            self.cols.setdefault(k, []).append(v.astype(dtype or np.int8, copy=False))

    def column(self, name: str, dtype=None) -> np.ndarray:
        """The pieces of column ``name`` joined (and let go: one column at a time is doubled)."""
        dtype = dtype or _DTYPES.get(name) or narrowest(*self.bounds.get(name, (0, 0)))
        parts = self.cols.pop(name, None)
        if not parts:
            return np.empty(0, dtype=dtype)
        joined = np.concatenate(parts, dtype=dtype)
        del parts
        give_back_free_memory()  # the pieces' memory, before the next column is joined
        return joined


def narrowest(lo: int, hi: int) -> type:
    """The narrowest signed integer type that holds ``lo`` to ``hi``."""
    for dtype in _NARROW:
        info = np.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return dtype
    return np.int64


def store_timestamp_at(mf: MappedFile, pos: int) -> int:
    """STORETIMESTAMP of the (valid) record at ``pos`` of ``mf``."""
    buf = mf.map()
    sys_flag = fmt.PREFIX_STRUCT.unpack_from(buf, pos)[7]
    at = pos + fmt.PREFIX_SIZE + fmt.host_length(sys_flag, fmt.BORNHOST_V6_FLAG)
    return fmt.STORE_TIMESTAMP_STRUCT.unpack_from(buf, at)[0]
