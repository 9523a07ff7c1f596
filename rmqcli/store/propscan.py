"""Vectorised reads of chosen message properties, and Java ``String.hashCode``, for many records.

The properties region is parsed as ``MessageDecoder.string2messageProperties`` does (FORMATS.md
§1.7): split on 0x02, a segment is a pair when its first 0x01 has a non-empty key before it and
a non-empty value after it, and the last pair of a key wins. Only the values of the names asked
for are located, as byte ranges into one buffer (``Scan.data``). Separators are ASCII, so a byte
level split is the split of the decoded text, and every value decodes on its own exactly as it
would inside the whole string.

``scan_file`` reads a CommitLog file with two block gathers per record (the fixed header, then
topic and properties) and checks every record as ``checkMessageAndReturnSize`` does; a file it
cannot vouch for gives ``None``, and ``decode_file`` then reads it record by record (the same
result, or the first corrupt record). ``java_hashes`` is ``String.hashCode`` over UTF-16 code
units (FORMATS.md §2.2, §3.2): vectorised for ASCII values, exact in Python for the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from formats import commitlog as fmt
from formats.derive import field_offsets, flat_fields
from formats.javahash import string_hash
from rmqcli.errors import CorruptDataError
from rmqcli.store import headerscan
from rmqcli.store.commitlog import RecordError, classify_tail, decode_record
from rmqcli.store.headerscan import HeaderBatch, gather

DISPATCH_PROPERTIES = (fmt.PROPERTY_TAGS, fmt.PROPERTY_KEYS, fmt.PROPERTY_UNIQ_KEY, fmt.PROPERTY_DELAY)
_NAME_VALUE = fmt.NAME_VALUE_SEPARATOR.encode()
_PROPERTY = fmt.PROPERTY_SEPARATOR.encode()
_SEP = _PROPERTY[0]
_MASK32 = 0xFFFFFFFF
_U32 = 1 << 32
_INV31 = pow(31, -1, _U32)  # 31 is odd: invertible modulo 2**32

# Record layout, derived from the declarations in ``formats.commitlog``.
_PREFIX_FIELDS = field_offsets(fmt.RecordPrefix)
_HEADER_WIDTH = max(s.size for s in fmt.HEADER_STRUCTS.values())
_PREFIX_DTYPE = np.dtype(
    {
        "names": [name for name, _, _ in flat_fields(fmt.RecordPrefix)],
        "formats": [f">i{size}" for _, _, size in flat_fields(fmt.RecordPrefix)],
        "offsets": [_PREFIX_FIELDS[name] for name, _, _ in flat_fields(fmt.RecordPrefix)],
        "itemsize": _HEADER_WIDTH,
    }
)
_FIXED_BY_FLAGS = np.array(
    [fmt.HEADER_STRUCTS[f].size if f in fmt.HEADER_STRUCTS else 0 for f in range(fmt.HOST_FLAGS + 1)],
    dtype=np.int64,
)
_BORN_BY_FLAGS = np.array(
    [fmt.host_length(f, fmt.BORNHOST_V6_FLAG) for f in range(fmt.HOST_FLAGS + 1)], dtype=np.int64
)
_BODY_LENGTH_BACK = fmt.AFTER_STORE_HOST_STRUCT.size - fmt.AFTER_STORE_HOST_OFFSETS["body_length"]
_MIN_RECORD_SIZE = fmt.calc_msg_length(0, 0, 0, 0)
_PROPS_LEN_SIZE = fmt.PROPERTIES_LENGTH.sizeof()
_TAIL_WIDTHS = tuple(range(64, 513, 16))  # candidate row widths of the topic + properties block
_HASH_WIDTHS = (8, 16, 32, 64, 128, 256)  # values up to 256 bytes are hashed in bulk


@dataclass
class Values:
    """The value of one property per record: ``data[start:start+length]`` where ``present``."""

    present: np.ndarray
    start: np.ndarray
    length: np.ndarray

    @classmethod
    def empty(cls, n: int) -> Values:
        return cls(np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64))


@dataclass
class Scan:
    """The records of one CommitLog file: headers, PHYSICALOFFSET fields, located properties."""

    headers: HeaderBatch
    physical: np.ndarray
    data: np.ndarray  # uint8; every value range points into it
    values: dict[str, Values]
    error: CorruptDataError | None = None  # the record-by-record read stopped at this record
    stats: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.physical)

    def strings(self, name: str, rows: np.ndarray) -> list[str | None]:
        """The values of ``name`` for ``rows`` as Python strings (``None`` where absent)."""
        v = self.values[name]
        out: list[str | None] = []
        for r in rows.tolist():
            if v.present[r]:
                s = int(v.start[r])
                out.append(bytes(self.data[s : s + int(v.length[r])]).decode("utf-8", "replace"))
            else:
                out.append(None)
        return out


# --- bulk reads ---------------------------------------------------------------------------------
def block_gather(arr: np.ndarray, positions: np.ndarray, width: int) -> np.ndarray:
    """``arr[p:p+width]`` for every position, as rows of a (n, width) uint8 matrix.

    One gather of ``width``-byte items over a one-byte-stride view; rows running past the end
    of ``arr`` are zero-padded.
    """
    n = len(positions)
    out = np.zeros((n, width), dtype=np.uint8)
    if n == 0:
        return out
    last = len(arr) - width
    if last >= 0:
        view = np.ndarray(shape=(last + 1,), dtype=f"V{width}", buffer=arr, strides=(1,))
        inside = positions <= last
        if inside.all():
            out.view(f"V{width}").ravel()[:] = view[positions]
            return out
        out.view(f"V{width}").ravel()[inside] = view[positions[inside]]
        outside = np.flatnonzero(~inside)
    else:
        outside = np.arange(n)
    for i in outside.tolist():
        p = int(positions[i])
        chunk = arr[p : p + width]
        out[i, : len(chunk)] = chunk
    return out


# --- Java String.hashCode ---------------------------------------------------------------------------
def _powers(width: int) -> np.ndarray:
    return np.array([pow(31, width - 1 - j, _U32) for j in range(width)], dtype=np.uint32)


_POWERS = {w: _powers(w) for w in _HASH_WIDTHS}
_INV_POWERS = np.array([pow(_INV31, k, _U32) for k in range(max(_HASH_WIDTHS) + 1)], dtype=np.uint32)
POW31 = np.array([pow(31, k, _U32) for k in range(1 << 16)], dtype=np.uint32)  # 31**k mod 2**32


def pow31(exponent: np.ndarray) -> np.ndarray:
    """``31**exponent mod 2**32`` (uint32) for non-negative exponents."""
    exponent = np.asarray(exponent, dtype=np.int64)
    small = exponent < len(POW31)
    if small.all():
        return POW31[exponent]
    out = np.empty(len(exponent), dtype=np.uint32)
    out[small] = POW31[exponent[small]]
    for i in np.flatnonzero(~small).tolist():
        out[i] = pow(31, int(exponent[i]), _U32)
    return out


def _python_hash(raw: bytes) -> tuple[int, int]:
    text = raw.decode("utf-8", "replace")
    return string_hash(text) & _MASK32, len(text.encode("utf-16-le")) // 2


def java_hashes(data: np.ndarray, start: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``String.hashCode`` (uint32) and UTF-16 length of each UTF-8 value ``data[start:start+length]``.

    ASCII values are hashed in bulk: ``sum(c[j] * 31**(W-1-j))`` over a zero-padded row of width
    W, then scaled by ``31**-(W-len)`` (31 is invertible modulo 2**32). Others are decoded (with
    replacement, as ``decode_properties`` does) and hashed over UTF-16 code units.
    """
    n = len(start)
    hashes = np.zeros(n, dtype=np.uint32)
    units = length.astype(np.int64).copy()
    lower = 0
    for width in _HASH_WIDTHS:
        rows = np.flatnonzero((length > lower) & (length <= width))
        lower = width
        if len(rows) == 0:
            continue
        lens = length[rows].astype(np.int64)
        block = block_gather(data, start[rows], width)
        if lens.min() < width:
            block[np.arange(width)[None, :] >= lens[:, None]] = 0
        hashed = (block.astype(np.uint32) @ _POWERS[width]) * _INV_POWERS[width - lens]
        wide = np.flatnonzero((block >= 0x80).any(axis=1))
        if len(wide):
            hashed[wide], lens[wide] = _hash_non_ascii(block[wide], hashed[wide], lens[wide])
        hashes[rows] = hashed
        units[rows] = lens
    for i in np.flatnonzero(length > lower).tolist():
        s, ln = int(start[i]), int(length[i])
        hashes[i], units[i] = _python_hash(bytes(data[s : s + ln]))
    return hashes, units


