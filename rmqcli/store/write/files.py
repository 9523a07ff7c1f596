"""Writable mapped files and queues of them (``MappedFile`` / ``MappedFileQueue`` for writing).

Files are pre-allocated to their full size (sparse, zero-filled) and written through ``mmap``,
as a broker does (formats.md §1.1, §2.1). Names are the 20-digit global offset of the first byte.

A write through a map into a hole the file system cannot fill kills the process with SIGBUS, so
the blocks are reserved first (``WritableFile.reserve``: ``posix_fallocate`` of the range about to
be written, ``ALLOCATE_CHUNK`` ahead, one call per chunk): a full disk raises ``DiskFullError``
(ENOSPC) before anything is written. A queue made with ``keep_free`` (the CommitLog) also refuses a
chunk that would leave less than that free, so the consume queues and the index written after
each record still find room (rmq's own; issue 41).
"""

from __future__ import annotations

import bisect
import errno
import mmap
import os
from pathlib import Path

from rmqcli.durable import fsync_dir
from rmqcli.store.naming import is_offset_name, offset_to_name

ALLOCATE_CHUNK = 1 << 20
_FULL = (errno.ENOSPC, errno.EDQUOT)


class DiskFullError(OSError):
    """No room on the disk for bytes about to be written (nothing was written)."""


def full_error(exc: OSError, path: Path) -> OSError:
    """``exc`` as a ``DiskFullError`` when it says the disk is full."""
    if exc.errno in _FULL and not isinstance(exc, DiskFullError):
        return DiskFullError(exc.errno, exc.strerror or os.strerror(exc.errno), str(path))
    return exc


