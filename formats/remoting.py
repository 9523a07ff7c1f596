"""Remoting frame and ROCKETMQ binary header.

Specified by protocol.md A.1 (frame), A.2 (header fields, flag bits, language codes) and A.4
(the ROCKETMQ binary header; Apache RocketMQ ``RemotingCommand.java``, ``NettyDecoder.java``,
``RocketMQSerializable.java``). Every integer is big-endian and signed unless noted.
"""

from __future__ import annotations

import enum

import construct as cs
from construct import len_, this

from formats.derive import compile_struct

# --- limits and flag bits (A.1, A.2) -----------------------------------------------------------
MAX_FRAME_LENGTH = 16 * 1024 * 1024
"""``com.rocketmq.remoting.frameMaxLength``: a whole frame, its length word included (Netty's
``LengthFieldBasedFrameDecoder(16777216, 0, 4, 0, 4)``)."""
LENGTH_FIELD_SIZE = 4
HEADER_LENGTH_MASK = 0xFFFFFF
SERIALIZE_TYPE_SHIFT = 24

RPC_TYPE = 0  # flag bit 0: the command is a response
RPC_ONEWAY = 1  # flag bit 1: a oneway request, never answered
FLAG_RESPONSE = 1 << RPC_TYPE
FLAG_ONEWAY = 1 << RPC_ONEWAY


class SerializeType(enum.IntEnum):
    """High byte of the header-length word (``SerializeType.java``)."""

    JSON = 0
    ROCKETMQ = 1


class LanguageCode(enum.IntEnum):
    """``LanguageCode.java``: JSON headers carry the name, binary headers the byte (A.2)."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13  # 5.x


def header_length_and_type(serialize_type: int, header_length: int) -> int:
    """``RemotingCommand.markProtocolType``: ``(type << 24) | length``."""
    return (serialize_type << SERIALIZE_TYPE_SHIFT) | (header_length & HEADER_LENGTH_MASK)


def serialize_type_of(word: int) -> int:
    """``RemotingCommand.getProtocolType``: the high byte of the header-length word."""
    return (word >> SERIALIZE_TYPE_SHIFT) & 0xFF


def header_length_of(word: int) -> int:
    """``RemotingCommand.getHeaderLength``: the low 24 bits of the header-length word."""
    return word & HEADER_LENGTH_MASK


# --- frame (A.1) -------------------------------------------------------------------------------
LENGTH = cs.Int32sb  # counts everything after itself: 4 + header + body
HEADER_LENGTH_AND_TYPE = cs.Int32ub  # (serialize type << 24) | header length

FramePrefix = cs.Struct(
    "length" / LENGTH,
    "header_length_and_type" / HEADER_LENGTH_AND_TYPE,
)
FRAME_PREFIX_STRUCT = compile_struct(FramePrefix)
FRAME_PREFIX_SIZE = FRAME_PREFIX_STRUCT.size
HEADER_WORD_SIZE = HEADER_LENGTH_AND_TYPE.sizeof()  # counted by LENGTH, before the header
LENGTH_STRUCT = compile_struct(cs.Struct("length" / LENGTH))

Frame = cs.Struct(
    "length" / cs.Rebuild(LENGTH, 4 + len_(this.header) + len_(this.body)),
    "header_length_and_type"
    / cs.Rebuild(
        HEADER_LENGTH_AND_TYPE,
        lambda ctx: header_length_and_type(ctx.serialize_type, len(ctx.header)),
    ),
    "serialize_type" / cs.Computed(lambda ctx: serialize_type_of(ctx.header_length_and_type)),
    "header_length" / cs.Computed(lambda ctx: header_length_of(ctx.header_length_and_type)),
    "header" / cs.Bytes(this.header_length),
    "body" / cs.Bytes(this.length - 4 - this.header_length),
)
"""A whole frame; build from ``dict(serialize_type=..., header=..., body=...)``."""

# --- ROCKETMQ binary header (A.4) --------------------------------------------------------------
BinaryHeaderFixed = cs.Struct(
    "code" / cs.Int16sb,
    "language" / cs.Int8ub,
    "version" / cs.Int16sb,
    "opaque" / cs.Int32sb,
    "flag" / cs.Int32sb,
)
BINARY_HEADER_FIXED_STRUCT = compile_struct(BinaryHeaderFixed)

REMARK_LENGTH = cs.Int32sb  # 0 = null
EXT_FIELDS_LENGTH = cs.Int32sb
EXT_KEY_LENGTH = cs.Int16sb
EXT_VALUE_LENGTH = cs.Int32sb  # 0 = null

ExtField = cs.Struct(
    "key" / cs.PascalString(EXT_KEY_LENGTH, "utf8"),
    "value" / cs.PascalString(EXT_VALUE_LENGTH, "utf8"),
)

BinaryHeader = cs.Struct(
    *BinaryHeaderFixed.subcons,
    "remark" / cs.PascalString(REMARK_LENGTH, "utf8"),
    "ext_fields" / cs.Prefixed(EXT_FIELDS_LENGTH, cs.GreedyRange(ExtField)),
)
"""``RocketMQSerializable.rocketMQProtocolEncode``; total length 21 + remark + ext fields."""

# Compiled forms of the variable parts' length words, for the codec's hot path.
REMARK_LENGTH_STRUCT = compile_struct(cs.Struct("n" / REMARK_LENGTH))
EXT_FIELDS_LENGTH_STRUCT = compile_struct(cs.Struct("n" / EXT_FIELDS_LENGTH))
EXT_KEY_LENGTH_STRUCT = compile_struct(cs.Struct("n" / EXT_KEY_LENGTH))
EXT_VALUE_LENGTH_STRUCT = compile_struct(cs.Struct("n" / EXT_VALUE_LENGTH))
