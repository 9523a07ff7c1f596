"""Java ``String.hashCode`` and the hashes RocketMQ derives from it.

``String.hashCode`` runs over UTF-16 code units (``h = 31*h + c`` with i32 overflow). RocketMQ
uses it for the consume-queue tags code (sign-extended to i64, formats.md §2.2), for the index
key hash (absolute value, formats.md §3.2) and, through ``HashMap``, for the order in which a
properties map is serialised (formats.md §1.7).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")

_MASK = 0xFFFFFFFF


def java_string_hash(text: str) -> int:
    """Signed 32-bit ``String.hashCode`` of ``text``."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h


_POWERS_LEN = 512
# 31**k mod 2**32, highest power first: the hash of n chars is sum(c[i] * 31**(n-1-i)) mod 2**32.
_POWERS = [pow(31, k, 1 << 32) for k in range(_POWERS_LEN - 1, -1, -1)]


def _ascii_hash(text: str) -> int:
    data = text.encode("ascii")
    n = len(data)
    if n > _POWERS_LEN:
        return java_string_hash(text)
    h = sum(map(operator.mul, data, _POWERS[_POWERS_LEN - n :])) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h


def string_hash(text: str) -> int:
    """``java_string_hash`` with a fast path for ASCII text."""
    if text.isascii():
        return _ascii_hash(text)
    return java_string_hash(text)


def long_hash(value: int) -> int:
    """Signed 32-bit ``Long.hashCode``: the two halves of the 64-bit value xor-ed."""
    u = value & 0xFFFFFFFFFFFFFFFF
    h = (u ^ (u >> 32)) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h


def hashmap_spread(h: int) -> int:
    """``java.util.HashMap.hash``: the key hash with its high half folded into the low half."""
    u = h & _MASK
    return u ^ (u >> 16)


def hashmap_order(
    keys: Iterable[T], key_hash: Callable[[T], int] | None = None, *, grown_to: int = 0
) -> list[T]:
    """The iteration order of a ``java.util.HashMap`` (or ``HashSet``) filled with ``keys`` in order.

    Buckets are visited in index order, entries of one bucket in insertion order; the table
    starts at 16 and doubles whenever the size passes 3/4 of it, and never shrinks: ``grown_to``
    is the most entries the map held when some were removed since (a broker's properties map
    loses ``WAIT`` before it is serialised). ``key_hash`` is the keys' ``hashCode``
    (``String.hashCode`` by default). This is, for instance, the order in which a broker
    serialises a message's properties map.
    """
    unique = tuple(keys) if type(keys) is dict else tuple(dict.fromkeys(keys))  # a dict's keys are distinct
    capacity = table_capacity(max(len(unique), grown_to))
    if key_hash is None:  # string keys: the same key sets recur (message properties, header fields)
        try:
            return [unique[i] for i in _string_key_order(unique, capacity)]
        except TypeError:  # not hashable: computed below
            pass
    return _order(list(unique), key_hash or string_hash, capacity)


def table_capacity(size: int) -> int:
    """The table length of a ``HashMap`` grown from 16 to hold ``size`` entries (load factor 3/4)."""
    capacity = 16
    while size > capacity * 3 // 4:
        capacity *= 2
    return capacity


@functools.lru_cache(maxsize=4096)
def _string_key_order(keys: tuple[str, ...], capacity: int) -> tuple[int, ...]:
    """``hashmap_order`` of distinct string keys in a table of ``capacity``, as indexes into
    ``keys`` (cached)."""
    order = _order(list(keys), string_hash, capacity)
    position = {k: i for i, k in enumerate(keys)}
    return tuple(position[k] for k in order)


def _order(unique: list[T], hash_of: Callable[[T], int], capacity: int) -> list[T]:
    mask = capacity - 1
    buckets = [(hashmap_spread(hash_of(k)) & mask, i) for i, k in enumerate(unique)]
    return [unique[i] for _, i in sorted(buckets)]


def objects_hash(*parts: int) -> int:
    """``java.util.Objects.hash`` / ``31 * h + part`` over already-hashed fields, as i32."""
    h = 1
    for part in parts:
        h = (31 * h + part) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h


def chm_order(keys: list[str], capacity: int = 16) -> list[str]:
    """The iteration order of a ``java.util.concurrent.ConcurrentHashMap`` of ``capacity`` slots
    into which the string ``keys`` were put in order: bins in index order, a bin in insertion order,
    except that a resize (at 3/4 full) moves the nodes before a bin's last run to the head of their
    new bin, reversed (``ConcurrentHashMap.transfer``). No removals, no tree bins (8+ in one bin)."""
    n = capacity
    table: list[list[tuple[str, int]]] = [[] for _ in range(n)]
    size = 0
    for key in keys:
        h = string_hash(key) & 0xFFFFFFFF
        h = (h ^ (h >> 16)) & 0x7FFFFFFF  # ConcurrentHashMap.spread
        bin_ = table[h & (n - 1)]
        if any(k == key for k, _ in bin_):
            continue
        bin_.append((key, h))
        size += 1
        while size >= n - (n >> 2):
            grown: list[list[tuple[str, int]]] = [[] for _ in range(2 * n)]
            for i, nodes in enumerate(table):
                if not nodes:
                    continue
                run_bit, last = nodes[0][1] & n, 0
                for j in range(1, len(nodes)):
                    if nodes[j][1] & n != run_bit:
                        run_bit, last = nodes[j][1] & n, j
                low, high = (nodes[last:], []) if run_bit == 0 else ([], nodes[last:])
                for node in nodes[:last]:
                    if node[1] & n == 0:
                        low = [node, *low]
                    else:
                        high = [node, *high]
                grown[i], grown[i + n] = low, high
            table, n = grown, 2 * n
    return [k for nodes in table for k, _ in nodes]
