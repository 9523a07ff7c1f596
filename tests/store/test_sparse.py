"""Sparse-aware comparison: holes read as zeros, data anywhere in either file is compared."""

from __future__ import annotations

import os
from pathlib import Path

from rmqcli.store.sparse import data_extents, same_content, same_tree

SIZE = 64 << 20  # spans several 4 MiB read chunks


def _sparse(path: Path, writes: dict[int, bytes], size: int = SIZE) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)
        for offset, data in writes.items():
            f.seek(offset)
            f.write(data)
    return path


def test_equal_sparse_files(tmp_path: Path) -> None:
    a = _sparse(tmp_path / "a", {0: b"head", 40 << 20: b"x" * 5000})
    b = _sparse(tmp_path / "b", {0: b"head", 40 << 20: b"x" * 5000})
    assert same_content(a, b)


def test_data_in_one_file_where_the_other_has_a_hole(tmp_path: Path) -> None:
    a = _sparse(tmp_path / "a", {0: b"head"})
    b = _sparse(tmp_path / "b", {0: b"head", SIZE - 1: b"\1"})
    assert not same_content(a, b)
    assert not same_content(b, a)


def test_written_zeros_equal_a_hole(tmp_path: Path) -> None:
    a = _sparse(tmp_path / "a", {0: b"head", 8 << 20: bytes(1 << 20)})
    b = _sparse(tmp_path / "b", {0: b"head"})
    assert same_content(a, b)


def test_one_byte_differs_in_the_middle_of_data(tmp_path: Path) -> None:
    data = os.urandom(9 << 20)
    changed = bytearray(data)
    changed[7 << 20] ^= 0xFF
    a = _sparse(tmp_path / "a", {1 << 20: data})
    b = _sparse(tmp_path / "b", {1 << 20: bytes(changed)})
    assert not same_content(a, b)


def test_sizes_differ(tmp_path: Path) -> None:
    a = _sparse(tmp_path / "a", {}, SIZE)
    b = _sparse(tmp_path / "b", {}, SIZE + 1)
    assert not same_content(a, b)


def test_extents_cover_every_written_byte(tmp_path: Path) -> None:
    writes = {0: b"a", 20 << 20: b"b" * 10, SIZE - 3: b"end"}
    path = _sparse(tmp_path / "a", writes)
    fd = os.open(path, os.O_RDONLY)
    try:
        extents = data_extents(fd, SIZE)
    finally:
        os.close(fd)
    for offset, data in writes.items():
        assert any(s <= offset and offset + len(data) <= e for s, e in extents)


def test_tree_compares_names_and_bytes(tmp_path: Path) -> None:
    for side in ("a", "b"):
        (tmp_path / side / "q" / "0").mkdir(parents=True)
        _sparse(tmp_path / side / "q" / "0" / "00000000000000000000", {0: b"unit"}, 600)
    assert same_tree(tmp_path / "a", tmp_path / "b")
    _sparse(tmp_path / "b" / "q" / "0" / "00000000000000000600", {}, 600)
    assert not same_tree(tmp_path / "a", tmp_path / "b")
    assert not same_tree(tmp_path / "a", tmp_path / "missing")


def test_copy_sparse_copies_the_bytes_and_keeps_the_holes(tmp_path: Path) -> None:
    from rmqcli.store.sparse import copy_sparse

    writes = {0: b"head", 40 << 20: os.urandom(5000), SIZE - 3: b"end"}
    src = _sparse(tmp_path / "a", writes)
    dst = copy_sparse(src, tmp_path / "b")
    assert dst.read_bytes() == src.read_bytes()
    assert os.stat(dst).st_mtime == os.stat(src).st_mtime
    if os.stat(src).st_blocks * 512 < SIZE // 2:  # the file system keeps holes
        assert os.stat(dst).st_blocks * 512 < SIZE // 2


def test_copy_sparse_of_a_file_without_holes(tmp_path: Path) -> None:
    from rmqcli.store.sparse import copy_sparse

    src = tmp_path / "a"
    src.write_bytes(os.urandom(3 << 20) + bytes(1 << 20) + b"tail")
    (tmp_path / "dir").mkdir()
    dst = copy_sparse(src, tmp_path / "dir")
    assert dst == tmp_path / "dir" / "a" and dst.read_bytes() == src.read_bytes()