def map_writable(path: Path, size: int) -> mmap.mmap:
    """``path`` mapped read-write, resized to ``size`` first. A new file is made at its full size
    (zero-filled, sparse) under a hidden name and renamed into place, so a process killed while
    creating it never leaves a short file that a later recovery would have to refuse."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        try:
            fd = _create_full(path, size)
        except OSError as exc:
            raise full_error(exc, path) from None
    try:
        if os.fstat(fd).st_size != size:
            os.ftruncate(fd, size)
        return mmap.mmap(fd, size, access=mmap.ACCESS_WRITE)
    finally:
        os.close(fd)


def _create_full(path: Path, size: int) -> int:
    """``path`` created at ``size`` bytes by rename (``.NAME.creating`` first); its open fd."""
    staging = path.with_name(f".{path.name}.creating")
    fd = os.open(staging, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, size)
        os.rename(staging, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


class WritableFile:
    """One pre-allocated file, memory-mapped for writing; ``wrote`` is the write position."""

    def __init__(self, path: Path, from_offset: int, size: int, wrote: int = 0, keep_free: int = 0):
        self.path = path
        self.from_offset = from_offset
        self.size = size
        self.wrote = wrote
        self.first_in_queue = False
        self.keep_free = keep_free
        self._lo = self._hi = 0  # a range of the file whose blocks are reserved
        self._map = map_writable(path, size)

    @property
    def remaining(self) -> int:
        return self.size - self.wrote

    @property
    def full(self) -> bool:
        return self.wrote >= self.size

    def reserved(self, length: int) -> bool:
        """Whether ``length`` bytes at the write position have their blocks."""
        return self._lo <= self.wrote and self.wrote + length <= self._hi

    def reserve(self, pos: int, end: int) -> None:
        """Blocks for the bytes ``[pos, end)`` before they are written; ``DiskFullError`` if the
        disk has none (or, with ``keep_free``, would keep less than that free)."""
        if self._lo <= pos and end <= self._hi:
            return
        lo = pos - pos % ALLOCATE_CHUNK
        hi = min(self.size, end - end % ALLOCATE_CHUNK + ALLOCATE_CHUNK)
        try:
            if self.keep_free:
                fs = os.statvfs(self.path)
                if fs.f_bavail * fs.f_frsize < (hi - lo) + self.keep_free:
                    raise DiskFullError(errno.ENOSPC, "less free space than the store keeps", str(self.path))
            fd = os.open(self.path, os.O_RDWR)
            try:
                os.posix_fallocate(fd, lo, hi - lo)
            finally:
                os.close(fd)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # no fallocate there: unguarded
                raise full_error(exc, self.path) from None
        self._lo, self._hi = lo, hi

    def append(self, data: bytes) -> int:
        """Write ``data`` at the write position; returns the position it was written at."""
        pos = self.wrote
        end = pos + len(data)
        if end > self._hi or pos < self._lo:
            self.reserve(pos, end)
        self._map[pos:end] = data
        self.wrote = end
        return pos

    def write_at(self, pos: int, data: bytes) -> None:
        end = pos + len(data)
        if end > self._hi or pos < self._lo:
            self.reserve(pos, end)
        self._map[pos:end] = data

    def read(self, pos: int, length: int) -> bytes:
        return self._map[pos : pos + length]

    def flush(self) -> None:
        """msync of the whole map, on the calling thread (it holds the GIL: a broker flushes its
        files in a worker thread with ``datasync_path`` instead); a closed file has nothing left."""
        if not self._map.closed:
            self._map.flush()

    def close(self) -> None:
        if not self._map.closed:
            self._map.flush()
            self._map.close()


class WritableFileQueue:
    """The files of one directory, each ``file_size`` bytes, named by start offset."""

    def __init__(self, directory: Path, file_size: int, keep_free: int = 0):
        self.directory = directory
        self.file_size = file_size
        self.keep_free = keep_free  # bytes a new chunk must leave free on the disk (``reserve``)
        self.files: list[WritableFile] = []

    def open_existing(self) -> None:
        """Map the files already in the directory (all considered full until told otherwise)."""
        if not self.directory.is_dir():
            return
        names = sorted(p.name for p in self.directory.iterdir() if is_offset_name(p.name))
        for name in names:
            path = self.directory / name
            self.files.append(WritableFile(path, int(name), self.file_size, self.file_size, self.keep_free))

    @property
    def last(self) -> WritableFile | None:
        return self.files[-1] if self.files else None

    def holding(self, offset: int) -> WritableFile | None:
        """The file ``offset`` falls in (past its end too, for the last); ``None`` before the first."""
        i = bisect.bisect_right(self.files, offset, key=lambda f: f.from_offset) - 1
        return self.files[i] if i >= 0 else None

    def first_start(self, default: int) -> int:
        """The first file's start offset (``default`` with no file): where a walk from before it goes on."""
        return self.files[0].from_offset if self.files else default

    def last_for(self, start_offset: int) -> WritableFile:
        """``MappedFileQueue.getLastMappedFile(startOffset, true)``: the last file, a new one if full."""
        last = self.last
        if last is None:
            create = start_offset - start_offset % self.file_size
        elif last.full:
            create = last.from_offset + self.file_size
        else:
            return last
        self.directory.mkdir(parents=True, exist_ok=True)
        created = WritableFile(
            self.directory / offset_to_name(create), create, self.file_size, 0, self.keep_free
        )
        created.first_in_queue = last is None
        self.files.append(created)
        return created

    @property
    def max_offset(self) -> int:
        """Global offset of the write position."""
        last = self.last
        return last.from_offset + last.wrote if last else 0

    def flush(self) -> None:
        for f in self.files:
            f.flush()
        fsync_dir(self.directory)

    def close(self) -> None:
        for f in self.files:
            f.close()


def datasync_path(path: Path) -> None:
    """``fdatasync`` of the file at ``path`` through a descriptor of its own. On Linux it writes the
    page-cache pages dirtied through a shared mapping of the file (no msync needed), and it releases
    the GIL, which ``mmap.flush`` does not: a worker thread flushes while the event loop goes on.
    A file removed meanwhile (the clean-up) needs no flush."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)