def _hash_non_ascii(
    block: np.ndarray, byte_hash: np.ndarray, lens: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Exact hashes of non-ASCII values (zero-padded rows), each distinct value hashed once.

    Rows are grouped by (hash of their bytes, length); every row is compared with its group's
    first row, so a collision only sends rows to be hashed one by one.
    """
    fingerprint = (byte_hash.astype(np.uint64) << np.uint64(32)) | lens.astype(np.uint64)
    _, first, inverse = np.unique(fingerprint, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    hashes = np.empty(len(first), dtype=np.uint32)
    units = np.empty(len(first), dtype=np.int64)
    for j, i in enumerate(first.tolist()):
        hashes[j], units[j] = _python_hash(block[i, : int(lens[i])].tobytes())
    out_hash, out_units = hashes[inverse], units[inverse]
    odd = np.flatnonzero((block != block[first[inverse]]).any(axis=1))
    for i in odd.tolist():
        out_hash[i], out_units[i] = _python_hash(block[i, : int(lens[i])].tobytes())
    return out_hash, out_units


def signed32(values: np.ndarray) -> np.ndarray:
    """uint32 hashes as Java ints, sign-extended to int64."""
    return values.astype(np.uint32).view(np.int32).astype(np.int64)


# --- tokens -----------------------------------------------------------------------------------------
def split_tokens(
    data: np.ndarray, values: Values, separator: int = ord(fmt.KEY_SEPARATOR)
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``value.split(separator)`` without empty tokens, for every present value, in order.

    Returns (record, start, length) of each token; UTF-8 never holds an ASCII byte inside a
    multi-byte character, so splitting bytes is splitting the text.
    """
    rows = np.flatnonzero(values.present)
    lens = values.length[rows]
    width = max(_HASH_WIDTHS)
    bulk = lens <= width
    out_rows, out_starts, out_lens = [], [], []
    if bulk.any():
        r = rows[bulk]
        ln = lens[bulk]
        st = values.start[r]
        w = int(min(width, max(8, -(-int(ln.max()) // 8) * 8)))
        block = block_gather(data, st, w)
        inside = np.arange(w)[None, :] < ln[:, None]
        split = block == separator
        if not (split & inside).any():  # one token per value: the value itself
            out_rows.append(r)
            out_starts.append(st)
            out_lens.append(ln)
        else:
            word = ~split & inside
            before = np.zeros_like(word)
            before[:, 1:] = word[:, :-1]
            after = np.zeros_like(word)
            after[:, :-1] = word[:, 1:]
            srow, scol = np.nonzero(word & ~before)
            _, ecol = np.nonzero(word & ~after)
            out_rows.append(r[srow])
            out_starts.append(st[srow] + scol)
            out_lens.append(ecol - scol + 1)
    if not bulk.all():
        sep = bytes([separator])
        extra_rows, extra_starts, extra_lens = [], [], []
        for rec in rows[~bulk].tolist():
            s, ln = int(values.start[rec]), int(values.length[rec])
            pos = s
            for tok in bytes(data[s : s + ln]).split(sep):
                if tok:
                    extra_rows.append(rec)
                    extra_starts.append(pos)
                    extra_lens.append(len(tok))
                pos += len(tok) + 1
        out_rows.append(np.array(extra_rows, dtype=np.int64))
        out_starts.append(np.array(extra_starts, dtype=np.int64))
        out_lens.append(np.array(extra_lens, dtype=np.int64))
    if not out_rows:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    rec = np.concatenate(out_rows).astype(np.int64)
    st = np.concatenate(out_starts).astype(np.int64)
    ln = np.concatenate(out_lens).astype(np.int64)
    if not bulk.all():
        order = np.argsort(rec, kind="stable")
        rec, st, ln = rec[order], st[order], ln[order]
    return rec, st, ln


# --- locating values ----------------------------------------------------------------------------
def _parse_region(raw: bytes, base: int, names: Sequence[bytes]) -> dict[bytes, tuple[int, int]]:
    """``string2messageProperties`` over one raw region: last (start, length) of each name."""
    found: dict[bytes, tuple[int, int]] = {}
    pos = base
    for segment in raw.split(_PROPERTY):
        key, sep, value = segment.partition(_NAME_VALUE)
        if sep and key and value and key in names:
            found[key] = (pos + len(key) + 1, len(value))
        pos += len(segment) + 1
    return found


def _locate_in_rows(
    block: np.ndarray, first: np.ndarray, end: np.ndarray, names: Sequence[str], values: dict[str, Values],
    rows: np.ndarray,
) -> None:  # fmt: skip
    """Find the names in the regions ``block[r, first[r]:end[r]]`` (flat positions into ``block``).

    ``block`` has one zero row more than ``rows``; the bytes at ``first-1`` and ``end`` are
    overwritten with the separator so that every region is bounded by separators.
    """
    m, width = len(rows), block.shape[1]
    flat = block.ravel()
    r_idx = np.arange(m, dtype=np.int64)
    flat[r_idx * width + first - 1] = _SEP
    flat[r_idx * width + end] = _SEP
    bounds = np.flatnonzero(block[:m] == _SEP)
    brow = bounds // width
    bcol = bounds - brow * width
    keep = (bcol >= first[brow] - 1) & (bcol <= end[brow])
    bounds, brow = bounds[keep], brow[keep]
    pair = np.flatnonzero(brow[:-1] == brow[1:])
    seg_start = bounds[pair] + 1
    seg_end = bounds[pair + 1]
    words = np.ndarray(shape=(len(flat) - 7,), dtype=">u8", buffer=flat, strides=(1,))
    lead = flat[seg_start]
    for name in names:
        key = name.encode() + _NAME_VALUE
        cand = np.flatnonzero(lead == key[0])
        s, e = seg_start[cand], seg_end[cand]
        for i in range(0, len(key), 8):
            chunk = key[i : i + 8]
            w = words[s + i]
            if len(chunk) < 8:
                w = w >> np.uint64(64 - 8 * len(chunk))
            ok = w == np.uint64(int.from_bytes(chunk, "big"))
            s, e = s[ok], e[ok]
        ok = e > s + len(key)
        s, e = s[ok], e[ok]
        if len(s) == 0:
            continue
        srow = s // width
        last = np.ones(len(s), dtype=bool)
        last[:-1] = srow[:-1] != srow[1:]
        s, e, srow = s[last], e[last], srow[last]
        target = values[name]
        target.present[rows[srow]] = True
        target.start[rows[srow]] = s + len(key)
        target.length[rows[srow]] = e - s - len(key)


def _choose_width(need: np.ndarray) -> int:
    """The narrowest candidate row width that leaves at most 1 in 1000 records to Python."""
    allowed = len(need) // 1000
    for width in _TAIL_WIDTHS:
        if np.count_nonzero(need > width) <= allowed:
            return width
    return _TAIL_WIDTHS[-1]


def _topic_length(block: np.ndarray, col: np.ndarray, v2: np.ndarray) -> np.ndarray:
    """TOPICLENGTH (signed i8 for V1, i16 for V2) read from byte column ``col`` of each row."""
    rows = np.arange(len(col))
    hi = block[rows, col].astype(np.int64)
    lo = block[rows, np.minimum(col + 1, block.shape[1] - 1)].astype(np.int64)
    one = np.where(hi > 127, hi - 256, hi)
    two = hi * 256 + lo
    two = np.where(two > 32767, two - 65536, two)
    return np.where(v2, two, one)


def scan_file(
    buf, start: int, base: int, hints: np.ndarray | None = None, names: Sequence[str] = DISPATCH_PROPERTIES
) -> Scan | None:
    """Every record from ``start`` to the end of one file's data, or ``None`` when the file is not a
    clean chain of valid records ending at a BLANK record, zeros or the end of the file.

    Each record gets the checks of ``checkMessageAndReturnSize`` (known magic, field lengths
    within TOTALSIZE, TOTALSIZE equal to ``calMsgLength``) and a UTF-8 topic.
    """
    limit = len(buf)
    starts = None
    if hints is not None and len(hints):
        starts = headerscan.chain_from_hints(buf, start, limit, hints - base)
    if starts is None:
        walked = headerscan.walk(buf, start, limit)
        starts = np.array(walked, dtype=np.int64)
    arr = np.frombuffer(buf, dtype=np.uint8)
    head = block_gather(arr, starts, _HEADER_WIDTH)
    prefix = head.view(_PREFIX_DTYPE).ravel()
    magic = prefix["magic_code"]
    blank = np.flatnonzero(magic == fmt.BLANK_MAGIC)
    if len(blank):
        cut = int(blank[0])
        starts, head, prefix, magic = starts[:cut], head[:cut], prefix[:cut], magic[:cut]
    if not np.all((magic == fmt.MAGIC_V1) | (magic == fmt.MAGIC_V2)):
        return None
    total = prefix["total_size"].astype(np.int64)
    ends = starts + total
    end = int(ends[-1]) if len(starts) else start
    if not len(blank) and classify_tail(buf, end, limit)[0] not in ("blank", "zeros", "end"):
        return None
    n = len(starts)
    if n == 0:
        return _empty_scan(end, names)
    if np.any(total < _MIN_RECORD_SIZE) or end > limit:
        return None
    sys_flag = prefix["sys_flag"].astype(np.int64)
    hosts = sys_flag & fmt.HOST_FLAGS
    fixed = _FIXED_BY_FLAGS[hosts]
    row_base = np.arange(n, dtype=np.int64) * _HEADER_WIDTH
    flat_head = head.ravel()
    store_ts = gather(flat_head, row_base + fmt.PREFIX_SIZE + _BORN_BY_FLAGS[hosts], ">i8").astype(np.int64)
    body_len = gather(flat_head, row_base + fixed - _BODY_LENGTH_BACK, ">i4").astype(np.int64)
    tail_len = total - fixed - body_len  # topic length field, topic, properties length, properties
    v2 = magic == fmt.MAGIC_V2
    tl_size = np.where(v2, fmt.topic_length_size(fmt.MAGIC_V2), fmt.topic_length_size(fmt.MAGIC_V1))
    if np.any(fixed > total) or np.any(body_len < 0) or np.any(tail_len < tl_size + _PROPS_LEN_SIZE):
        return None
    tail_at = starts + fixed + body_len
    need = tail_len + 1  # one byte more: the byte after the properties becomes a separator
    width = _choose_width(need)
    in_block = need <= width
    rows = np.flatnonzero(in_block)
    long_rows = np.flatnonzero(~in_block)
    m = len(rows)
    block = block_gather(arr, np.append(tail_at[rows], tail_at[0]), width)
    block[m] = 0
    topic_len = np.zeros(n, dtype=np.int64)
    props_len = np.zeros(n, dtype=np.int64)
    topic_start = np.zeros(n, dtype=np.int64)
    topic_len[rows] = _topic_length(block[:m], np.zeros(m, dtype=np.int64), v2[rows])
    pl_col = tl_size[rows] + topic_len[rows]
    if m and (np.any(topic_len[rows] < 0) or np.any(pl_col + _PROPS_LEN_SIZE > tail_len[rows])):
        return None
    block_rows = np.arange(m, dtype=np.int64)
    if m:
        props_len[rows] = gather(block.ravel(), block_rows * width + pl_col, ">i2").astype(np.int64)
    topic_start[rows] = block_rows * width + tl_size[rows]
    chunks = [block.ravel()]
    offset = block.size
    long_regions = []
    for i in long_rows.tolist():
        raw = bytes(arr[int(tail_at[i]) : int(tail_at[i] + tail_len[i])])
        tls = int(tl_size[i])
        tlen = int.from_bytes(raw[:tls], "big", signed=True)
        if tlen < 0 or tls + tlen + _PROPS_LEN_SIZE > len(raw):
            return None
        topic_len[i] = tlen
        topic_start[i] = offset + tls
        props_len[i] = int.from_bytes(raw[tls + tlen : tls + tlen + _PROPS_LEN_SIZE], "big", signed=True)
        long_regions.append((i, raw[tls + tlen + _PROPS_LEN_SIZE :], offset + tls + tlen + _PROPS_LEN_SIZE))
        chunks.append(np.frombuffer(raw, dtype=np.uint8))
        offset += len(raw)
    if np.any(tl_size + topic_len + _PROPS_LEN_SIZE + np.maximum(props_len, 0) != tail_len):
        return None
    data = np.concatenate(chunks) if len(chunks) > 1 else chunks[0]
    topic_index, topics = headerscan.group_topics(data, topic_start, topic_len)
    if topics is None:
        return None
    values = {name: Values.empty(n) for name in names}
    if m:
        first = pl_col + _PROPS_LEN_SIZE
        _locate_in_rows(block, first, first + np.maximum(props_len[rows], 0), names, values, rows)
    encoded = [name.encode() for name in names]
    for i, region, props_at in long_regions:
        for key, (s, ln) in _parse_region(region, props_at, encoded).items():
            v = values[key.decode()]
            v.present[i], v.start[i], v.length[i] = True, s, ln
    headers = HeaderBatch(
        position=starts + base,
        total_size=total,
        queue_id=prefix["queue_id"].astype(np.int64),
        queue_offset=prefix["queue_offset"].astype(np.int64),
        sys_flag=sys_flag,
        store_timestamp=store_ts,
        topic_index=topic_index.astype(np.int64),
        topics=topics,
        end=end,
    )
    physical = prefix["physical_offset"].astype(np.int64)
    return Scan(headers, physical, data, values, stats={"python_rows": len(long_rows), "width": width})


def _empty_scan(end: int, names: Sequence[str]) -> Scan:
    empty = np.zeros(0, dtype=np.int64)
    headers = HeaderBatch(empty, empty, empty, empty, empty, empty, empty, [], end)
    return Scan(headers, empty, np.zeros(0, dtype=np.uint8), {name: Values.empty(0) for name in names})


def decode_file(
    buf, start: int, base: int, file_name: str, names: Sequence[str] = DISPATCH_PROPERTIES
) -> Scan:
    """The records of one file read one by one as ``CommitLog.records`` does (``decode_record``).

    Stops at a BLANK record or zeros; a corrupt record ends the scan and is kept in ``error``.
    """
    limit = len(buf)
    pos = start
    cols: dict[str, list[int]] = {k: [] for k in ("pos", "size", "qid", "qoff", "phy", "flag", "ts", "topic")}
    topics: dict[str, int] = {}
    regions: list[bytes] = []
    error = None
    while pos < limit:
        if classify_tail(buf, pos, limit)[0] in ("blank", "zeros"):
            break
        try:
            rec = decode_record(buf, pos, limit, file_name, base)
        except RecordError as exc:
            error = CorruptDataError(str(exc), file_name, pos)
            break
        for key, value in (
            ("pos", rec.position), ("size", rec.total_size), ("qid", rec.queue_id),
            ("qoff", rec.queue_offset), ("phy", rec.physical_offset), ("flag", rec.sys_flag),
            ("ts", rec.store_timestamp),
            ("topic", topics.setdefault(rec.topic, len(topics))),
        ):  # fmt: skip
            cols[key].append(value)
        regions.append(rec.properties_raw)
        pos += rec.total_size
    n = len(regions)

    def column(key: str) -> np.ndarray:
        return np.array(cols[key], dtype=np.int64)

    headers = HeaderBatch(
        column("pos"), column("size"), column("qid"), column("qoff"), column("flag"), column("ts"),
        column("topic"), list(topics), pos,
    )  # fmt: skip
    values = {name: Values.empty(n) for name in names}
    encoded = [name.encode() for name in names]
    offset = 0
    for i, raw in enumerate(regions):
        for key, (s, ln) in _parse_region(raw, offset, encoded).items():
            v = values[key.decode()]
            v.present[i], v.start[i], v.length[i] = True, s, ln
        offset += len(raw)
    data = np.frombuffer(b"".join(regions), dtype=np.uint8)
    return Scan(headers, column("phy"), data, values, error, {"python_rows": n})
