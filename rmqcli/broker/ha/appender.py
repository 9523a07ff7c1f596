"""Where an HA slave writes: raw CommitLog bytes at an offset (``DefaultMessageStore.appendToCommitLog``).

``CommitLogAppender`` is all the slave client needs. ``QueueAppender`` implements it over the
store's writable mapped files (``rmqcli.store.write.files``): files named by their 20-digit
start offset, pre-allocated (sparse) to ``mappedFileSizeCommitLog`` and written through ``mmap``,
as ``CommitLog.appendData`` -> ``MappedFileQueue.getLastMappedFile(startOffset)`` ->
``MappedFile.appendMessage`` does. The bytes are the master's, unchanged: a push never crosses a
file, so the master's BLANK record and the zeros after it end each file here too.

``QueueAppender.open(directory, file_size)`` finds where the replicated bytes end as a broker's
recovery does (``CommitLog.recoverNormally``): file by file from the first, through every file that
ends in a BLANK record or is exactly full, to the end of the last valid record of the first file
that is not. A partial record left by a push cut mid-record is not counted: the slave reports the
offset after its last whole record and the master pushes the rest again. Files past that end (a
file written before an earlier one was finished, which only a lost page cache leaves) are moved
aside to ``<directory>.ha-stale-<millis>/``, never deleted; so is an existing file where a new one
is to be created.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from rmqcli.durable import fsync_dir
from rmqcli.store.mapped import MappedFileQueue
from rmqcli.store.naming import offset_to_name
from rmqcli.store.read.commitlog import CommitLog
from rmqcli.store.write.files import WritableFile, WritableFileQueue

log = logging.getLogger(__name__)


class AppendError(Exception):
    """Bytes that cannot go where they are offered (not at the end, or across a file)."""


class CommitLogAppender(Protocol):
    """The slave side's CommitLog: raw bytes appended at its end, in files of ``file_size`` bytes."""

    file_size: int

    @property
    def max_offset(self) -> int:
        """``getMaxPhyOffset``: offset just past the last byte appended (0: nothing yet)."""
        ...

    def append(self, offset: int, data: bytes | memoryview | list[memoryview]) -> None:
        """Write ``data`` (one buffer, or consecutive ones) at ``offset``, which must be
        ``max_offset`` (any offset when nothing is held yet); ``AppendError`` when it is not or
        when ``data`` would cross a file."""
        ...

    def flush(self) -> None:
        """Everything appended so far to disk (the files written, and the directory when a file was
        created)."""
        ...

    def take_flush(self) -> Callable[[], None]:
        """``flush`` in two steps: what is appended now is taken at once; the function returned
        makes it durable and may run in another thread while appends go on."""
        ...

    def forget(self, from_offset: int) -> None:
        """The clean-up deleted the file starting at ``from_offset``."""
        ...


