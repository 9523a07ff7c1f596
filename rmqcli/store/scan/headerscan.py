"""The bulk CommitLog scan: every record of a file checked and its fields read at once with numpy.

Decoding every header in a Python loop tops out well below a million records per second, so the
scan hops from record to record over the TOTALSIZE fields (or over the consume queues' record
positions, ``_starts_and_heads``), then reads two blocks per record with one fancy index each: the
fixed header (fields 1-15, as wide as with IPv4 hosts, read again wider only for IPv6 hosts) and
the tail after the body (topic length, topic, properties length and, when asked for, the
properties, whose lengths are then read from that block). With hints, the header block read at
the hinted positions is the one whose TOTALSIZE fields link the chain. Field offsets come from
the declarations in ``formats.commitlog``.

Every record gets the checks of ``CommitLog.checkMessageAndReturnSize`` (formats.md §1.14):
known magic code, TOTALSIZE within the file and not below the smallest record, body, topic and
properties lengths within the record, and TOTALSIZE equal to ``calMsgLength``. ``scan_records``
keeps the valid run of records from ``start`` and says where it stopped: at a BLANK record, zeros
or the end of the file (§1.10), or at a record that failed (``bad``). ``scan_file`` is the strict
form behind ``rmq stats``: ``None`` unless the whole file is a clean chain, and the caller falls
back to the record-by-record scan, which reports the exact problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from formats import commitlog as fmt
from formats.derive import field_offsets, flat_fields
from rmqcli.store.filetail import classify_tail

_SIZE = fmt.TOTAL_SIZE_STRUCT
assert fmt.PREFIX_OFFSETS["total_size"] == 0
_MIN_RECORD_SIZE = fmt.calc_msg_length(0, 0, 0, 0)
_PROPS_LEN_SIZE = fmt.PROPERTIES_LENGTH.sizeof()
_TL_V1 = fmt.topic_length_size(fmt.MAGIC_V1)
_TL_V2 = fmt.topic_length_size(fmt.MAGIC_V2)
_HEADER_WIDTH = max(s.size for s in fmt.HEADER_STRUCTS.values())
_TAIL_WIDTHS = tuple(range(16, 513, 16))  # candidate row widths of the tail block
_PYTHON_SHARE = 1000  # the tail block may leave one record in this many to be sliced one by one


def _record_dtype(schema, itemsize: int) -> np.dtype:
    """A big-endian numpy record type with the integer fields of a fixed-size Construct ``schema``."""
    offsets = field_offsets(schema)
    ints = [(name, size) for name, code, size in flat_fields(schema) if not code.endswith("s")]
    return np.dtype(
        {
            "names": [name for name, _ in ints],
            "formats": [f">i{size}" for _, size in ints],
            "offsets": [offsets[name] for name, _ in ints],
            "itemsize": itemsize,
        }
    )


# The fixed header (fields 1-15) of each host combination, keyed by ``sys_flag & HOST_FLAGS``.
_HEADER_DTYPES = {
    flags: _record_dtype(
        fmt.header_schema(bool(flags & fmt.BORNHOST_V6_FLAG), bool(flags & fmt.STOREHOST_V6_FLAG)),
        _HEADER_WIDTH,
    )
    for flags in fmt.HEADER_STRUCTS
}
_PREFIX_DTYPE = _record_dtype(fmt.RecordPrefix, _HEADER_WIDTH)
# Headers are first read as wide as the IPv4 one (the common case), and again only for IPv6 hosts.
_V4_WIDTH = fmt.HEADER_STRUCTS[0].size
_V4_DTYPE = _record_dtype(fmt.header_schema(False, False), _V4_WIDTH)
_V4_PREFIX_DTYPE = _record_dtype(fmt.RecordPrefix, _V4_WIDTH)
_FIXED_BY_FLAGS = np.array(
    [fmt.HEADER_STRUCTS[f].size if f in fmt.HEADER_STRUCTS else 0 for f in range(fmt.HOST_FLAGS + 1)],
    dtype=np.int64,
)


@dataclass
class Tails:
    """The tails of a batch's records (topic length, topic, properties length, properties) in one
    buffer: rows of ``width`` bytes for ``rows`` (the records whose tail fits), then the tails of
    the other records back to back. Positions of a batch (``tail_start`` ...) index ``data``.
    """

    data: np.ndarray  # uint8
    width: int
    rows: np.ndarray  # records in the block, in order; record rows[j] is at data[j*width:]
    whole: bool  # the properties are inside (not only up to the properties length field)

    @property
    def block(self) -> np.ndarray:
        """The (len(rows) + 1, width) matrix of the block rows; the last row is zeros."""
        return self.data[: (len(self.rows) + 1) * self.width].reshape(-1, self.width)


@dataclass
class HeaderBatch:
    """Header fields of the consecutive records of one file, as parallel arrays.

    The first nine fields are what the header-only scan (``rmq stats``) reads; the bulk scan
    fills the rest too (positions are file positions; ``None`` where not read).
    """

    position: np.ndarray  # global offsets, int64
    total_size: np.ndarray
    queue_id: np.ndarray
    queue_offset: np.ndarray
    sys_flag: np.ndarray
    store_timestamp: np.ndarray
    topic_index: np.ndarray  # index into ``topics``
    topics: list[str]
    end: int  # position in the file just past the last record
    physical_offset: np.ndarray | None = None
    body_crc: np.ndarray | None = None
    body_start: np.ndarray | None = None
    body_length: np.ndarray | None = None
    properties_start: np.ndarray | None = None  # positions in ``tails.data``
    properties_length: np.ndarray | None = None  # 0 where PROPERTIESLENGTH <= 0
    tails: Tails | None = None
    bad_topics: list[int] | None = None  # entries of ``topics`` that are not valid UTF-8
    bad: int | None = None  # a record failing the checks starts at ``end`` (scan_records)

    def __len__(self) -> int:
        return len(self.position)


# --- bulk reads ---------------------------------------------------------------------------------
def gather(arr: np.ndarray, positions: np.ndarray, dtype: str) -> np.ndarray:
    """Big-endian integers of ``dtype`` read at byte ``positions`` of ``arr`` (native order out).

    An overlapping view with a stride of one byte makes every byte offset an element, so one
    fancy index reads them all.
    """
    width = np.dtype(dtype).itemsize
    if len(arr) < width:  # an empty file: nothing can be read (nor asked for)
        assert not len(positions)
        return np.zeros(0, dtype=dtype[1:])
    view = np.ndarray(shape=(len(arr) - width + 1,), dtype=dtype, buffer=arr, strides=(1,))
    return view[positions].astype(dtype[1:])


def block_gather(arr: np.ndarray, positions: np.ndarray, width: int) -> np.ndarray:
    """``arr[p:p+width]`` for every position, as rows of a (n, width) uint8 matrix (a new array).

    One gather of ``width``-byte items over a one-byte-stride view; rows running past the end
    of ``arr`` are zero-padded.
    """
    n = len(positions)
    last = len(arr) - width
    if n and last >= 0 and int(positions.max()) <= last:
        view = np.ndarray(shape=(last + 1,), dtype=f"V{width}", buffer=arr, strides=(1,))
        return view[positions].view(np.uint8).reshape(n, width)
    out = np.zeros((n, width), dtype=np.uint8)
    if n == 0:
        return out
    inside = positions <= last
    if last >= 0 and inside.any():
        view = np.ndarray(shape=(last + 1,), dtype=f"V{width}", buffer=arr, strides=(1,))
        out.view(f"V{width}").ravel()[inside] = view[positions[inside]]
    for i in np.flatnonzero(~inside).tolist():
        p = int(positions[i])
        chunk = arr[p : p + width]
        out[i, : len(chunk)] = chunk
    return out


# --- record starts ------------------------------------------------------------------------------
def walk(buf, start: int, limit: int, until: int | None = None) -> list[int] | None:
    """Record starts found by hopping over TOTALSIZE fields (validated afterwards, in bulk).

    With ``until``, the hop must land exactly on it (``None`` when it does not). A ``start``
    outside the file (the hop of a negative TOTALSIZE, e.g. INT32_MIN) walks nothing.
    """
    if start < 0:
        return None if until is not None else []
    starts: list[int] = []
    append = starts.append
    unpack = _SIZE.unpack_from
    pos = start
    last = limit - fmt.END_FILE_MIN_BLANK_LENGTH  # room for at least a BLANK record
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


def _hints_in(hints: np.ndarray, start: int, limit: int) -> np.ndarray:
    """The sorted ``hints`` (file positions) where a record could start between ``start`` and ``limit``."""
    lo = np.searchsorted(hints, start, side="left")
    hi = np.searchsorted(hints, limit - _MIN_RECORD_SIZE, side="right")
    return hints[lo:hi]


def _link_pieces(buf, start: int, limit: int, cand: np.ndarray, nxt: np.ndarray) -> list | None:
    """The chain of records from ``start`` once the TOTALSIZE hop ``nxt`` of every hinted candidate
    ``cand`` is known, in order, as ``(a, b)`` for the run ``cand[a:b]`` and lists of the starts
    walked between runs (``None``: the hints do not link up)."""
    pieces: list = []
    head = walk(buf, start, limit, until=int(cand[0]))
    if head is None:
        return None
    pieces.append(head)
    first = 0
    for gap in np.flatnonzero(nxt[:-1] != cand[1:]).tolist():
        pieces.append((first, gap + 1))
        walked = walk(buf, int(nxt[gap]), limit, until=int(cand[gap + 1]))
        if walked is None:
            return None
        pieces.append(walked)
        first = gap + 1
    pieces.append((first, len(cand)))
    pieces.append(walk(buf, int(nxt[-1]), limit))
    return pieces


def _starts_and_heads(buf, arr: np.ndarray, start: int, base: int, hints: np.ndarray | None):
    """File positions of the chain of records from ``start`` and the header block of those records.

    The starts are exactly what ``walk`` from ``start`` would find. With hints (the consume queues'
    record positions), the header block is read once at the hinted positions and their TOTALSIZE
    fields link the chain; only the records walked between hints (no queue points at them)
    are read on their own.
    """
    limit = len(buf)
    if hints is not None and len(hints):
        lo, hi = np.searchsorted(hints, (base + start, base + limit))
        cand = _hints_in(hints[lo:hi] - base, start, limit)
        if len(cand):
            head = block_gather(arr, cand, _V4_WIDTH)
            total = head.view(_V4_PREFIX_DTYPE).ravel()["total_size"]
            pieces = _link_pieces(buf, start, limit, cand, cand + total)
            if pieces is not None and len(pieces) == 3 and not pieces[0] and not pieces[2]:
                return cand, head
            if pieces is not None:  # the hinted runs and the records walked between them
                starts, heads = [], []
                for p in pieces:
                    if isinstance(p, tuple):
                        starts.append(cand[p[0] : p[1]])
                        heads.append(head[p[0] : p[1]])
                    elif p:
                        starts.append(np.asarray(p, dtype=np.int64))
                        heads.append(block_gather(arr, starts[-1], _V4_WIDTH))
                return np.concatenate(starts), np.concatenate(heads)
    starts = np.array(walk(buf, start, limit), dtype=np.int64)
    return starts, block_gather(arr, starts, _V4_WIDTH)


# --- the scan -----------------------------------------------------------------------------------
def _first_false(ok: np.ndarray) -> int:
    return len(ok) if ok.all() else int(np.argmin(ok))


def _choose_width(need: np.ndarray) -> int:
    """The narrowest candidate row width that leaves at most one record in ``_PYTHON_SHARE`` out."""
    allowed = len(need) // _PYTHON_SHARE
    for width in _TAIL_WIDTHS:
        if np.count_nonzero(need > width) <= allowed:
            return width
    return _TAIL_WIDTHS[-1]


def _fixed_fields(head: np.ndarray, hosts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """STORETIMESTAMP and BODYLENGTH of each header row (their offsets depend on the hosts)."""
    n = len(hosts)
    first = int(hosts[0]) if n else 0
    if not n or bool(np.all(hosts == first)):
        rec = head.view(_V4_DTYPE if head.shape[1] == _V4_WIDTH else _HEADER_DTYPES[first]).ravel()
        return rec["store_timestamp"].astype(np.int64), rec["body_length"].astype(np.int64)
    store_ts = np.empty(n, dtype=np.int64)
    body_len = np.empty(n, dtype=np.int64)
    for flags, dtype in _HEADER_DTYPES.items():
        rows = np.flatnonzero(hosts == flags)
        if len(rows):
            rec = head[rows].view(dtype).ravel()
            store_ts[rows] = rec["store_timestamp"]
            body_len[rows] = rec["body_length"]
    return store_ts, body_len


def _read_tails(
    arr: np.ndarray, tail_at: np.ndarray, need: np.ndarray, whole: bool
) -> tuple[Tails, np.ndarray]:
    """The tail block (``need`` bytes of each record from ``tail_at``); returns it and each
    record's tail position in its ``data``.

    The block has one zero row more than it has records, so 8-byte reads near its end stay inside.
    """
    n = len(tail_at)
    width = _choose_width(need) if n else _TAIL_WIDTHS[0]
    fits = need <= width
    rows = np.flatnonzero(fits) if not fits.all() else np.arange(n, dtype=np.int64)
    m = len(rows)
    block = block_gather(arr, np.append(tail_at[rows], tail_at[0] if n else 0), width)
    block[m] = 0
    pos = np.empty(n, dtype=np.int64)
    pos[rows] = np.arange(m, dtype=np.int64) * width
    chunks = [block.ravel()]
    offset = block.size
    for i in np.flatnonzero(~fits).tolist():
        a = int(tail_at[i])
        chunk = arr[a : a + int(need[i])]
        pos[i] = offset
        chunks.append(chunk)
        offset += len(chunk)
    if len(chunks) > 1:
        chunks.append(np.zeros(8, dtype=np.uint8))
    data = np.concatenate(chunks) if len(chunks) > 1 else chunks[0]
    return Tails(data, width, rows, whole), pos


class _Heads(NamedTuple):
    """The fixed headers of the chain of records from a start, read in bulk and checked: the first
    ``n`` pass the checks that need only the fixed header and the record's size."""

    starts: np.ndarray  # file positions
    prefix: np.ndarray  # the record prefix of each (``fmt.RecordPrefix`` fields)
    head: np.ndarray  # the header block (rows as wide as the widest header present)
    sys_flag: np.ndarray
    hosts: np.ndarray  # sys_flag & HOST_FLAGS
    total: np.ndarray
    fixed: np.ndarray  # fixed header size
    store_ts: np.ndarray
    body_len: np.ndarray
    v2: np.ndarray  # MAGIC_V2 (a two-byte topic length)
    tl_size: np.ndarray  # size of the topic length field
    tail_len: np.ndarray  # bytes after the body
    n: int


