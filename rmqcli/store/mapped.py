"""Mapped files and mapped-file queues (``MappedFile`` / ``MappedFileQueue`` in RocketMQ).

A queue is a directory (or several, for a multi-path CommitLog) of fixed-size files named by
the 20-digit global offset of their first byte (formats.md §1.1). Files are memory-mapped
read-only on first use.
"""

from __future__ import annotations

import bisect
import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path

from rmqcli.errors import NotFoundError
from rmqcli.store.naming import is_offset_name

_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)


@dataclass
class MappedFile:
    path: Path
    from_offset: int
    size: int
    _map: mmap.mmap | None = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.path.name

    def map(self, *, whole: bool = False) -> mmap.mmap | bytes:
        """The file's bytes, memory-mapped read-only (empty files give ``b""``).

        ``whole``: the caller will read all of it; the kernel is told to read it ahead
        (``MADV_WILLNEED``). Pages are still mapped on first touch: a fault maps a run of cached
        pages at once, which costs less than mapping every page up front (``MAP_POPULATE``).
        """
        if self._map is None:
            if self.size == 0:
                return b""
            with open(self.path, "rb") as handle:
                self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            if whole and hasattr(mmap, "MADV_WILLNEED"):
                self._map.madvise(mmap.MADV_WILLNEED)
        return self._map

    def release(self, start: int = 0, end: int | None = None) -> int:
        """Drop this process's mapped pages between ``start`` and ``end`` (whole pages only; the
        file's end by default) and return where the next release starts.

        The bytes stay in the page cache and are mapped again on the next read (``MADV_DONTNEED``
        of a read-only file mapping): a file read once stops counting in the process's RSS.
        """
        end = self.size if end is None else end
        start -= start % mmap.PAGESIZE
        if end < self.size:
            end -= end % mmap.PAGESIZE
        if self._map is None or _DONTNEED is None:
            return end
        if end <= start:
            return start
        self._map.madvise(_DONTNEED, start, end - start)
        return end

    def read(self, position: int, length: int) -> bytes:
        return self.map()[position : position + length]

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None


class MappedFileQueue:
    """The files of one queue, sorted by start offset."""

    def __init__(self, files: list[MappedFile], file_size: int | None = None):
        self.files = sorted(files, key=lambda f: f.from_offset)
        self._starts = [f.from_offset for f in self.files]
        sizes = {f.size for f in self.files}
        self.file_size = file_size or (max(sizes) if sizes else 0)

    @classmethod
    def open(cls, directories: list[Path] | Path, file_size: int | None = None) -> MappedFileQueue:
        dirs = [directories] if isinstance(directories, Path) else directories
        files = []
        for directory in dirs:
            try:
                entries = os.scandir(directory)
            except (FileNotFoundError, NotADirectoryError):
                continue
            with entries:
                for entry in entries:
                    if is_offset_name(entry.name) and entry.is_file():
                        files.append(MappedFile(Path(entry.path), int(entry.name), entry.stat().st_size))
        return cls(files, file_size)

    def __len__(self) -> int:
        return len(self.files)

    def __iter__(self):
        return iter(self.files)

    @property
    def min_offset(self) -> int:
        return self.files[0].from_offset if self.files else 0

    def find(self, offset: int) -> MappedFile:
        """The file holding global ``offset``; ``NotFoundError`` if no file does."""
        i = bisect.bisect_right(self._starts, offset) - 1
        if i >= 0:
            candidate = self.files[i]
            if offset < candidate.from_offset + max(candidate.size, self.file_size):
                return candidate
        raise NotFoundError(f"no file holds offset {offset}")

    def index_of(self, mapped_file: MappedFile) -> int:
        return self.files.index(mapped_file)

    def close(self) -> None:
        for f in self.files:
            f.close()
