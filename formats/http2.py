"""HTTP/2 frames (RFC 9113) and gRPC's message prefix, as the gRPC server needs them.

Specified by RFC 9113 §4.1 (frame layout), §6 (frame definitions), §7 (error codes), §6.5.2
(settings) and gRPC's PROTOCOL-HTTP2.md ("Length-Prefixed-Message"). Every integer is big-endian
and unsigned; the reserved high bit of stream ids is masked off by the reader.

The frame header's 24-bit length and 8-bit type share one 32-bit word here (``length << 8 |
type``), so that the whole header is one ``struct`` unpack (as formats/remoting.py's header word).
"""

from __future__ import annotations

import enum

import construct as cs

from formats.derive import compile_struct

# --- connection preface (RFC 9113 §3.4) ---------------------------------------------------------
CLIENT_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# --- frame header (RFC 9113 §4.1) ---------------------------------------------------------------
LENGTH_SHIFT = 8
TYPE_MASK = 0xFF
STREAM_ID_MASK = 0x7FFFFFFF  # the high bit is reserved (R), ignored on receipt
MAX_FRAME_LENGTH = 0xFFFFFF

FrameHeader = cs.Struct(
    "length_and_type" / cs.Int32ub,  # 24-bit payload length << 8 | 8-bit frame type
    "flags" / cs.Int8ub,
    "stream_id" / cs.Int32ub,  # R bit + 31-bit stream identifier
)
FRAME_HEADER_STRUCT = compile_struct(FrameHeader)
FRAME_HEADER_SIZE = FRAME_HEADER_STRUCT.size  # 9


def length_and_type(length: int, frame_type: int) -> int:
    """The first word of a frame header: ``length << 8 | type`` (RFC 9113 §4.1)."""
    return (length << LENGTH_SHIFT) | frame_type


def frame_header(length: int, frame_type: int, flags: int, stream_id: int) -> bytes:
    """The 9-byte header of a frame (RFC 9113 §4.1)."""
    return FRAME_HEADER_STRUCT.pack(length_and_type(length, frame_type), flags, stream_id)


class FrameType(enum.IntEnum):
    """RFC 9113 §6 (§11.2's registry)."""

    DATA = 0x0
    HEADERS = 0x1
    PRIORITY = 0x2
    RST_STREAM = 0x3
    SETTINGS = 0x4
    PUSH_PROMISE = 0x5
    PING = 0x6
    GOAWAY = 0x7
    WINDOW_UPDATE = 0x8
    CONTINUATION = 0x9


# Flags (RFC 9113 §6.1, §6.2, §6.5, §6.7, §6.10)
FLAG_END_STREAM = 0x1  # DATA, HEADERS
FLAG_ACK = 0x1  # SETTINGS, PING
FLAG_END_HEADERS = 0x4  # HEADERS, CONTINUATION
FLAG_PADDED = 0x8  # DATA, HEADERS
FLAG_PRIORITY = 0x20  # HEADERS


class ErrorCode(enum.IntEnum):
    """RFC 9113 §7: the codes of RST_STREAM and GOAWAY."""

    NO_ERROR = 0x0
    PROTOCOL_ERROR = 0x1
    INTERNAL_ERROR = 0x2
    FLOW_CONTROL_ERROR = 0x3
    SETTINGS_TIMEOUT = 0x4
    STREAM_CLOSED = 0x5
    FRAME_SIZE_ERROR = 0x6
    REFUSED_STREAM = 0x7
    CANCEL = 0x8
    COMPRESSION_ERROR = 0x9
    CONNECT_ERROR = 0xA
    ENHANCE_YOUR_CALM = 0xB
    INADEQUATE_SECURITY = 0xC
    HTTP_1_1_REQUIRED = 0xD


class SettingId(enum.IntEnum):
    """RFC 9113 §6.5.2."""

    HEADER_TABLE_SIZE = 0x1
    ENABLE_PUSH = 0x2
    MAX_CONCURRENT_STREAMS = 0x3
    INITIAL_WINDOW_SIZE = 0x4
    MAX_FRAME_SIZE = 0x5
    MAX_HEADER_LIST_SIZE = 0x6


# Defaults and bounds (RFC 9113 §6.5.2, §6.9.1, §6.9.2)
DEFAULT_WINDOW_SIZE = 65535
DEFAULT_MAX_FRAME_SIZE = 16384
DEFAULT_HEADER_TABLE_SIZE = 4096
MAX_WINDOW_SIZE = 2**31 - 1
MAX_ALLOWED_FRAME_SIZE = 2**24 - 1

# --- frame payloads (RFC 9113 §6) ---------------------------------------------------------------
SettingEntry = cs.Struct(
    "id" / cs.Int16ub,
    "value" / cs.Int32ub,
)
"""One setting of a SETTINGS frame; the payload is a run of these (§6.5.1)."""
SETTING_STRUCT = compile_struct(SettingEntry)
SETTING_SIZE = SETTING_STRUCT.size  # 6

WindowUpdate = cs.Struct("increment" / cs.Int32ub)  # R bit + 31-bit increment (§6.9)
WINDOW_UPDATE_STRUCT = compile_struct(WindowUpdate)
WINDOW_UPDATE_SIZE = WINDOW_UPDATE_STRUCT.size  # 4

RstStream = cs.Struct("error_code" / cs.Int32ub)  # §6.4
RST_STREAM_STRUCT = compile_struct(RstStream)
RST_STREAM_SIZE = RST_STREAM_STRUCT.size  # 4

GoAway = cs.Struct(
    "last_stream_id" / cs.Int32ub,  # R bit + 31 bits
    "error_code" / cs.Int32ub,
)
"""GOAWAY's fixed part; additional debug data follows (§6.8)."""
GOAWAY_STRUCT = compile_struct(GoAway)
GOAWAY_SIZE = GOAWAY_STRUCT.size  # 8

PingPayload = cs.Struct("opaque" / cs.Bytes(8))  # §6.7
PING_STRUCT = compile_struct(PingPayload)
PING_SIZE = PING_STRUCT.size  # 8

Priority = cs.Struct(
    "stream_dependency" / cs.Int32ub,  # E bit + 31 bits
    "weight" / cs.Int8ub,
)
"""PRIORITY's payload, and what a HEADERS frame with the PRIORITY flag carries first (§6.3, §6.2)."""
PRIORITY_STRUCT = compile_struct(Priority)
PRIORITY_SIZE = PRIORITY_STRUCT.size  # 5

# --- gRPC message prefix (PROTOCOL-HTTP2.md "Length-Prefixed-Message") -----------------------
MessagePrefix = cs.Struct(
    "compressed" / cs.Int8ub,  # 0: identity, 1: compressed with the call's grpc-encoding
    "length" / cs.Int32ub,
)
MESSAGE_PREFIX_STRUCT = compile_struct(MessagePrefix)
MESSAGE_PREFIX_SIZE = MESSAGE_PREFIX_STRUCT.size  # 5