def _read_heads(buf, arr: np.ndarray, start: int, base: int, hints: np.ndarray | None) -> _Heads:
    """The headers of the chain from ``start``: known magic, TOTALSIZE within the file and not
    below the smallest record, body length within the record, room for the lengths after it."""
    limit = len(buf)
    starts, head = _starts_and_heads(buf, arr, start, base, hints)
    prefix = head.view(_V4_PREFIX_DTYPE).ravel()
    sys_flag = prefix["sys_flag"].astype(np.int64)
    hosts = sys_flag & fmt.HOST_FLAGS
    if hosts.any():  # IPv6 hosts: the wider headers
        head = block_gather(arr, starts, _HEADER_WIDTH)
        prefix = head.view(_PREFIX_DTYPE).ravel()
    magic = prefix["magic_code"]
    total = prefix["total_size"].astype(np.int64)
    fixed = _FIXED_BY_FLAGS[hosts]
    store_ts, body_len = _fixed_fields(head, hosts)
    v2 = magic == fmt.MAGIC_V2
    tl_size = np.where(v2, _TL_V2, _TL_V1)
    tail_len = total - fixed - body_len
    ok = (magic == fmt.MAGIC_V1) | v2
    ok &= (total >= _MIN_RECORD_SIZE) & (starts + total <= limit)
    ok &= (body_len >= 0) & (tail_len >= tl_size + _PROPS_LEN_SIZE)
    n = _first_false(ok)
    return _Heads(
        starts, prefix, head, sys_flag, hosts, total, fixed, store_ts, body_len, v2, tl_size, tail_len, n
    )


