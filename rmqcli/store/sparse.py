"""Sparse-aware file comparison.

RocketMQ pre-allocates its files (an index file is 420 MB by default) and fills a small part:
on Linux most of such a file is a hole. Comparing two of them reads only the ranges where either
file holds data (``lseek`` with ``SEEK_DATA``/``SEEK_HOLE``); a hole reads as zeros, so outside
those ranges both files are zero. Where the platform or file system cannot say, the whole file
is read.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

CHUNK = 4 << 20


def data_extents(fd: int, size: int) -> list[tuple[int, int]]:
    """The [start, end) ranges of ``fd`` that may hold data (the whole file if unknown)."""
    seek_data = getattr(os, "SEEK_DATA", None)
    seek_hole = getattr(os, "SEEK_HOLE", None)
    if seek_data is None or seek_hole is None:
        return [(0, size)] if size else []
    extents: list[tuple[int, int]] = []
    pos = 0
    try:
        while pos < size:
            try:
                start = os.lseek(fd, pos, seek_data)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # no data at or after pos
                    break
                raise
            if start >= size:
                break
            end = min(os.lseek(fd, start, seek_hole), size)
            extents.append((start, end))
            pos = end
    except OSError:
        return [(0, size)] if size else []
    return extents


def _union(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(a + b):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def same_content(a: Path, b: Path) -> bool:
    """Whether files ``a`` and ``b`` hold the same bytes (same size, same data, holes as zeros)."""
    fa = os.open(a, os.O_RDONLY)
    try:
        fb = os.open(b, os.O_RDONLY)
        try:
            size = os.fstat(fa).st_size
            if os.fstat(fb).st_size != size:
                return False
            for start, end in _union(data_extents(fa, size), data_extents(fb, size)):
                pos = start
                while pos < end:
                    length = min(CHUNK, end - pos)
                    if os.pread(fa, length, pos) != os.pread(fb, length, pos):
                        return False
                    pos += length
            return True
        finally:
            os.close(fb)
    finally:
        os.close(fa)


def same_tree(a: Path, b: Path) -> bool:
    """Whether two directories hold the same file names with the same bytes."""
    files_a = {p.relative_to(a) for p in a.rglob("*") if p.is_file()} if a.is_dir() else set()
    files_b = {p.relative_to(b) for p in b.rglob("*") if p.is_file()} if b.is_dir() else set()
    return files_a == files_b and all(same_content(a / rel, b / rel) for rel in sorted(files_a))


def copy_sparse(src: str | Path, dst: str | Path) -> Path:
    """``shutil.copy2`` that copies only the ranges of ``src`` that may hold data (``data_extents``):
    ``dst`` gets the same size and bytes, with holes where ``src`` has them, and ``src``'s times
    and mode. A 420 MB index file holding 50 MB of entries costs 50 MB of reads and writes."""
    import shutil

    src, dst = Path(src), Path(dst)
    if dst.is_dir():
        dst = dst / src.name
    fin = os.open(src, os.O_RDONLY)
    try:
        size = os.fstat(fin).st_size
        fout = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for start, end in data_extents(fin, size):
                pos = start
                while pos < end:
                    data = os.pread(fin, min(CHUNK, end - pos), pos)
                    if not data:
                        break
                    if data.count(0) != len(data):  # a run of zeros inside an extent stays a hole
                        os.pwrite(fout, data, pos)
                    pos += len(data)
            os.ftruncate(fout, size)
        finally:
            os.close(fout)
    finally:
        os.close(fin)
    shutil.copystat(src, dst)
    return dst
