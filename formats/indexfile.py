"""IndexFile header, hash slot and index entry; key hash and position arithmetic.

Specified by formats.md §3 (Apache RocketMQ ``index/IndexHeader.java``, ``index/IndexFile.java``,
``index/IndexService.java``).
"""

from __future__ import annotations

import construct as cs

from formats.derive import compile_struct
from formats.javahash import string_hash

IndexHeader = cs.Struct(
    "begin_timestamp" / cs.Int64sb,
    "end_timestamp" / cs.Int64sb,
    "begin_phy_offset" / cs.Int64sb,
    "end_phy_offset" / cs.Int64sb,
    "hash_slot_count" / cs.Int32sb,
    "index_count" / cs.Int32sb,
)
HEADER_STRUCT = compile_struct(IndexHeader)
HEADER_SIZE = HEADER_STRUCT.size  # 40

# A hash slot holds the number of the newest entry of its chain (0 = empty).
HashSlot = cs.Struct("index_no" / cs.Int32sb)
SLOT_STRUCT = compile_struct(HashSlot)
SLOT_SIZE = SLOT_STRUCT.size  # 4

IndexEntry = cs.Struct(
    "key_hash" / cs.Int32sb,
    "phy_offset" / cs.Int64sb,
    "time_diff" / cs.Int32sb,  # seconds since header.begin_timestamp
    "prev_index" / cs.Int32sb,  # previous entry of the same slot chain, 0 = end
)
ENTRY_STRUCT = compile_struct(IndexEntry)
ENTRY_SIZE = ENTRY_STRUCT.size  # 20

DEFAULT_HASH_SLOT_NUM = 5_000_000
DEFAULT_INDEX_NUM = DEFAULT_HASH_SLOT_NUM * 4
INVALID_INDEX = 0
MAX_QUERY_RESULTS = 64  # maxMsgsNumBatch


def file_size(hash_slot_num: int = DEFAULT_HASH_SLOT_NUM, index_num: int = DEFAULT_INDEX_NUM) -> int:
    return HEADER_SIZE + hash_slot_num * SLOT_SIZE + index_num * ENTRY_SIZE


def geometry_from_size(size: int) -> tuple[int, int] | None:
    """(hash_slot_num, index_num) of a file of ``size`` bytes, assuming the default 1:4 ratio."""
    per_slot = SLOT_SIZE + 4 * ENTRY_SIZE
    if size <= HEADER_SIZE or (size - HEADER_SIZE) % per_slot:
        return None
    slots = (size - HEADER_SIZE) // per_slot
    return slots, 4 * slots


def index_key(topic: str, key: str) -> str:
    """``IndexService.buildKey``."""
    return f"{topic}#{key}"


def key_hash(key: str) -> int:
    """``IndexFile.indexKeyHashMethod``: ``abs(hashCode)``, and 0 for ``Integer.MIN_VALUE``."""
    h = abs(string_hash(key))
    return 0 if h > 0x7FFFFFFF else h


def slot_of(key_hash_value: int, hash_slot_num: int) -> int:
    return key_hash_value % hash_slot_num


def slot_position(slot: int) -> int:
    return HEADER_SIZE + slot * SLOT_SIZE


def entry_position(index_no: int, hash_slot_num: int) -> int:
    return HEADER_SIZE + hash_slot_num * SLOT_SIZE + index_no * ENTRY_SIZE


def time_diff_seconds(store_timestamp: int, begin_timestamp: int) -> int:
    """``IndexFile.putKey``: whole seconds since the file's begin, clamped to [0, Int.MAX]."""
    if begin_timestamp <= 0:
        return 0
    diff = int((store_timestamp - begin_timestamp) / 1000)  # Java long division truncates
    return min(max(diff, 0), 0x7FFFFFFF)
