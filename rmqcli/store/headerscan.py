"""Vectorised header-only scan of a CommitLog file (the fast path behind ``rmq stats``).

Decoding every header in a Python loop tops out well below a million records per second, so
this scan only hops from record to record over the TOTALSIZE fields, then checks the magic codes
and recomputed lengths and gathers the header fields of all records at once with numpy. The
chain must end at a BLANK record, a zero tail or the end of the file. Field offsets come from
the declarations in ``formats.commitlog``. When anything does not fit (a corrupt record) it
returns ``None`` and the caller falls back to the record-by-record scan, which reports the exact
problem.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from formats import commitlog as fmt

_MAGIC_AT = fmt.PREFIX_OFFSETS["magic_code"]
_SIZE = struct.Struct(">i")  # TOTALSIZE, the first prefix field
assert fmt.PREFIX_OFFSETS["total_size"] == 0
_BODY_LENGTH_AT = fmt.AFTER_STORE_HOST_OFFSETS["body_length"]
_MIN_RECORD_SIZE = fmt.calc_msg_length(0, 0, 0, 0)
_PROPS_LEN_SIZE = fmt.PROPERTIES_LENGTH.sizeof()
_STORE_TS_SIZE = fmt.STORE_TIMESTAMP_STRUCT.size


@dataclass
class HeaderBatch:
    """Header fields of the consecutive records of one file, as parallel arrays."""

    position: np.ndarray  # global offsets, int64
    total_size: np.ndarray
    queue_id: np.ndarray
    queue_offset: np.ndarray
    sys_flag: np.ndarray
    store_timestamp: np.ndarray
    topic_index: np.ndarray  # index into ``topics``
    topics: list[str]
    end: int  # position in the file just past the last record

    def __len__(self) -> int:
        return len(self.position)


def gather(arr: np.ndarray, positions: np.ndarray, dtype: str) -> np.ndarray:
    """Big-endian integers of ``dtype`` read at byte ``positions`` of ``arr`` (native order out).

    An overlapping view with a stride of one byte makes every byte offset an element, so one
    fancy index reads them all.
    """
    width = np.dtype(dtype).itemsize
    view = np.ndarray(shape=(len(arr) - width + 1,), dtype=dtype, buffer=arr, strides=(1,))
    return view[positions].astype(dtype[1:])


# Sizes of the fixed header (fields 1-15) and of the born host, by ``sys_flag & HOST_FLAGS``.
_FIXED = {flags: struct.size for flags, struct in fmt.HEADER_STRUCTS.items()}
_FIXED_BY_FLAGS = np.array([_FIXED.get(f, 0) for f in range(fmt.HOST_FLAGS + 1)], dtype=np.int64)
_BORN_BY_FLAGS = np.array(
    [fmt.host_length(f, fmt.BORNHOST_V6_FLAG) for f in range(fmt.HOST_FLAGS + 1)], dtype=np.int64
)
_BODY_LENGTH_BACK = fmt.AFTER_STORE_HOST_STRUCT.size - fmt.AFTER_STORE_HOST_OFFSETS["body_length"]


def _headers(arr: np.ndarray, starts: np.ndarray, limit: int) -> dict[str, np.ndarray] | None:
    """The fixed header fields ``stats`` needs, for every record at once."""
    if int(starts[-1]) + min(_FIXED.values()) > limit:
        return None
    at = fmt.PREFIX_OFFSETS
    sys_flag = gather(arr, starts + at["sys_flag"], ">i4")
    hosts = sys_flag & fmt.HOST_FLAGS
    fixed = _FIXED_BY_FLAGS[hosts]
    if int((starts + fixed).max()) > limit:
        return None
    return {
        "total_size": gather(arr, starts + at["total_size"], ">i4"),
        "queue_id": gather(arr, starts + at["queue_id"], ">i4"),
        "queue_offset": gather(arr, starts + at["queue_offset"], ">i8"),
        "sys_flag": sys_flag,
        "store_timestamp": gather(arr, starts + fmt.PREFIX_SIZE + _BORN_BY_FLAGS[hosts], ">i8"),
        "body_length": gather(arr, starts + fixed - _BODY_LENGTH_BACK, ">i4"),
        "fixed": fixed,
    }


def walk(buf, start: int, limit: int, until: int | None = None) -> list[int] | None:
    """Record starts found by hopping over TOTALSIZE fields (validated afterwards, in bulk).

    With ``until``, the hop must land exactly on it (``None`` when it does not).
    """
    starts: list[int] = []
    append = starts.append
    unpack = _SIZE.unpack_from
    pos = start
    last = limit - 8
    stop = limit if until is None else until
    while pos <= last and pos < stop:
        size = unpack(buf, pos)[0]
        if size < _MIN_RECORD_SIZE:
            break
        append(pos)
        pos += size
    if until is not None and pos != until:
        return None
    return starts


def chain_from_hints(buf, start: int, limit: int, hints: np.ndarray) -> np.ndarray | None:
    """Record starts from known record positions (the consume queues'), hopping only over gaps.

    The result is exactly what ``walk`` from ``start`` would find: consecutive hints must be
    linked by their TOTALSIZE fields, and gaps (records no queue points at) are walked.
    """
    cand = hints[(hints >= start) & (hints <= limit - _MIN_RECORD_SIZE)]
    if len(cand) == 0:
        return None
    arr = np.frombuffer(buf, dtype=np.uint8)
    nxt = cand + gather(arr, cand, ">i4").astype(np.int64)
    pieces: list = []
    head = walk(buf, start, limit, until=int(cand[0]))
    if head is None:
        return None
    pieces.append(head)
    first = 0
    for gap in np.flatnonzero(nxt[:-1] != cand[1:]).tolist():
        pieces.append(cand[first : gap + 1])
        walked = walk(buf, int(nxt[gap]), limit, until=int(cand[gap + 1]))
        if walked is None:
            return None
        pieces.append(walked)
        first = gap + 1
    pieces.append(cand[first:])
    pieces.append(walk(buf, int(nxt[-1]), limit))
    return np.concatenate([np.asarray(p, dtype=np.int64) for p in pieces])


def scan_file(buf, start: int, base: int, hints: np.ndarray | None = None) -> HeaderBatch | None:
    """Headers of the records from ``start`` to the end of the file's data, or ``None``.

    ``hints``: sorted global offsets where records are known to start (from the consume queues);
    they only save hops, every record is still read and checked here.
    """
    limit = len(buf)
    starts = None
    if hints is not None and len(hints):
        starts = chain_from_hints(buf, start, limit, hints - base)
    if starts is None:
        walked = walk(buf, start, limit)
        if not walked:
            return None
        starts = np.array(walked, dtype=np.int64)
    if len(starts) == 0:
        return None
    arr = np.frombuffer(buf, dtype=np.uint8)
    magic = gather(arr, starts + _MAGIC_AT, ">i4")
    if magic[-1] == fmt.BLANK_MAGIC:
        starts, magic = starts[:-1], magic[:-1]
        if len(starts) == 0:
            return None
    if not np.all((magic == fmt.MAGIC_V1) | (magic == fmt.MAGIC_V2)):
        return None
    head = _headers(arr, starts, limit)
    if head is None:
        return None
    sizes = head["total_size"].astype(np.int64)
    ends = starts + sizes
    end = int(ends[-1])
    if end > limit:
        return None
    if end + 8 <= limit:
        tail = bytes(buf[end : end + 8])
        blank = int.from_bytes(tail[4:8], "big", signed=True) == fmt.BLANK_MAGIC
        if not blank and tail != bytes(8):
            return None
    elif any(buf[end:limit]):
        return None

    sys_flag = head["sys_flag"]
    fixed = head["fixed"]
    body_len = head["body_length"].astype(np.int64)
    body_start = starts + fixed
    if np.any(body_len < 0) or np.any(body_start + body_len + 1 > ends):
        return None
    topic_len_at = body_start + body_len
    is_v2 = magic == fmt.MAGIC_V2
    topic_len = arr[topic_len_at].astype(np.int8).astype(np.int64)
    if np.any(is_v2):
        v2_len = gather(arr, np.minimum(topic_len_at, limit - 2), ">i2").astype(np.int64)
        topic_len = np.where(is_v2, v2_len, topic_len)
    topic_start = topic_len_at + np.where(is_v2, 2, 1)
    props_len_at = topic_start + topic_len
    if np.any(topic_len < 0) or np.any(props_len_at + _PROPS_LEN_SIZE > ends):
        return None
    props_len = gather(arr, props_len_at, ">i2").astype(np.int64)
    if np.any(props_len_at + _PROPS_LEN_SIZE + np.maximum(props_len, 0) != ends):
        return None
    store_ts = head["store_timestamp"]
    queue_id = head["queue_id"]
    queue_offset = head["queue_offset"]

    topic_index, topics = group_topics(arr, topic_start, topic_len)
    if topics is None:
        return None
    return HeaderBatch(
        position=starts + base,
        total_size=sizes,
        queue_id=queue_id,
        queue_offset=queue_offset,
        sys_flag=sys_flag,
        store_timestamp=store_ts,
        topic_index=topic_index,
        topics=topics,
        end=end,
    )


def _topic_words(arr: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Each topic as a row of big-endian 64-bit words (bytes past its length zeroed), then its length."""
    words = max(1, -(-int(length.max()) // 8))
    last = len(arr) - 8
    out = np.empty((len(start), words + 1), dtype=np.uint64)
    for j in range(words):
        word = gather(arr, np.minimum(start + 8 * j, last), ">u8")
        keep = np.clip(length - 8 * j, 0, 8).astype(np.uint64)
        mask = np.where(keep == 8, ~np.uint64(0), ~(~np.uint64(0) >> (keep * np.uint64(8))))
        out[:, j] = np.where(keep > 0, word & mask, 0)
    out[:, words] = length
    return out


def group_topics(
    arr: np.ndarray, start: np.ndarray, length: np.ndarray
) -> tuple[np.ndarray, list[str] | None]:
    """An exact grouping of the topic strings: index of each record's topic in the list.

    Topics are grouped by a hash of their words, then every record is compared with its group's
    first record, so a hash collision cannot merge two topics (it falls back to sorting rows).
    """
    rows = _topic_words(arr, start, length)
    digest = np.zeros(len(rows), dtype=np.uint64)
    for j in range(rows.shape[1]):
        digest = digest * np.uint64(0x100000001B3) ^ rows[:, j]
    _, first, inverse = np.unique(digest, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    if not np.array_equal(rows, rows[first[inverse]]):
        void = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.shape[1] * 8))).ravel()
        _, first, inverse = np.unique(void, return_index=True, return_inverse=True)
        inverse = inverse.ravel()
    topics = []
    for i in first.tolist():
        n = int(length[i])
        raw = bytes(arr[int(start[i]) : int(start[i]) + n])
        try:
            topics.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            return inverse, None
    return inverse, topics


def batch_from_headers(headers: list, end: int) -> HeaderBatch:
    """A ``HeaderBatch`` made from ``commitlog.Header`` tuples (the record-by-record path)."""
    topics: dict[str, int] = {}
    index = [topics.setdefault(h.topic, len(topics)) for h in headers]

    def column(name: str) -> np.ndarray:
        return np.array([getattr(h, name) for h in headers], dtype=np.int64)

    return HeaderBatch(
        position=column("position"),
        total_size=column("total_size"),
        queue_id=column("queue_id"),
        queue_offset=column("queue_offset"),
        sys_flag=column("sys_flag"),
        store_timestamp=column("store_timestamp"),
        topic_index=np.array(index, dtype=np.int64),
        topics=list(topics),
        end=end,
    )
