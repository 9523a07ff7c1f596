"""ConsumeQueue unit and ConsumeQueueExt unit.

Specified by formats.md §2 (Apache RocketMQ ``ConsumeQueue.java``, ``ConsumeQueueExt.java``).
"""

from __future__ import annotations

import construct as cs
from construct import this

from formats.derive import compile_struct, field_offsets, flat_fields

# A consume-queue unit: where a message is in the CommitLog, its size and its tags code.
CqUnit = cs.Struct(
    "commitlog_offset" / cs.Int64sb,
    "size" / cs.Int32sb,
    "tags_code" / cs.Int64sb,
)
CQ_UNIT_STRUCT = compile_struct(CqUnit)
CQ_UNIT_SIZE = CQ_UNIT_STRUCT.size  # 20
# The same unit as a numpy record description, for bulk reads (numpy itself is not imported here).
CQ_UNIT_DTYPE = {
    "names": [name for name, _, _ in flat_fields(CqUnit)],
    "formats": [f">i{size}" for _, _, size in flat_fields(CqUnit)],
    "offsets": list(field_offsets(CqUnit).values())[:-1],
    "itemsize": CQ_UNIT_SIZE,
}

# ``ConsumeQueue.fillPreBlank``: units written before the first real one of a queue whose first
# file starts at a non-zero queue offset.
FILLER_OFFSET = 0
FILLER_SIZE = 0x7FFFFFFF
FILLER_TAGS_CODE = 0
FILLER_UNIT = CQ_UNIT_STRUCT.pack(FILLER_OFFSET, FILLER_SIZE, FILLER_TAGS_CODE)

DEFAULT_CQ_FILE_SIZE = 300_000 * CQ_UNIT_SIZE  # mappedFileSizeConsumeQueue


def is_valid_unit(commitlog_offset: int, size: int) -> bool:
    """``ConsumeQueue.recover``: a unit is valid when ``offset >= 0 && size > 0``."""
    return commitlog_offset >= 0 and size > 0


def is_filler_unit(commitlog_offset: int, size: int, tags_code: int = 0) -> bool:
    return commitlog_offset == FILLER_OFFSET and size == FILLER_SIZE and tags_code == FILLER_TAGS_CODE


# ConsumeQueueExt (``enableConsumeQueueExt``): a variable-length unit.
CqExtUnit = cs.Struct(
    "size" / cs.Rebuild(cs.Int16sb, lambda ctx: CQ_EXT_UNIT_FIXED + len(ctx.filter_bitmap)),
    "tags_code" / cs.Int64sb,
    "msg_store_time" / cs.Int64sb,
    "bitmap_size" / cs.Rebuild(cs.Int16sb, cs.len_(this.filter_bitmap)),
    "filter_bitmap" / cs.Bytes(this.bitmap_size),
)
CQ_EXT_UNIT_FIXED = cs.Struct(*CqExtUnit.subcons[:-1]).sizeof()  # MIN_EXT_UNIT_SIZE: all but the bitmap
CQ_EXT_MAX_UNIT_SIZE = 32767
CQ_EXT_END_MARKER = -1  # i16 written where the next unit no longer fits
DEFAULT_CQ_EXT_FILE_SIZE = 48 * 1024 * 1024
# Ext addresses are ``realOffset + Long.MIN_VALUE``; anything at or below MAX_ADDR is one.
CQ_EXT_MAX_ADDR = -(2**31) - 1


def is_ext_address(tags_code: int) -> bool:
    return tags_code <= CQ_EXT_MAX_ADDR


def ext_address_to_offset(address: int) -> int:
    return address - (-(2**63))


def ext_offset_to_address(offset: int) -> int:
    return offset + (-(2**63))
