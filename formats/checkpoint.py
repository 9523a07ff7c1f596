"""StoreCheckpoint page.

Specified by formats.md §4 (Apache RocketMQ ``StoreCheckpoint.java``): a 4 KiB file whose first
bytes hold big-endian i64 timestamps/offsets; the rest is zero.
"""

from __future__ import annotations

import construct as cs

from formats.derive import compile_struct

PAGE_SIZE = 4096

CheckpointFields = cs.Struct(
    "physic_msg_timestamp" / cs.Int64sb,
    "logics_msg_timestamp" / cs.Int64sb,
    "index_msg_timestamp" / cs.Int64sb,
    "master_flushed_offset" / cs.Int64sb,  # 5.0.0+
    "confirm_phy_offset" / cs.Int64sb,  # 5.1.1+
)
FIELDS_STRUCT = compile_struct(CheckpointFields)

CheckpointPage = cs.Struct(
    *CheckpointFields.subcons,
    "padding" / cs.Padding(PAGE_SIZE - FIELDS_STRUCT.size),
)

MIN_TIMESTAMP_MARGIN_MS = 3000


def min_timestamp(physic_msg_timestamp: int, logics_msg_timestamp: int) -> int:
    """``StoreCheckpoint.getMinTimestamp``."""
    return max(0, min(physic_msg_timestamp, logics_msg_timestamp) - MIN_TIMESTAMP_MARGIN_MS)


def min_timestamp_index(
    physic_msg_timestamp: int, logics_msg_timestamp: int, index_msg_timestamp: int
) -> int:
    """``StoreCheckpoint.getMinTimestampIndex``."""
    return min(min_timestamp(physic_msg_timestamp, logics_msg_timestamp), index_msg_timestamp)
