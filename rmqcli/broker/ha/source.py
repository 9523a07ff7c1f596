"""What an HA master pushes from: read-only access to a CommitLog (``DefaultMessageStore.getCommitLogData``).

``CommitLogSource`` is all the master service needs. Two implementations:

* ``StoreFilesSource``: the files of a store nobody writes to (the offline reader's mapped files,
  ``rmqcli.store.mapped``); its end is found as a broker's recovery finds it.
* ``WriterSource``: the live files of a ``StoreWriter`` (``writer.commitlog``), whose ends move as
  the broker appends; the broker tells the master service after each append (``notify_append``).

A read never crosses a file: ``CommitLog.getData`` selects from the one mapped file that holds
the offset, up to its write position, and a 4.9.8 slave cannot append a push that crosses files.
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Protocol

from rmqcli.store.mapped import MappedFile, MappedFileQueue
from rmqcli.store.read.commitlog import CommitLog
from rmqcli.store.write.files import WritableFile, WritableFileQueue


class CommitLogSource(Protocol):
    """The master side's view of its CommitLog."""

    @property
    def file_size(self) -> int:
        """``mappedFileSizeCommitLog``: a slave reporting 0 is served from the last file's start."""
        ...

    def min_offset(self) -> int:
        """Offset of the first byte still held (the first file's name)."""
        ...

    def max_offset(self) -> int:
        """``getMaxPhyOffset``: offset just past the last byte written."""
        ...

    def read(self, offset: int, limit: int) -> bytes:
        """At most ``limit`` bytes from ``offset``, within the file holding it and below
        ``max_offset()``; empty when there are none (yet)."""
        ...


def _index(starts: list[int], offset: int) -> int:
    return bisect.bisect_right(starts, offset) - 1


class StoreFilesSource:
    """The CommitLog files of a store at rest (``root/commitlog``, or a CommitLog directory)."""

    def __init__(self, directory: Path | str, file_size: int | None = None):
        path = Path(directory)
        if (path / "commitlog").is_dir():
            path = path / "commitlog"
        self.directory = path
        self.queue = MappedFileQueue.open(path, file_size)
        self._files: list[MappedFile] = list(self.queue.files)
        self._starts = [f.from_offset for f in self._files]
        self._max = CommitLog(self.queue).max_offset() if self._files else 0

    @property
    def file_size(self) -> int:
        return self.queue.file_size

    def min_offset(self) -> int:
        return self.queue.min_offset

    def max_offset(self) -> int:
        return self._max

    def read(self, offset: int, limit: int) -> bytes:
        i = _index(self._starts, offset)
        if i < 0 or offset >= self._max:
            return b""
        mf = self._files[i]
        end = min(mf.from_offset + mf.size, self._max, offset + limit)
        if end <= offset:
            return b""
        pos = offset - mf.from_offset
        return mf.map()[pos : pos + (end - offset)]

    def close(self) -> None:
        self.queue.close()


class WriterSource:
    """The files of a live ``WritableFileQueue`` (a ``StoreWriter``'s ``commitlog``): each file is
    readable up to its write position."""

    def __init__(self, queue: WritableFileQueue):
        self.queue = queue

    @property
    def file_size(self) -> int:
        return self.queue.file_size

    def min_offset(self) -> int:
        files = self.queue.files
        return files[0].from_offset if files else 0

    def max_offset(self) -> int:
        return self.queue.max_offset

    def read(self, offset: int, limit: int) -> bytes:
        files: list[WritableFile] = self.queue.files
        i = bisect.bisect_right(files, offset, key=lambda f: f.from_offset) - 1
        if i < 0:
            return b""
        f = files[i]
        pos = offset - f.from_offset
        end = min(f.wrote, pos + limit)
        if end <= pos:
            return b""
        return f.read(pos, end - pos)
