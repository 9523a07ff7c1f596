"""Vectorised reads of chosen message properties, and Java ``String.hashCode``, for many records.

The properties region is parsed as ``MessageDecoder.string2messageProperties`` does (formats.md
§1.7): split on 0x02, a segment is a pair when its first 0x01 has a non-empty key before it and
a non-empty value after it, and the last pair of a key wins. Only the values of the names asked
for are located, as byte ranges into one buffer (``Scan.data``). Separators are ASCII, so a byte
level split is the split of the decoded text, and every value decodes on its own exactly as it
would inside the whole string.

``scan_file`` is the bulk scan of ``headerscan`` (every record checked as
``checkMessageAndReturnSize`` does, its topic and properties read in one block) plus the property
lookup; a file it cannot vouch for gives ``None``, and ``decode_file`` then reads it record by
record (the same result, or the first corrupt record). ``java_hashes`` is ``String.hashCode``
over UTF-16 code units (formats.md §2.2, §3.2): vectorised for ASCII values, exact in Python for
the others. ``tags_codes`` and ``index_keys`` give what a broker's dispatch derives from them:
the consume-queue tags code and the index keys of each record.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from formats import commitlog as fmt
from formats import indexfile as ifmt
from formats.javahash import string_hash
from rmqcli.errors import CorruptDataError
from rmqcli.store.read.commitlog import RecordError, classify_tail, decode_record
from rmqcli.store.scan import headerscan
from rmqcli.store.scan.headerscan import HeaderBatch, block_gather

DISPATCH_PROPERTIES = (fmt.PROPERTY_TAGS, fmt.PROPERTY_KEYS, fmt.PROPERTY_UNIQ_KEY, fmt.PROPERTY_DELAY)
_NAME_VALUE = fmt.NAME_VALUE_SEPARATOR.encode()
_PROPERTY = fmt.PROPERTY_SEPARATOR.encode()
_SEP = _PROPERTY[0]
_MASK32 = 0xFFFFFFFF
_MAX_INT = 0x7FFFFFFF
_WORD = 8
_HIGH_BITS = np.frombuffer(bytes([0x80] * _WORD), dtype=np.uint64)[0]
_LOW_BITS = np.frombuffer(bytes([0x01] * _WORD), dtype=np.uint64)[0]
# _KEEP_LOW[r]: a 64-bit word mask keeping its first r bytes in memory order (any byte order)
_KEEP_LOW = np.frombuffer(
    b"".join(bytes([0xFF] * r + [0] * (_WORD - r)) for r in range(_WORD + 1)), np.uint64
)
_WORD_AT = np.arange(0, 4096, _WORD, dtype=np.int64)  # byte column of each word of a row
_U32 = 1 << 32
_INV31 = pow(31, -1, _U32)  # 31 is odd: invertible modulo 2**32

_HASH_WIDTHS = (8, 16, 32, 64, 128, 256)  # values up to 256 bytes are hashed in bulk
_HASH_CHUNK = 1 << 16  # bytes of value rows widened to uint32 at a time
_FEW_VALUES = 8  # short values (tags) this few distinct ones are hashed once each
_FEW_SAMPLE = 512


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


# --- Java String.hashCode ---------------------------------------------------------------------------
def _powers(width: int) -> np.ndarray:
    return np.array([pow(31, width - 1 - j, _U32) for j in range(width)], dtype=np.uint32)


_POWERS = {w: _powers(w) for w in _HASH_WIDTHS}
_INV_POWERS = np.array([pow(_INV31, k, _U32) for k in range(max(_HASH_WIDTHS) + 1)], dtype=np.uint32)
POW31 = np.ones(1 << 16, dtype=np.uint32)  # 31**k mod 2**32: uint32 products wrap exactly mod 2**32
POW31[1:] = np.cumprod(np.full((1 << 16) - 1, 31, dtype=np.uint32), dtype=np.uint32)


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


def _width_for(longest: int) -> int:
    """The narrowest bulk hash width that holds ``longest`` bytes."""
    return next(w for w in _HASH_WIDTHS if w >= longest)


def _padded_rows(data: np.ndarray, start: np.ndarray, lens: np.ndarray, width: int) -> np.ndarray:
    """The values as zero-padded rows of ``width`` bytes (one gather, then a mask per word)."""
    block = block_gather(data, start, width)
    if len(lens) and int(lens.min()) < width:
        words = block.view(np.uint64)  # (len(rows), width // 8)
        if width == _WORD:
            words[:, 0] &= _KEEP_LOW[lens]
        else:
            words &= _KEEP_LOW[np.clip(lens[:, None] - _WORD_AT[: width // _WORD], 0, _WORD)]
    return block


def _hash_rows(block: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``java_hashes`` of values given as zero-padded rows (``_padded_rows``); ``lens`` becomes
    the UTF-16 lengths."""
    n, width = block.shape
    hashed = np.empty(n, dtype=np.uint32)
    step = max(1, _HASH_CHUNK // width)
    for r0 in range(0, n, step):  # the uint32 copy of a chunk stays in cache
        np.matmul(block[r0 : r0 + step].astype(np.uint32), _POWERS[width], out=hashed[r0 : r0 + step])
    hashed *= _INV_POWERS[width - lens]
    wide = np.flatnonzero(_high_bits(block.view(np.uint64)))
    if len(wide):
        hashed[wide], lens[wide] = _hash_non_ascii(block[wide], hashed[wide], lens[wide])
    return hashed, lens


def _few_distinct(words: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Exact groups of equal (word, length) pairs when there are at most ``_FEW_VALUES`` of them:
    (a row of each group, group of each row), else ``None``.

    The candidate values are the distinct words of a sample; one comparison pass per candidate
    assigns the rows, and every row must then match its group's word and length.
    """
    values, first = np.unique(words[:_FEW_SAMPLE], return_index=True)
    if len(values) > _FEW_VALUES:
        return None
    inverse = np.zeros(len(words), dtype=np.uint8)
    matched = np.zeros(len(words), dtype=bool)
    for j, value in enumerate(values.tolist()):
        same = words == np.uint64(value)
        matched |= same
        if j:
            inverse += same.view(np.uint8) * np.uint8(j)
    if not matched.all() or not np.array_equal(lens[first][inverse], lens):
        return None
    return first, inverse


def java_hashes(data: np.ndarray, start: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``String.hashCode`` (uint32) and UTF-16 length of each UTF-8 value ``data[start:start+length]``.

    ASCII values are hashed in bulk: ``sum(c[j] * 31**(W-1-j))`` over a zero-padded row of width
    W, then scaled by ``31**-(W-len)`` (31 is invertible modulo 2**32). Others are decoded (with
    replacement, as ``decode_properties`` does) and hashed over UTF-16 code units. Values of
    similar lengths share one width; widely spread lengths are hashed in groups of widths.
    """
    n = len(start)
    length = np.array(length, dtype=np.int64)  # a copy: the UTF-16 lengths are written into it
    if n == 0:
        return np.zeros(0, dtype=np.uint32), length
    longest = int(length.max())
    if longest <= max(_HASH_WIDTHS):
        width = _width_for(longest)
        if width <= 2 * _HASH_WIDTHS[0] or width <= 2 * _width_for(int(length.min())):
            block = _padded_rows(data, start, length, width)
            if width == _WORD:  # one word per value: a few distinct values (tags) are hashed once
                few = _few_distinct(block.view(np.uint64)[:, 0], length)
                if few is not None:
                    first, inverse = few
                    hashed = [_python_hash(block[i, : int(length[i])].tobytes()) for i in first.tolist()]
                    hashes = np.array([h for h, _ in hashed], dtype=np.uint32)
                    units = np.array([u for _, u in hashed], dtype=np.int64)
                    return hashes[inverse], units[inverse]
            return _hash_rows(block, length)
    hashes = np.zeros(n, dtype=np.uint32)
    units = length.copy()
    lower = max(_HASH_WIDTHS)
    group = np.searchsorted(_HASH_WIDTHS, length)  # the narrowest width that holds each value
    present = np.flatnonzero(np.bincount(group, minlength=len(_HASH_WIDTHS) + 1)[: len(_HASH_WIDTHS)])
    for k in present.tolist():
        rows = np.flatnonzero(group == k)
        lens = length[rows]  # a copy
        hashes[rows], units[rows] = _hash_rows(_padded_rows(data, start[rows], lens, _HASH_WIDTHS[k]), lens)
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
    words = block.view(np.uint64)  # rows compared a word at a time
    odd = np.flatnonzero((words != words[first[inverse]]).any(axis=1))
    for i in odd.tolist():
        out_hash[i], out_units[i] = _python_hash(block[i, : int(lens[i])].tobytes())
    return out_hash, out_units


def _high_bits(words: np.ndarray) -> np.ndarray:
    """Whether each row of 64-bit words holds a byte >= 0x80."""
    acc = words[:, 0].copy()
    for k in range(1, words.shape[1]):
        acc |= words[:, k]
    return (acc & _HIGH_BITS) != 0


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


# --- what dispatch derives from the properties ---------------------------------------------------
@functools.lru_cache(maxsize=65536)
def topic_prefix_hash(topic: str) -> int:
    """``(topic + "#").hashCode()`` as uint32: an index key's hash continues from it (§3.2)."""
    return string_hash(ifmt.index_key(topic, "")) & _MASK32


def tags_codes(
    scan: Scan, rows: np.ndarray, delay_millis: list[int] = fmt.DEFAULT_DELAY_MILLIS
) -> np.ndarray:
    """``dispatch_tags_code`` of each row: ``TAGS.hashCode()`` (0 when absent), and the delivery
    time for the records of ``SCHEDULE_TOPIC_XXXX`` with a DELAY level (formats.md §2.2)."""
    h = scan.headers
    tags = scan.values[fmt.PROPERTY_TAGS]
    codes = np.zeros(len(rows), dtype=np.int64)
    has = np.flatnonzero(tags.present[rows])
    if len(has):
        hashed, _ = java_hashes(scan.data, tags.start[rows[has]], tags.length[rows[has]])
        codes[has] = signed32(hashed)
    if fmt.SCHEDULE_TOPIC in h.topics:
        local = h.topics.index(fmt.SCHEDULE_TOPIC)
        delayed = np.flatnonzero(h.topic_index[rows] == local)
        if len(delayed):
            picked = rows[delayed]
            tag_text = scan.strings(fmt.PROPERTY_TAGS, picked)
            delay_text = scan.strings(fmt.PROPERTY_DELAY, picked)
            stamps = h.store_timestamp[picked].tolist()
            for j, t, d, ts in zip(delayed.tolist(), tag_text, delay_text, stamps, strict=True):
                props = {k: v for k, v in ((fmt.PROPERTY_TAGS, t), (fmt.PROPERTY_DELAY, d)) if v}
                codes[j] = fmt.dispatch_tags_code(fmt.SCHEDULE_TOPIC, props, ts, delay_millis)
    return codes


def _key_tokens(scan: Scan, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The non-empty tokens of ``KEYS.split(" ")`` of each row, hashed: (position in ``rows``,
    ``String.hashCode``, UTF-16 length) of each, in order.

    When every value fits one bulk width and none holds a space, each value is its one token
    and is hashed from the rows read to look for spaces.
    """
    keys = scan.values[fmt.PROPERTY_KEYS]
    k_local = np.flatnonzero(keys.present[rows])
    picked = rows[k_local]
    k_start, k_len = keys.start[picked], keys.length[picked]
    longest = int(k_len.max()) if len(k_len) else 0
    if 0 < longest <= max(_HASH_WIDTHS):
        block = _padded_rows(scan.data, k_start, k_len, _width_for(longest))
        if not _has_byte(block.view(np.uint64), ord(fmt.KEY_SEPARATOR)):
            t_hash, t_units = _hash_rows(block, k_len)
            return k_local, t_hash, t_units
    mask = np.zeros(len(scan), dtype=bool)
    mask[rows] = True
    subset = Values(keys.present & mask, keys.start, keys.length)
    t_rec, t_start, t_len = split_tokens(scan.data, subset)
    t_hash, t_units = java_hashes(scan.data, t_start, t_len)
    t_local = t_rec if len(rows) == len(scan) else np.searchsorted(rows, t_rec)  # rows: all, or sorted
    return t_local, t_hash, t_units


def _has_byte(words: np.ndarray, byte: int) -> bool:
    """Whether any byte of the 64-bit ``words`` equals ``byte`` (a nonzero one)."""
    x = words ^ np.uint64(byte * 0x0101010101010101)
    return bool(((x - _LOW_BITS) & ~x & _HIGH_BITS).any())  # exact: is some byte of x zero


def index_keys(scan: Scan, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The keys ``IndexService.buildIndex`` puts in the index for each row, in its order: UNIQ_KEY,
    then every non-empty token of ``KEYS.split(" ")`` (formats.md §3.2).

    Returns, per key, its row's position in ``rows`` and ``indexKeyHashMethod("topic#key")``:
    ``abs`` of the Java hash, 0 for ``Integer.MIN_VALUE``.
    """
    h = scan.headers
    n = len(rows)
    uniq = scan.values[fmt.PROPERTY_UNIQ_KEY]
    u_local = np.flatnonzero(uniq.present[rows])
    u_hash, u_units = java_hashes(scan.data, uniq.start[rows[u_local]], uniq.length[rows[u_local]])
    t_local, t_hash, t_units = _key_tokens(scan, rows)
    if len(u_local) == n and np.array_equal(t_local, np.arange(n)):
        # one UNIQ_KEY and one token per row: the keys alternate
        local = np.repeat(np.arange(n, dtype=np.int64), 2)
        key_hash = np.stack((u_hash, t_hash), axis=1).ravel()
        units = np.stack((u_units, t_units), axis=1).ravel()
    else:
        has_uniq = np.zeros(n, dtype=np.int64)
        has_uniq[u_local] = 1
        tokens = np.bincount(t_local, minlength=n).astype(np.int64)
        per_record = has_uniq + tokens
        first_slot = np.cumsum(per_record) - per_record
        total = int(per_record.sum())
        local = np.empty(total, dtype=np.int64)
        key_hash = np.empty(total, dtype=np.uint32)
        units = np.empty(total, dtype=np.int64)
        at = first_slot[u_local]
        local[at], key_hash[at], units[at] = u_local, u_hash, u_units
        if len(t_local):
            token_first = np.cumsum(tokens) - tokens
            ordinal = np.arange(len(t_local)) - token_first[t_local]
            at = first_slot[t_local] + has_uniq[t_local] + ordinal
            local[at], key_hash[at], units[at] = t_local, t_hash, t_units
    prefix_by_topic = np.array([topic_prefix_hash(t) for t in h.topics], dtype=np.uint32)
    topic_of_row = h.topic_index[rows] if n != len(scan) else h.topic_index
    full_hash = signed32(prefix_by_topic[topic_of_row[local]] * pow31(units) + key_hash)
    np.abs(full_hash, out=full_hash)
    full_hash[full_hash > _MAX_INT] = 0  # abs(Integer.MIN_VALUE) is still negative: 0
    return local, full_hash


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


_CHUNK_BYTES = 1 << 20  # 1 MiB of the tail block searched at a time: its temporaries stay in cache


def _locate_in_block(
    tails: headerscan.Tails,
    first: np.ndarray,
    end: np.ndarray,
    names: Sequence[str],
    values: dict[str, Values],
) -> None:
    """Find the names in the regions ``block[j, first[j]:end[j]]`` of the tail block.

    The bytes at ``first-1`` and ``end`` are overwritten with the separator, so every region is
    bounded by separators and every segment follows one: a pair of ``name`` starts right after
    a separator inside its region with ``name`` 0x01, and its value runs to the next separator.
    The 8 bytes after every separator are read once and compared with each ``name`` 0x01. The
    block is searched a few hundred KiB at a time (a value never crosses a row).
    """
    m, width = len(tails.rows), tails.width
    flat = tails.block.ravel()
    row_at = np.arange(0, m * width, width, dtype=np.int64)
    flat[row_at + first - 1] = _SEP
    flat[row_at + end] = _SEP
    words = np.ndarray(shape=(len(flat) - 7,), dtype=np.uint64, buffer=flat, strides=(1,))
    keys = []
    for name in names:
        key = name.encode() + _NAME_VALUE
        chunks = [key[i : i + _WORD] for i in range(0, len(key), _WORD)]
        wants = [np.frombuffer(c.ljust(_WORD, b"\0"), dtype=np.uint64)[0] for c in chunks]
        keys.append(
            (values[name], len(key), [(_KEEP_LOW[len(c)], w) for c, w in zip(chunks, wants, strict=True)])
        )
    every = m == 0 or int(tails.rows[-1]) == m - 1  # block row j is record j
    step = max(1, _CHUNK_BYTES // width)
    for r0 in range(0, m, step):
        r1 = min(m, r0 + step)
        seps = np.flatnonzero(flat[r0 * width : r1 * width] == _SEP)
        seps += r0 * width
        lead = words[seps + 1]  # memory order: byte i of the word is byte i after the separator
        for target, key_len, parts in keys:
            keep_low, want = parts[0]
            at = np.flatnonzero((lead & keep_low) == want)
            for i, (keep_low, want) in enumerate(parts[1:], 1):
                at = at[(words[seps[at] + 1 + i * _WORD] & keep_low) == want]
            if len(at) == 0:
                continue
            s = seps[at] + 1
            row = s // width
            col = s - row * width
            inside = (col >= first[row]) & (col < end[row])
            if not inside.all():
                at, row, s = at[inside], row[inside], s[inside]
            value = s + key_len
            stop = seps[at + 1]  # the key holds no separator: the next one ends the value
            keep = stop > value  # an empty value makes no pair
            if not keep.all():
                value, stop, row = value[keep], stop[keep], row[keep]
            if len(row) > 1:
                last = np.ones(len(row), dtype=bool)
                last[:-1] = row[:-1] != row[1:]  # the last pair of a name wins
                if not last.all():
                    value, stop, row = value[last], stop[last], row[last]
            if not every:
                row = tails.rows[row]
            target.present[row] = True
            target.start[row] = value
            target.length[row] = stop - value


def locate(batch: HeaderBatch, names: Sequence[str] = DISPATCH_PROPERTIES) -> dict[str, Values]:
    """The values of ``names`` in each record of a batch read with ``properties=True``."""
    tails = batch.tails
    assert tails is not None and tails.whole and batch.properties_start is not None
    n = len(batch)
    values = {name: Values.empty(n) for name in names}
    if n == 0:
        return values
    starts, lengths = batch.properties_start, batch.properties_length
    rows = tails.rows
    if len(rows):
        first = starts[rows] - np.arange(len(rows), dtype=np.int64) * tails.width
        _locate_in_block(tails, first, first + lengths[rows], names, values)
    if len(rows) < n:
        encoded = [name.encode() for name in names]
        inside = np.zeros(n, dtype=bool)
        inside[rows] = True
        for i in np.flatnonzero(~inside).tolist():
            s, ln = int(starts[i]), int(lengths[i])
            for key, (vs, vl) in _parse_region(bytes(tails.data[s : s + ln]), s, encoded).items():
                v = values[key.decode()]
                v.present[i], v.start[i], v.length[i] = True, vs, vl
    return values


def bad_utf8(batch: HeaderBatch) -> list[tuple[int, str, int]]:
    """Records of a batch read with ``properties=True`` whose properties are not valid UTF-8
    (``new String(bytes, UTF_8)`` replaces the bad bytes): (record, reason, byte) of each first error.

    The bytes of each block row's properties are or-ed together in one pass (a high bit means a
    non-ASCII byte); those regions are joined with an ASCII separator, which ends any sequence,
    and decoded in one call. Only when that call fails are they decoded one by one.
    """
    tails = batch.tails
    assert tails is not None and batch.properties_start is not None
    starts, lengths = batch.properties_start, batch.properties_length
    rows, width = tails.rows, tails.width
    m = len(rows)
    bad: list[tuple[int, str, int]] = []
    if m:
        flat = tails.data[: m * width]
        bounds = np.empty(2 * m, dtype=np.int64)
        bounds[0::2] = starts[rows]
        bounds[1::2] = starts[rows] + lengths[rows]
        ored = np.bitwise_or.reduceat(flat, bounds)[0::2]  # every byte of each region or-ed
        cand = np.flatnonzero((ored >= 0x80) & (lengths[rows] > 0))
        if len(cand):
            raw = flat.tobytes()
            pieces = list(
                map(raw.__getitem__, map(slice, bounds[0::2][cand].tolist(), bounds[1::2][cand].tolist()))
            )
            try:
                _PROPERTY.join(pieces).decode("utf-8")  # the ASCII separator ends any sequence
            except UnicodeDecodeError:
                for j, piece in enumerate(pieces):
                    try:
                        piece.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        bad.append((int(rows[cand[j]]), exc.reason, exc.start))
    if m < len(batch):
        inside = np.zeros(len(batch), dtype=bool)
        inside[rows] = True
        for i in np.flatnonzero(~inside).tolist():
            s, ln = int(starts[i]), int(lengths[i])
            try:
                tails.data[s : s + ln].tobytes().decode("utf-8")
            except UnicodeDecodeError as exc:
                bad.append((i, exc.reason, exc.start))
    return sorted(bad, key=lambda item: item[0])


def dispatch_names(topics: Sequence[str]) -> tuple[str, ...]:
    """The properties a broker's dispatch reads from records of ``topics``: DELAY matters only to
    the tags code of ``SCHEDULE_TOPIC_XXXX`` records (formats.md §2.2)."""
    if fmt.SCHEDULE_TOPIC in topics:
        return DISPATCH_PROPERTIES
    return tuple(name for name in DISPATCH_PROPERTIES if name != fmt.PROPERTY_DELAY)


def scan_file(
    buf, start: int, base: int, hints: np.ndarray | None = None, names: Sequence[str] | None = None
) -> Scan | None:
    """Every record from ``start`` to the end of one file's data, or ``None`` when the file is not a
    clean chain of valid records (``headerscan.scan_records``) with UTF-8 topics, ending at a
    BLANK record, zeros or the end of the file.

    ``names``: the properties to locate; by default ``dispatch_names`` of the file's topics.
    """
    batch = headerscan.scan_records(buf, start, base, hints, properties=True)
    if batch.bad is not None or batch.bad_topics:
        return None
    if names is None:
        names = dispatch_names(batch.topics)
    assert batch.tails is not None and batch.physical_offset is not None
    stats = {"python_rows": len(batch) - len(batch.tails.rows), "width": batch.tails.width}
    return Scan(batch, batch.physical_offset, batch.tails.data, locate(batch, names), stats=stats)


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
