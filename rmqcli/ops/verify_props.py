"""Vectorised properties parsing and Java ``String.hashCode`` over many strings at once.

The verifier needs, for every record, the tags code its consume-queue unit must carry
(``TAGS.hashCode()``, FORMATS.md §2.2) and the key hashes its index entries must carry
(``abs(("topic#" + key).hashCode())`` for ``UNIQ_KEY`` and each ``KEYS`` token, §3.2). Parsing
properties record by record in Python is far too slow for a whole CommitLog, so the properties of
one file are concatenated into one byte array and split with numpy, following
``MessageDecoder.string2messageProperties``: segments between 0x02 separators, a pair only when
the first 0x01 leaves a non-empty name and value, the last duplicate wins. Hashes of ASCII
strings are sums of ``byte * 31**k`` (mod 2**32); strings with non-ASCII bytes are hashed over
their UTF-16 code units in Python.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from formats import commitlog as fmt
from formats.javahash import string_hash

_SEP = ord(fmt.PROPERTY_SEPARATOR)
_NV = ord(fmt.NAME_VALUE_SEPARATOR)
_SPACE = ord(fmt.KEY_SEPARATOR)
_MASK32 = np.uint64(0xFFFFFFFF)
_MAX_PROPS = 1 << 15  # a properties length is a signed i16


def _powers(n: int) -> np.ndarray:
    out = np.empty(n, dtype=np.uint64)
    value = 1
    for k in range(n):
        out[k] = value
        value = (value * 31) & 0xFFFFFFFF
    return out


_POW31 = _powers(_MAX_PROPS + 2)


def pow31(exponent: np.ndarray) -> np.ndarray:
    """``31**exponent mod 2**32`` (uint64)."""
    return _POW31[exponent]


def to_signed32(values: np.ndarray) -> np.ndarray:
    v = (values.astype(np.uint64) & _MASK32).astype(np.int64)
    return np.where(v >= 1 << 31, v - (1 << 32), v)


def high_bytes(data: np.ndarray) -> np.ndarray:
    """Sorted positions of the non-ASCII bytes of ``data``."""
    return np.flatnonzero(data >= 0x80)


def segment_hashes(
    data: np.ndarray, start: np.ndarray, end: np.ndarray, high: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Java ``String.hashCode`` (uint32 as int64) and UTF-16 length of the UTF-8 strings ``data[start:end]``.

    ASCII strings: Horner's rule column by column over the strings sorted by length (uint32
    arithmetic wraps like Java's int). Strings with non-ASCII bytes are decoded in Python (few).
    """
    n = len(start)
    out = np.zeros(n, dtype=np.uint32)
    units = (end - start).astype(np.int64)
    if not n:
        return out.astype(np.int64), units
    high = high_bytes(data) if high is None else high
    wide = np.flatnonzero(np.searchsorted(high, end) > np.searchsorted(high, start))
    order = np.argsort(units, kind="stable")
    lens = units[order]
    s = start[order]
    h = np.zeros(n, dtype=np.uint32)
    thirty_one = np.uint32(31)
    first = 0
    for j in range(int(lens[-1]) if n else 0):
        first = int(np.searchsorted(lens, j, side="right"))  # strings longer than j
        if first >= n:
            break
        h[first:] = h[first:] * thirty_one + data[s[first:] + j]
    out[order] = h
    if len(wide):
        # Non-ASCII strings repeat (tags): decode one per distinct 64-bit fingerprint of the bytes.
        fp = np.zeros(len(wide), dtype=np.uint64)
        ws, wl = start[wide], units[wide]
        prime = np.uint64(1099511628211)
        for j in range(int(wl.max())):
            more = wl > j
            fp[more] = (fp[more] ^ data[ws[more] + j]) * prime
        fp ^= wl.astype(np.uint64) << np.uint64(48)
        order = np.argsort(fp, kind="stable")
        sorted_fp = fp[order]
        first = np.concatenate(([True], sorted_fp[1:] != sorted_fp[:-1]))
        group = np.cumsum(first) - 1
        reps = order[first]
        rep_hash = np.empty(len(reps), dtype=np.uint32)
        rep_units = np.empty(len(reps), dtype=np.int64)
        for k, i in enumerate(wide[reps].tolist()):
            text = data[int(start[i]) : int(end[i])].tobytes().decode("utf-8", "replace")
            rep_hash[k] = string_hash(text) & 0xFFFFFFFF
            rep_units[k] = len(text.encode("utf-16-le")) // 2
        out[wide[order]] = rep_hash[group]
        units[wide[order]] = rep_units[group]
    return out.astype(np.int64), units
    high = high_bytes(data) if high is None else high
    wide = np.flatnonzero(np.searchsorted(high, end) > np.searchsorted(high, start))
    order = np.argsort(units, kind="stable")
    lens = units[order]
    s = start[order]
    h = np.zeros(n, dtype=np.uint32)
    thirty_one = np.uint32(31)
    first = 0
    for j in range(int(lens[-1]) if n else 0):
        first = int(np.searchsorted(lens, j, side="right"))  # strings longer than j
        if first >= n:
            break
        h[first:] = h[first:] * thirty_one + data[s[first:] + j]
    out[order] = h
    cache: dict[bytes, tuple[int, int]] = {}
    for i in wide.tolist():
        raw = data[int(start[i]) : int(end[i])].tobytes()
        hit = cache.get(raw)
        if hit is None:
            text = raw.decode("utf-8", "replace")
            hit = cache[raw] = (string_hash(text) & 0xFFFFFFFF, len(text.encode("utf-16-le")) // 2)
        out[i], units[i] = hit
    return out.astype(np.int64), units


@dataclass
class ParsedProperties:
    """Per record: where the value of each wanted property is in ``data`` (-1 when absent)."""

    data: np.ndarray  # the concatenated properties bytes
    bounds: np.ndarray  # record i's properties are data[bounds[i]:bounds[i+1]]
    values: dict[str, tuple[np.ndarray, np.ndarray]]
    non_ascii: np.ndarray  # records whose properties hold bytes >= 0x80
    high: np.ndarray  # positions of those bytes in ``data``


def parse_properties(data: np.ndarray, bounds: np.ndarray, names: list[str]) -> ParsedProperties:
    """Find the values of ``names`` in each record's properties (``string2messageProperties``)."""
    n = len(bounds) - 1
    seps = np.flatnonzero(data == _SEP)
    seg_start = np.sort(np.concatenate((bounds[:-1], seps + 1)), kind="stable")  # two sorted runs
    seg_end = np.sort(np.concatenate((seps, bounds[1:])), kind="stable")
    keep = seg_end - seg_start >= 3
    seg_start, seg_end = seg_start[keep], seg_end[keep]
    nv = np.flatnonzero(data == _NV)
    values: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    if len(nv) and len(seg_start):
        k = np.minimum(np.searchsorted(nv, seg_start), len(nv) - 1)
        first_nv = nv[k]
        pair = (first_nv > seg_start) & (first_nv < seg_end - 1)
        name_len = first_nv - seg_start
    for name in names:
        vs = np.full(n, -1, dtype=np.int64)
        ve = np.full(n, -1, dtype=np.int64)
        values[name] = (vs, ve)
        if not len(nv) or not len(seg_start):
            continue
        raw = name.encode()
        cand = np.flatnonzero(pair & (name_len == len(raw)))
        for j, byte in enumerate(raw):
            if not len(cand):
                break
            cand = cand[data[seg_start[cand] + j] == byte]
        if not len(cand):
            continue
        rec = np.searchsorted(bounds, seg_start[cand], side="right") - 1
        last = np.ones(len(cand), dtype=bool)
        last[:-1] = rec[1:] != rec[:-1]  # segments are in order: the last of a record wins
        cand, rec = cand[last], rec[last]
        vs[rec] = first_nv[cand] + 1
        ve[rec] = seg_end[cand]
    high = high_bytes(data)
    counts = np.searchsorted(high, bounds)
    non_ascii = np.flatnonzero(counts[1:] > counts[:-1])
    return ParsedProperties(data, bounds, values, non_ascii, high)


def tokens(data: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Non-empty space-separated tokens of the strings ``data[start:end]`` (``KEYS.split(" ")``).

    Returns (owner index, token start, token end). Absent strings have ``start == -1``.
    """
    present = np.flatnonzero(start >= 0)
    s, e = start[present], end[present]
    if not len(s):
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty
    spaces = np.flatnonzero(data == _SPACE)
    if len(spaces):
        owner = np.searchsorted(s, spaces, side="right") - 1
        inside = (owner >= 0) & (spaces < e[np.maximum(owner, 0)])
        spaces = spaces[inside]
    tok_start = np.sort(np.concatenate((s, spaces + 1)), kind="stable")
    tok_end = np.sort(np.concatenate((spaces, e)), kind="stable")
    keep = tok_end > tok_start
    tok_start, tok_end = tok_start[keep], tok_end[keep]
    owner = present[np.searchsorted(s, tok_start, side="right") - 1]
    return owner, tok_start, tok_end


def index_key_hashes(
    prefix_hash: np.ndarray,
    data: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    high: np.ndarray | None = None,
) -> np.ndarray:
    """``IndexFile.indexKeyHashMethod`` of ``prefix + data[start:end]`` (prefix = ``topic#``).

    ``hash(a + b) = hash(a) * 31**len(b) + hash(b)`` (mod 2**32), len in UTF-16 code units.
    """
    key, units = segment_hashes(data, start, end, high)
    h = (prefix_hash.astype(np.uint64) * pow31(units) + key.astype(np.uint64)) & _MASK32
    result = np.abs(to_signed32(h))
    result[result > 0x7FFFFFFF] = 0  # abs(Integer.MIN_VALUE) stays negative: the broker uses 0
    return result