def _tail_lengths(
    src: np.ndarray, len_at: np.ndarray, v2: np.ndarray, tl_size: np.ndarray, tail_len: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The topic and properties lengths of each record's tail (at ``len_at`` in ``src``), for the
    leading records whose lengths fill their tail exactly (the reads stay inside each tail)."""
    topic_len = src[len_at].astype(np.int8).astype(np.int64)
    if v2.any():
        topic_len[v2] = gather(src, len_at[v2], ">i2")
    props_len_at = tl_size + topic_len  # within the tail
    ok = (topic_len >= 0) & (props_len_at + _PROPS_LEN_SIZE <= tail_len)
    n = _first_false(ok)
    props_len = gather(src, (len_at + np.where(ok, props_len_at, 0))[:n], ">i2").astype(np.int64)
    props_len = np.maximum(props_len, 0)
    ok = props_len_at[:n] + _PROPS_LEN_SIZE + props_len == tail_len[:n]
    n = _first_false(ok)
    return topic_len[:n], props_len[:n]


def scan_records(
    buf, start: int, base: int, hints: np.ndarray | None = None, *, properties: bool = False
) -> HeaderBatch:
    """The valid records from ``start`` on, checked and read in bulk, and where they stop.

    ``hints``: sorted global offsets where records are known to start (the consume queues');
    they only save hops, every record is still read and checked. ``properties``: also read each
    record's properties into ``tails``. ``end`` is just past the last valid record; ``bad`` is
    set when what follows is not a BLANK record, zeros or the end of the file.
    """
    limit = len(buf)
    arr = np.frombuffer(buf, dtype=np.uint8)
    h = _read_heads(buf, arr, start, base, hints)
    n = h.n
    tail_at = (h.starts + h.fixed + h.body_len)[:n]
    v2, tl_size, tail_len = h.v2[:n], h.tl_size[:n], h.tail_len[:n]
    if properties:
        # the whole tail of each record is read first; its lengths are then read from the block
        tails, tail_pos = _read_tails(arr, tail_at, tail_len + 1, True)
        src, len_at = tails.data, tail_pos
    else:
        src, len_at = arr, tail_at
    topic_len, props_len = _tail_lengths(src, len_at, v2, tl_size, tail_len)
    n = len(topic_len)
    starts, total, tail_at = h.starts[:n], h.total[:n], tail_at[:n]
    end = int(starts[-1] + total[-1]) if n else start
    bad = end if classify_tail(buf, end, limit)[0] == "garbage" else None

    tl_size = tl_size[:n]
    if properties:
        tail_pos = tail_pos[:n]
        if len(tails.rows) and tails.rows[-1] >= n:
            tails.rows = tails.rows[: np.searchsorted(tails.rows, n)]
    else:
        tails, tail_pos = _read_tails(arr, tail_at, tl_size + topic_len, False)
    topic_start = tail_pos + tl_size
    topic_index, topics, bad_topics = group_topics(tails.data, topic_start, topic_len)
    prefix = h.prefix[:n]
    return HeaderBatch(
        position=starts + base,
        total_size=total,
        queue_id=prefix["queue_id"].astype(np.int64),
        queue_offset=prefix["queue_offset"].astype(np.int64),
        sys_flag=h.sys_flag[:n],
        store_timestamp=h.store_ts[:n],
        topic_index=topic_index,
        topics=topics,
        end=end,
        physical_offset=prefix["physical_offset"].astype(np.int64),
        body_crc=prefix["body_crc"].astype(np.int64),
        body_start=(starts + h.fixed[:n]),
        body_length=h.body_len[:n],
        properties_start=topic_start + topic_len + _PROPS_LEN_SIZE if properties else None,
        properties_length=props_len,
        tails=tails,
        bad_topics=bad_topics,
        bad=bad,
    )


def scan_file(buf, start: int, base: int, hints: np.ndarray | None = None) -> HeaderBatch | None:
    """Headers of the records from ``start`` to the end of the file's data, or ``None`` when the
    file is not a clean chain of valid records (with UTF-8 topics) ending at a BLANK record, zeros
    or the end of the file.
    """
    batch = scan_records(buf, start, base, hints)
    if batch.bad is not None or batch.bad_topics or not len(batch):
        return None
    return batch


# --- topics -------------------------------------------------------------------------------------
_WORD = 8
# _KEEP[r]: a 64-bit word mask keeping its first r bytes in memory order (any byte order)
_KEEP = np.frombuffer(b"".join(bytes([0xFF] * r + [0] * (_WORD - r)) for r in range(_WORD + 1)), np.uint64)
_FEW_TOPICS = 16  # told apart one by one; more than that are grouped by sorting


def _topic_words(arr: np.ndarray, start: np.ndarray, length: np.ndarray) -> list[np.ndarray]:
    """Each topic as columns of 64-bit words (bytes past its length zeroed), then its length."""
    words = max(1, -(-int(length.max()) // _WORD)) if len(length) else 1
    last = len(arr) - _WORD
    view = np.ndarray(shape=(last + 1,), dtype=np.uint64, buffer=arr, strides=(1,))
    n = len(start)
    step = int(start[1] - start[0]) if n > 1 else 0  # evenly spaced (rows of a tail block)?
    even = step > 0 and int(start[-1]) + _WORD * words <= len(arr) and bool(np.all(np.diff(start) == step))
    cols = []
    for j in range(words):
        if even:
            word = np.ndarray(
                shape=(n,), dtype=np.uint64, buffer=arr, offset=int(start[0]) + _WORD * j, strides=(step,)
            ).copy()
        else:
            at = start + _WORD * j if j else start
            if j or int(start.max(initial=0)) > last:
                at = np.minimum(at, last)
            word = view[at]
        left = length - _WORD * j if j else length
        if int(left.min(initial=_WORD)) < _WORD:
            word &= _KEEP[np.clip(left, 0, _WORD)]
        cols.append(word)
    cols.append(length.astype(np.uint64))
    return cols


def _group_rows(cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Exact groups of equal rows of the columns: (index of the first row of each group, group of
    each row).

    A few distinct rows are picked off one at a time (groups in order of first appearance);
    beyond that, rows are grouped by a hash of their words and checked against their group's
    first row, so a hash collision cannot merge two groups (it falls back to sorting rows).
    """
    n = len(cols[0])
    inverse = np.zeros(n, dtype=np.int64)
    assigned = np.zeros(n, dtype=bool)
    first: list[int] = []
    at = 0
    while len(first) < _FEW_TOPICS:
        same = cols[0] == cols[0][at]
        for col in cols[1:]:
            same &= col == col[at]
        if first:
            np.copyto(inverse, len(first), where=same)
        first.append(at)
        assigned |= same
        if assigned.all():
            return np.array(first, dtype=np.int64), inverse
        at = int(np.argmin(assigned))
    rows = np.stack(cols, axis=1)
    digest = np.zeros(n, dtype=np.uint64)
    for col in cols:
        digest = digest * np.uint64(0x100000001B3) ^ col
    _, firsts, inverse = np.unique(digest, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    if not np.array_equal(rows, rows[firsts[inverse]]):
        void = rows.view(np.dtype((np.void, rows.shape[1] * 8))).ravel()
        _, firsts, inverse = np.unique(void, return_index=True, return_inverse=True)
        inverse = inverse.ravel()
    return firsts, inverse.astype(np.int64)


def group_topics(
    arr: np.ndarray, start: np.ndarray, length: np.ndarray
) -> tuple[np.ndarray, list[str], list[int]]:
    """An exact grouping of the topic strings ``arr[start:start+length]``: index of each record's
    topic in the list, the list, and the entries that are not valid UTF-8.

    Invalid UTF-8 is decoded with replacement characters, as ``new String(bytes, UTF_8)`` does.
    """
    if not len(start):
        return np.zeros(0, dtype=np.int64), [], []
    first, inverse = _group_rows(_topic_words(arr, start, length))
    topics: list[str] = []
    bad: list[int] = []
    for i in first.tolist():
        raw = bytes(arr[int(start[i]) : int(start[i]) + int(length[i])])
        try:
            topics.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            bad.append(len(topics))
            topics.append(raw.decode("utf-8", "replace"))
    return inverse, topics, bad


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
