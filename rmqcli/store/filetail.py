"""What ends the data of a CommitLog file: a BLANK record, zeros, the file's end, or something else.

Shared by the record-by-record scans (``rmqcli.store.read.commitlog``) and the bulk scan
(``rmqcli.store.scan.headerscan``); formats.md §1.10 (``CommitLog.doAppend`` writes the BLANK record).
"""

from __future__ import annotations

from formats import commitlog as fmt

_SIZE_MAGIC = fmt.SIZE_MAGIC_STRUCT


def classify_tail(buf, pos: int, limit: int) -> tuple[str, int | None]:
    """What ends a file's data at ``pos``: a BLANK record, zeros, nothing, or something else.

    Returns ``("blank", its TOTALSIZE)``, ``("zeros", None)``, ``("end", None)`` or ``("garbage", None)``.
    """
    if pos >= limit:
        return "end", None
    if pos + _SIZE_MAGIC.size <= limit:
        total, magic = _SIZE_MAGIC.unpack_from(buf, pos)
        if magic == fmt.BLANK_MAGIC:
            return "blank", total
        if total == 0 and magic == 0:
            return "zeros", None
    elif not any(buf[pos:limit]):
        return "zeros", None
    return "garbage", None