class QueueAppender:
    """Appends pushed bytes to a ``WritableFileQueue`` (standalone, or a ``StoreWriter``'s
    ``commitlog`` once the broker runs as a slave)."""

    def __init__(self, queue: WritableFileQueue):
        self.queue = queue
        self.file_size = queue.file_size
        self._fds: dict[int, int] = {}  # from_offset -> a descriptor of the file, for pwrite and fsync
        self._dirty: set[int] = set()
        self._created = False

    @classmethod
    def open(cls, directory: Path | str, file_size: int) -> QueueAppender:
        """The appender of the CommitLog directory ``directory`` (created if missing), positioned at
        the end a recovery finds (see the module docstring)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        queue = WritableFileQueue(directory, file_size)
        end, stale = _recovered_end(directory, file_size)
        queue.open_existing()
        kept: list[WritableFile] = []
        for f in queue.files:
            if f.path.name in stale:
                f.close()
                continue
            f.wrote = max(0, min(end - f.from_offset, f.size))
            kept.append(f)
        queue.files = kept
        appender = cls(queue)
        if stale:
            appender._move_aside(sorted(stale), f"they follow the end of the replicated data at {end}")
        return appender

    @property
    def max_offset(self) -> int:
        return self.queue.max_offset

    def append(self, offset: int, data: bytes | memoryview | list[memoryview]) -> None:
        """``data`` at ``offset``; a list is several pushes that follow each other in one file."""
        parts = data if isinstance(data, list) else [data]
        size = sum(len(part) for part in parts)
        files = self.queue.files
        last = files[-1] if files else None
        if last is not None and not last.full and offset == last.from_offset + last.wrote:
            f = last  # the usual case
        else:
            f = self._file_for(offset)
        if f.wrote + size > f.size:
            raise AppendError(
                f"{size} bytes at offset {offset} would cross the end of CommitLog file {f.path.name}"
            )
        fd = self._fds.get(f.from_offset)
        if fd is None:
            fd = self._fds[f.from_offset] = os.open(f.path, os.O_RDWR)
        os.pwritev(fd, parts, f.wrote)  # the same pages as the file's map; 3x mmap's first-touch speed
        f.wrote += size
        self._dirty.add(f.from_offset)

    def forget(self, from_offset: int) -> None:
        """The file starting at ``from_offset`` was deleted: its descriptor is closed."""
        fd = self._fds.pop(from_offset, None)
        self._dirty.discard(from_offset)
        if fd is not None:
            os.close(fd)

    def _file_for(self, offset: int) -> WritableFile:
        end = self.max_offset
        files = self.queue.files
        if files and any(f.wrote for f in files):
            if offset != end:
                raise AppendError(f"bytes offered at offset {offset}, but the CommitLog ends at {end}")
            last = files[-1]
            if not last.full:
                return last
            create = last.from_offset + last.size
        else:  # nothing held yet: start where the bytes start (getLastMappedFile(startOffset))
            create = offset - offset % self.file_size
            if len(files) == 1 and files[0].from_offset == create:
                files[0].wrote = offset - create
                return files[0]
            if files:
                self._drop_empty(files)
        path = self.queue.directory / offset_to_name(create)
        if path.exists():
            self._move_aside([path.name], "a new file is created in its place")
        self.queue.directory.mkdir(parents=True, exist_ok=True)
        f = WritableFile(path, create, self.file_size, offset - create if not self.queue.files else 0)
        self.queue.files.append(f)
        self._created = True
        return f

    def _drop_empty(self, files: list[WritableFile]) -> None:
        """Files that hold no record (created by an earlier session before its first byte): moved
        aside, so that the first bytes can start a file at another offset."""
        for f in files:
            f.close()
        self._move_aside(
            [f.path.name for f in files], "they hold no record and the first bytes start elsewhere"
        )
        self.queue.files = []
        self._dirty.clear()

    def _move_aside(self, names: list[str], why: str) -> None:
        directory = self.queue.directory
        aside = directory.parent / f"{directory.name}.ha-stale-{time.time_ns() // 1_000_000}"
        aside.mkdir(parents=True, exist_ok=True)
        for name in names:
            os.replace(directory / name, aside / name)
        fsync_dir(aside)
        fsync_dir(directory)
        log.warning("HA: moved CommitLog files %s to %s: %s", ", ".join(names), aside, why)

    def take_flush(self) -> Callable[[], None]:
        """What is appended now, to be made durable by the function returned, which may run in
        another thread (``fdatasync`` releases the GIL, ``mmap.flush`` does not) while appends go on."""
        dirty, self._dirty = self._dirty, set()
        fds = [os.dup(self._fds[offset]) for offset in sorted(dirty) if offset in self._fds]
        directory = self.queue.directory if self._created else None
        self._created = False

        def sync() -> None:
            try:
                for fd in fds:
                    os.fdatasync(fd)
            finally:
                for fd in fds:
                    os.close(fd)
            if directory is not None:
                fsync_dir(directory)

        return sync

    def flush(self) -> None:
        self.take_flush()()

    def _close_fds(self) -> None:
        fds, self._fds = self._fds, {}
        self._dirty.clear()
        for fd in fds.values():
            os.close(fd)

    def release(self) -> None:
        """Flush and let go of the files; the queue stays open (a ``StoreWriter`` that owns it)."""
        self.flush()
        self._close_fds()

    def close(self) -> None:
        self.release()
        self.queue.close()


def _recovered_end(directory: Path, file_size: int) -> tuple[int, set[str]]:
    """``(end, names of the files past it)`` of the CommitLog in ``directory`` (module docstring)."""
    queue = MappedFileQueue.open(directory, file_size)
    reader = CommitLog(queue)
    try:
        files = queue.files
        if not files:
            return 0, set()
        end = expected = files[0].from_offset
        stale: set[str] = set()
        done = False
        for mf in files:
            if done or mf.from_offset != expected:
                done = True
                stale.add(mf.name)
                continue
            found = reader.file_end(mf)
            if mf.size == file_size and (
                found.tail == "blank" or (found.tail == "end" and found.data_end == mf.size)
            ):
                end = expected = mf.from_offset + file_size
                continue
            end = mf.from_offset + found.data_end
            done = True
        return end, stale
    finally:
        queue.close()
