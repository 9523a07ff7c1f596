"""Write message records as a DLedger log: entries in data files, one index unit per entry.

As DLedger 0.3.1.2 appends on a leader (``DLedgerMmapFileStore.appendAsLeader``,
``DLedgerEntryCoder.encode``/``encodeIndex``) with 4.9.8's ``DLedgerCommitLog`` append hook (the
message's PHYSICALOFFSET is the entry's pos + 48): ``MmapFileList.preAppend`` closes a file with a
blank (magic -1 and the length left) when an entry and 8 bytes do not fit in what is left of it.
Files are full-size and zero-filled past the data, as pre-allocated mapped files are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from formats import dledger as dfmt
from rmqcli.store.naming import offset_to_name

Encode = Callable[[int], bytes]  # the message record for its physical offset


@dataclass(frozen=True)
class Placed:
    index: int
    pos: int
    size: int


def write_log(
    home: Path, records: Iterable[Encode], *, file_size: int, index_file_size: int, term: int = 1
) -> list[Placed]:
    """``home/data`` and ``home/index`` holding ``records`` as entries 0, 1, ... of ``term``, and
    ``home/checkpoint`` with every entry committed, ``home/currterm``; returns where each entry went."""
    data: dict[int, bytearray] = {0: bytearray(file_size)}
    units = bytearray()
    placed: list[Placed] = []
    start, at = 0, 0  # the current file's first offset, the write position in it
    for index, encode in enumerate(records):
        size = dfmt.BODY_OFFSET + len(encode(0))
        if size + dfmt.MIN_BLANK_LEN > file_size - at:
            data[start][at : at + dfmt.BLANK_STRUCT.size] = dfmt.BLANK_STRUCT.pack(
                dfmt.BLANK_MAGIC, file_size - at
            )
            start, at = start + file_size, 0
            data[start] = bytearray(file_size)
        pos = start + at
        body = encode(pos + dfmt.BODY_OFFSET)
        header = dfmt.ENTRY_HEADER_STRUCT.pack(dfmt.MAGIC_1, size, index, term, pos, 0, 0, 0, len(body))
        data[start][at : at + size] = header + body
        units += dfmt.INDEX_UNIT_STRUCT.pack(dfmt.MAGIC_1, pos, size, index, term)
        placed.append(Placed(index, pos, size))
        at += size
    for directory in (home / dfmt.DATA_DIR, home / dfmt.INDEX_DIR):
        directory.mkdir(parents=True, exist_ok=True)
    for offset, buf in data.items():
        (home / dfmt.DATA_DIR / offset_to_name(offset)).write_bytes(buf)
    for offset in range(0, max(len(units), 1), index_file_size):
        chunk = units[offset : offset + index_file_size]
        (home / dfmt.INDEX_DIR / offset_to_name(offset)).write_bytes(
            chunk + bytes(index_file_size - len(chunk))
        )
    last = len(placed) - 1
    (home / dfmt.CHECKPOINT_FILE).write_text(
        f"{dfmt.COMMITTED_INDEX_KEY}={last}\n{dfmt.END_INDEX_KEY}={last}\n"
    )
    return placed
