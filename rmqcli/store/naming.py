"""File names of a RocketMQ store (``UtilAll.offset2FileName``, ``timeMillisToHumanString``)."""

from __future__ import annotations

import time

OFFSET_NAME_DIGITS = 20
INDEX_NAME_FORMAT = "%Y%m%d%H%M%S"


def offset_to_name(offset: int) -> str:
    """A file's global start offset, zero-padded to 20 digits."""
    return f"{offset:0{OFFSET_NAME_DIGITS}d}"


def is_offset_name(name: str) -> bool:
    return len(name) == OFFSET_NAME_DIGITS and name.isdigit()


def index_file_name(millis: int, *, utc: bool = False) -> str:
    """``yyyyMMddHHmmssSSS`` of ``millis`` in local time (as the broker names index files)."""
    seconds, ms = divmod(millis, 1000)
    stamp = time.gmtime(seconds) if utc else time.localtime(seconds)
    return time.strftime(INDEX_NAME_FORMAT, stamp) + f"{ms:03d}"


def is_index_name(name: str) -> bool:
    return len(name) == 17 and name.isdigit()
