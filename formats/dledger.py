"""DLedger CommitLog: entry header, index unit, file-end blank, text checkpoint files.

Specified by openmessaging/dledger 0.3.1.2 as RocketMQ 4.9.8's ``DLedgerCommitLog`` uses it:
``DLedgerEntry`` (``POS_OFFSET``, ``HEADER_SIZE``, ``BODY_OFFSET``, ``computeSizeInBytes``),
``DLedgerEntryCoder`` (``encode``, ``encodeIndex``), ``DLedgerMmapFileStore`` (``MAGIC_1``,
``INDEX_UNIT_SIZE``, ``recover``, ``persistCheckPoint``), ``MmapFileList`` (``BLANK_MAGIC_CODE``,
``MIN_BLANK_LEN``, ``preAppend``), ``MemberState`` (``currterm``), ``DLedgerConfig`` (paths).
Every integer is big-endian and signed.

A store in this mode has no ``commitlog/``: ``<storePathRootDir>/dledger-<selfId>/data/`` holds
the entries in mapped files named by 20-digit offset (``mappedFileSizeCommitLog`` bytes each),
``index/`` one 32-byte unit per entry index (160 MiB files), and the text files ``checkpoint``
(``committedIndex``, ``endIndex``) and ``currterm`` (``voteLeader``, ``currTerm``) each with a
``.bak``. An entry is the header below and then its body, one CommitLog message record whose
PHYSICALOFFSET is the entry's ``pos + BODY_OFFSET``: the offset the consume queues and index
files store (``DLedgerCommitLog``'s append hook).
"""

from __future__ import annotations

import construct as cs

from formats.derive import compile_struct, field_offsets

DIR_PREFIX = "dledger-"  # DLedgerConfig.getDefaultPath: <storeBaseDir>/dledger-<selfId>
DATA_DIR = "data"
INDEX_DIR = "index"
CHECKPOINT_FILE = "checkpoint"
CURRTERM_FILE = "currterm"
BAK_SUFFIX = ".bak"  # IOUtils.string2File keeps the previous content here

MAGIC_1 = 1  # DLedgerMmapFileStore.MAGIC_1 == CURRENT_MAGIC
BLANK_MAGIC = -1  # MmapFileList.BLANK_MAGIC_CODE: the rest of the file is unused
MIN_BLANK_LEN = 8  # MmapFileList.MIN_BLANK_LEN: a blank is its magic and its length

# DLedgerEntryCoder.encode: the header, then ``body_size`` bytes of body.
EntryHeader = cs.Struct(
    "magic" / cs.Int32sb,
    "size" / cs.Int32sb,  # the whole entry: BODY_OFFSET + body_size
    "index" / cs.Int64sb,
    "term" / cs.Int64sb,
    "pos" / cs.Int64sb,  # the entry's own global offset in the data files
    "channel" / cs.Int32sb,  # reserved
    "chain_crc" / cs.Int32sb,  # 0 in 0.3.1.2 (never computed)
    "body_crc" / cs.Int32sb,  # 0 in 0.3.1.2 (never computed)
    "body_size" / cs.Int32sb,
)
ENTRY_HEADER_STRUCT = compile_struct(EntryHeader)
ENTRY_AT = field_offsets(EntryHeader)
BODY_OFFSET = ENTRY_HEADER_STRUCT.size  # DLedgerEntry.BODY_OFFSET == 48
assert ENTRY_AT["pos"] == 24 and BODY_OFFSET == 48  # DLedgerEntry.POS_OFFSET, BODY_OFFSET
HEADER_SIZE = (
    BODY_OFFSET - 4
)  # DLedgerEntry.HEADER_SIZE (44): recover wants size > it, so an empty body is an entry

# DLedgerEntryCoder.encodeIndex: one unit per entry, at index * INDEX_UNIT_SIZE.
IndexUnit = cs.Struct(
    "magic" / cs.Int32sb,
    "pos" / cs.Int64sb,
    "size" / cs.Int32sb,
    "index" / cs.Int64sb,
    "term" / cs.Int64sb,
)
INDEX_UNIT_STRUCT = compile_struct(IndexUnit)
INDEX_UNIT_SIZE = INDEX_UNIT_STRUCT.size  # DLedgerMmapFileStore.INDEX_UNIT_SIZE == 32
assert INDEX_UNIT_SIZE == 32
DEFAULT_INDEX_FILE_SIZE = INDEX_UNIT_SIZE * 5 * 1024 * 1024  # DLedgerConfig.mappedFileSizeForEntryIndex

# MmapFileList.preAppend: where an entry does not fit, the rest of the file is one blank.
Blank = cs.Struct("magic" / cs.Int32sb, "length" / cs.Int32sb)  # magic: BLANK_MAGIC
BLANK_STRUCT = compile_struct(Blank)

# What every position in the data files starts with: an entry's or a blank's magic.
Magic = cs.Struct("magic" / cs.Int32sb)
MAGIC_STRUCT = compile_struct(Magic)

# Keys of the text files (java.util.Properties, ``key=value`` lines).
COMMITTED_INDEX_KEY = "committedIndex"
END_INDEX_KEY = "endIndex"
VOTE_LEADER_KEY = "voteLeader"
CURR_TERM_KEY = "currTerm"


def is_entry_magic(magic: int) -> bool:
    """``recover``'s check: ``MAGIC_1 <= magic <= CURRENT_MAGIC``."""
    return magic == MAGIC_1


def magic_of(head: bytes) -> int:
    """The magic that ``head`` (at least ``MAGIC_STRUCT.size`` bytes of a data file) starts with."""
    return MAGIC_STRUCT.unpack_from(head)[0]


def self_id_of(dirname: str) -> str | None:
    """The selfId of a ``dledger-<selfId>`` directory name (``None`` for another name)."""
    if dirname.startswith(DIR_PREFIX) and len(dirname) > len(DIR_PREFIX):
        return dirname[len(DIR_PREFIX) :]
    return None
