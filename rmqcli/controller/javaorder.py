"""The Java collection orders that 5.1.1's controller output and choices depend on (controller.md
§3.2 and §3.5): the iteration order of a ``HashSet<Long>``, which is the order fastjson writes a set
of broker ids in, and the first element of a ``TreeSet`` built with a comparator, which is how
``DefaultElectPolicy`` picks among candidates (ties merge, a non-transitive comparator is followed
as the tree's shape makes it).

A ``HashSet`` iterates its table's buckets in index order, a bucket's entries in the order they were
put there. A ``Long`` hashes to ``(int)(v ^ (v >>> 32))``, spread as ``h ^ (h >>> 16)``; the bucket
is that value masked by the table size. Ids below the table size (16 for up to 12 ids) therefore
come out ascending.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF


def int32(value: int) -> int:
    """``value`` wrapped to a Java ``int`` (two's complement, 32 bits): ``(int)`` casts and ``int``
    arithmetic overflow."""
    value &= _MASK32
    return value - (1 << 32) if value & 0x80000000 else value


def int64(value: int) -> int:
    """``value`` wrapped to a Java ``long``."""
    value &= _MASK64
    return value - (1 << 64) if value & (1 << 63) else value


def long_bucket_hash(value: int) -> int:
    """``HashMap.hash(Long.valueOf(value))`` as an unsigned 32-bit number."""
    v = value & _MASK64
    h = (v ^ (v >> 32)) & _MASK32
    return h ^ (h >> 16)


def _table_size(cap: int) -> int:
    size = 1
    while size < cap:
        size <<= 1
    return size


def copy_capacity(count: int) -> int:
    """Table size of ``new HashSet<>(collection)`` with ``count`` elements."""
    return _table_size(max(int(count / 0.75) + 1, 16))


def grown_capacity(count: int) -> int:
    """Table size of a ``HashSet`` filled one ``add`` at a time (``Collectors.toSet()``): 16,
    doubled whenever the count passes three quarters of it."""
    size = 16
    while count > size * 3 // 4:
        size <<= 1
    return size


def hash_set_order(ids: Iterable[int], capacity: int | None = None) -> list[int]:
    """``ids`` in the iteration order of a Java ``HashSet<Long>`` of ``capacity`` buckets (default:
    a copied set's, ``copy_capacity``). Ids sharing a bucket keep the order they are given in."""
    unique = list(dict.fromkeys(ids))
    size = copy_capacity(len(unique)) if capacity is None else capacity
    return sorted(unique, key=lambda v: long_bucket_hash(v) & (size - 1))


@dataclass(eq=False)
class _Node(Generic[T]):
    item: T
    parent: _Node[T] | None = None
    left: _Node[T] | None = None
    right: _Node[T] | None = None
    red: bool = True


class TreeSet(Generic[T]):
    """A red-black tree ordered by a Java-style comparator (negative, zero, positive), as
    ``java.util.TreeSet``: an item comparing equal to one already held is dropped, the descent
    compares the new item (first argument) with each node on its path."""

    def __init__(self, compare: Callable[[T, T], int]):
        self.compare = compare
        self.root: _Node[T] | None = None
        self.size = 0

    def add(self, item: T) -> bool:
        node = self.root
        if node is None:
            self.root = _Node(item, red=False)
            self.size = 1
            return True
        while True:
            c = self.compare(item, node.item)
            if c == 0:
                return False
            child = node.left if c < 0 else node.right
            if child is None:
                break
            node = child
        new = _Node(item, parent=node)
        if c < 0:
            node.left = new
        else:
            node.right = new
        self.size += 1
        self._rebalance(new)
        return True

    def first(self) -> T | None:
        node = self.root
        if node is None:
            return None
        while node.left is not None:
            node = node.left
        return node.item

    def items(self) -> list[T]:
        """In-order (ascending) items."""
        out: list[T] = []
        stack: list[_Node[T]] = []
        node = self.root
        while stack or node is not None:
            while node is not None:
                stack.append(node)
                node = node.left
            node = stack.pop()
            out.append(node.item)
            node = node.right
        return out

    def _rotate(self, x: _Node[T], left: bool) -> None:
        """Rotate ``x`` down to the left (its right child comes up) or to the right."""
        y = x.right if left else x.left
        assert y is not None
        inner = y.left if left else y.right
        if left:
            x.right = inner
        else:
            x.left = inner
        if inner is not None:
            inner.parent = x
        y.parent = x.parent
        if x.parent is None:
            self.root = y
        elif x is x.parent.left:
            x.parent.left = y
        else:
            x.parent.right = y
        if left:
            y.left = x
        else:
            y.right = x
        x.parent = y

    def _rebalance(self, x: _Node[T]) -> None:
        while x is not self.root and x.parent is not None and x.parent.red:
            parent = x.parent
            grand = parent.parent
            assert grand is not None  # a red parent is never the root
            parent_is_left = parent is grand.left
            uncle = grand.right if parent_is_left else grand.left
            if uncle is not None and uncle.red:
                parent.red = False
                uncle.red = False
                grand.red = True
                x = grand
                continue
            if x is (parent.right if parent_is_left else parent.left):
                x = parent
                self._rotate(x, left=parent_is_left)
                parent = x.parent
                assert parent is not None
            parent.red = False
            grand.red = True
            self._rotate(grand, left=not parent_is_left)
        assert self.root is not None
        self.root.red = False


def presized_capacity(count: int) -> int:
    """Table size of ``new HashMap<>(count)`` after ``count`` puts: the initial size rounded up to a
    power of two, doubled whenever the count passes three quarters of it."""
    size = _table_size(max(count, 1))
    while count > int(size * 0.75):
        size <<= 1
    return size
