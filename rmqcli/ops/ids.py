"""``rmq msgid decode`` and ``rmq offset``: what a message id or a CommitLog offset says, offline.

An id of 32 (IPv4) or 56 (IPv6) hex digits reads two ways, and only the store that wrote it knows
which it is: as an offset message id (``MessageDecoder.decodeMessageId``: store host, port, CommitLog
offset; the offset's file and position follow from ``mappedFileSizeCommitLog``), and as a client's
unique key (``MessageClientIDSetter``: client IP, pid, class loader hash, the time, a counter). The
offset reading is left out when the port field cannot be a port. The unique key holds milliseconds
since the start of a month: its time is ``getNearlyTimeFromID``'s, the latest such moment before
``now`` (local time).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from typing import Any

from formats.commitlog import decode_offset_msg_id, decode_unique_key
from formats.records import format_host
from rmqcli.errors import UsageError
from rmqcli.store.naming import offset_to_name


@dataclass(frozen=True)
class Place:
    """A CommitLog offset as a file and a position in it."""

    offset: int
    file: str
    position: int

    def to_dict(self) -> dict[str, Any]:
        return {"offset": self.offset, "file": self.file, "position": self.position}


def place(offset: int, file_size: int) -> Place:
    if offset < 0:
        raise UsageError(f"offset {offset} is negative")
    start = offset - offset % file_size
    return Place(offset, offset_to_name(start), offset - start)


def parse_place(text: str, file_size: int) -> Place:
    """``OFFSET``, ``FILE`` (a 20-digit CommitLog file name, optionally a path) or ``FILE:POSITION``."""
    value = text.strip().rsplit("/", 1)[-1]
    name, _, pos = value.partition(":")
    if not name.isdigit():
        raise UsageError(f"{text!r} is neither an offset nor a CommitLog file name (20 digits)")
    if len(name) == 20 or pos:
        start = int(name)
        if start % file_size:
            raise UsageError(f"{name} is not a CommitLog file name for {file_size}-byte files")
        try:
            position = int(pos) if pos else 0
        except ValueError:
            raise UsageError(f"{text!r}: the position after ':' is not a number") from None
        if not 0 <= position < file_size:
            raise UsageError(f"position {position} is outside a {file_size}-byte file")
        return place(start + position, file_size)
    return place(int(name), file_size)


def _client_ip(raw: bytes) -> str:
    """``MessageClientIDSetter.getIPStrFromID``: dotted IPv4, or IPv6 as eight 4-digit groups
    (``UtilAll.ipToIPv6Str``)."""
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw))
    return ":".join(raw[i : i + 2].hex() for i in range(0, 16, 2))


def month_time(span_ms: int, now: dt.datetime) -> dt.datetime:
    """``getNearlyTimeFromID``: the start of ``now``'s month plus ``span_ms``, a month earlier when
    that is not before ``now``."""
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if start + dt.timedelta(milliseconds=span_ms) >= now:
        start = (start - dt.timedelta(days=1)).replace(day=1)
    return start + dt.timedelta(milliseconds=span_ms)


def decode(msg_id: str, file_size: int, now: dt.datetime | None = None) -> dict[str, Any]:
    """Both readings of ``msg_id``; ``UsageError`` when it is not 32 or 56 hex digits."""
    text = msg_id.strip()
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raw = b""
    if len(raw) not in (16, 28):
        raise UsageError(f"{msg_id!r} is not a message id (32 or 56 hex digits)")
    now = now or dt.datetime.now()
    result: dict[str, Any] = {"id": text.upper()}
    address, port, offset = decode_offset_msg_id(text)
    if 0 < port < 65536 and offset >= 0:
        result["offsetId"] = {
            "storeHost": format_host(address, port),
            **place(offset, file_size).to_dict(),
        }
    else:
        result["offsetId"] = None
    ip, pid, loader, span, counter = decode_unique_key(text)
    born = month_time(span, now)
    result["uniqueKey"] = {
        "clientIp": _client_ip(ip),
        "pid": pid,
        "classLoaderHash": loader,
        "time": born.strftime("%Y-%m-%d %H:%M:%S.") + f"{born.microsecond // 1000:03d}",
        "timestamp": int(born.timestamp() * 1000),
        "counter": counter,
    }
    return result
