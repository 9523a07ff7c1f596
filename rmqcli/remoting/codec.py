"""RemotingCommand and its codec: frames, JSON headers, ROCKETMQ binary headers, stream framing.

Specified by protocol.md A.1-A.4 and A.6 (Apache RocketMQ ``RemotingCommand.java``,
``RocketMQSerializable.java``, ``NettyDecoder.java``). The byte layouts come from
``formats.remoting``; this module adds the JSON header dialect and the Java conventions
(nulls omitted, ``extFields`` in ``HashMap`` order, zero-length binary strings read as null).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from formats import fastjson
from formats import remoting as rfmt
from formats.javahash import hashmap_order
from formats.remoting import FLAG_ONEWAY, FLAG_RESPONSE, LanguageCode, SerializeType
from rmqcli.errors import NetworkError
from rmqcli.remoting.codes import ResponseCode, code_name
from rmqcli.remoting.javanames import java_text

if TYPE_CHECKING:
    from rmqcli.remoting.headers import CommandHeader

DEFAULT_LANGUAGE = LanguageCode.JAVA
DEFAULT_VERSION = 407
"""``MQVersion.Version.V4_9_7.ordinal()``, what mqadmin 4.9.7 sends (A.8)."""

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT16_MIN, _INT16_MAX = -(1 << 15), (1 << 15) - 1


class ProtocolError(NetworkError):
    """Bytes from a peer that are not a valid remoting frame or header (the connection is dropped)."""


@dataclass(slots=True)
class RemotingCommand:
    """One request or response (A.2). ``ext_fields`` holds the custom header as strings (A.5)."""

    code: int
    language: int = DEFAULT_LANGUAGE
    version: int = DEFAULT_VERSION
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    @classmethod
    def request(
        cls,
        code: int,
        header: CommandHeader | Mapping[str, Any] | None = None,
        body: bytes = b"",
        *,
        oneway: bool = False,
        **kwargs: Any,
    ) -> RemotingCommand:
        """``RemotingCommand.createRequestCommand``: ``header`` is a typed header or a plain map."""
        return cls(
            code=int(code),
            ext_fields=_ext_of(header),
            body=body,
            flag=FLAG_ONEWAY if oneway else 0,
            **kwargs,
        )

    def response(
        self,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        header: CommandHeader | Mapping[str, Any] | None = None,
        body: bytes = b"",
        **kwargs: Any,
    ) -> RemotingCommand:
        """The answer to this request: response bit set, same opaque, same serialize type (A.4, A.6)."""
        kwargs.setdefault("serialize_type", self.serialize_type)
        return RemotingCommand(
            code=int(code),
            opaque=self.opaque,
            flag=FLAG_RESPONSE,
            remark=remark,
            ext_fields=_ext_of(header),
            body=body,
            **kwargs,
        )

    def header(self, header_type: type[CommandHeader]) -> Any:
        """``decodeCommandCustomHeader``: the typed custom header carried in ``ext_fields``."""
        return header_type.from_ext_fields(self.ext_fields)

    def describe(self) -> str:
        """``SEND_MESSAGE_V2(310)`` / ``SUCCESS(0)``: the code's name, for messages."""
        return f"{code_name(self.code, response=self.is_response)}({self.code})"


def _ext_of(header: CommandHeader | Mapping[str, Any] | None) -> dict[str, str]:
    if header is None:
        return {}
    if type(header) is dict or isinstance(header, Mapping):
        return {str(k): ext_value(v) for k, v in header.items() if v is not None}
    return header.to_ext_fields()


def ext_value(value: Any) -> str:
    """A header value as Java's ``toString`` / fastjson's string coercion writes it (A.3, A.5)."""
    kind = type(value)
    if kind is str:
        return value
    if kind is int:
        return str(value)
    return java_text(value)


# --- JSON header (A.3) -------------------------------------------------------------------------
_SERIALIZE_TYPE_JSON = '"serializeTypeCurrentRPC":"JSON"'


_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f\\"]')  # what json.dumps escapes with ensure_ascii=False


def _js(text: str) -> str:
    if _NEEDS_ESCAPE.search(text) is None:  # the common case, without json's call overhead
        return f'"{text}"'
    return json.dumps(text, ensure_ascii=False)


_LANGUAGE_JSON = {int(m): f'"{m.name}"' for m in LanguageCode}  # enum names, as fastjson writes them
_LANGUAGE_BY_NAME = {m.name: m for m in LanguageCode}


_ORDERS: dict[tuple[str, ...], list[str]] = {}  # the few key sets of headers recur


def _ext_order(ext: dict[str, str]) -> list[str]:
    keys = tuple(ext)
    order = _ORDERS.get(keys)
    if order is None:
        order = hashmap_order(keys)
        if len(_ORDERS) < 4096:
            _ORDERS[keys] = order
    return order


def _ext_json(ext: dict[str, str]) -> str:
    """The entries of ``extFields`` in ``HashMap`` order; escapes looked for once over all of them
    (printable text without quote or backslash has none; anything else goes through ``_js``)."""
    order = _ext_order(ext)
    text = "".join(ext) + "".join(ext.values())
    if text.isprintable() and '"' not in text and "\\" not in text:
        return ",".join([f'"{k}":"{ext[k]}"' for k in order])
    return ",".join([f"{_js(k)}:{_js(ext[k])}" for k in order])


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """fastjson's ``JSON.toJSONString(cmd)``: properties sorted, nulls dropped, enum names."""
    ext = cmd.ext_fields
    if ext:
        if None in ext.values():
            ext = {k: v for k, v in ext.items() if v is not None}
        ext_json = f'"extFields":{{{_ext_json(ext)}}},' if ext else ""
    else:
        ext_json = ""
    language = _LANGUAGE_JSON.get(cmd.language)
    if language is None:
        language = str(int(cmd.language))
    remark = "" if cmd.remark is None else f'"remark":{_js(cmd.remark)},'
    return (
        f'{{"code":{cmd.code},{ext_json}"flag":{cmd.flag},"language":{language},"opaque":{cmd.opaque},'
        f'{remark}{_SERIALIZE_TYPE_JSON},"version":{cmd.version}}}'
    ).encode()


def _json_int(obj: Mapping[str, Any], name: str) -> int:
    value = obj.get(name)
    if value is None:
        return 0
    if isinstance(value, bool):
        raise ProtocolError(f"JSON header: {name} is not a number")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ProtocolError(f"JSON header: {name} is not a number: {value!r}")


def _json_language(value: Any) -> int:
    if value is None:
        return LanguageCode.JAVA
    if isinstance(value, str):
        try:
            return _LANGUAGE_BY_NAME[value]
        except KeyError:
            if value.strip().lstrip("-").isdigit():
                try:
                    return _json_language(int(value))  # an ordinal as text
                except ValueError:  # digits int() does not read ("²") or too many of them
                    pass
            return LanguageCode.OTHER
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return LanguageCode(value)
        except ValueError:
            return value
    raise ProtocolError(f"JSON header: bad language {value!r}")


_JSON = json.JSONDecoder(parse_int=fastjson.parse_int)
_JSON_WHITESPACE = " \t\n\r"


def _loads(raw: bytes) -> Any:
    """``json.loads``, without its encoding detection for the usual object (C++ ends it with a newline)."""
    if raw[:1] == b"{":
        text = raw.decode("utf-8", "surrogatepass")  # what json.loads does with UTF-8 bytes
        obj, end = _JSON.raw_decode(text)
        if end == len(text) or not text[end:].strip(_JSON_WHITESPACE):
            return obj
    return json.loads(raw)


_PLAIN_EXT = frozenset((str, int))
_FLAT_TOP = frozenset((str, int, bool, type(None), dict))  # dict: extFields only


def _orjson_object(raw: bytes) -> dict[str, Any] | None:
    """The header object as orjson reads it (in a third of json's time), or ``None`` where json
    must read it: orjson refuses what json accepts (NaN, lone surrogates, a BOM) and reads an
    integer above 64 bits as a float, so a float, or an ``extFields`` value other than a string or
    an integer, sends the header to json. So does any other object or array: what this returns
    nests two levels at most, and needs no depth check."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict:
        return None
    kinds = list(map(type, obj.values()))
    ext = obj.get("extFields")
    if not set(kinds) <= _FLAT_TOP or kinds.count(dict) != (type(ext) is dict):
        return None
    if type(ext) is dict and not set(map(type, ext.values())) <= _PLAIN_EXT:
        return None
    return obj


MAX_HEADER_DEPTH = fastjson.MAX_DEPTH
"""A JSON header nested deeper than this (the header object is level 1) is refused (rmq's own
limit): its values are written back as text by recursive code (``ext_value``)."""
_TOO_DEEP = f"JSON header nested more than {MAX_HEADER_DEPTH} levels deep"


def decode_json_header(data: bytes | memoryview) -> dict[str, Any]:
    """The fields of a JSON header; lenient like fastjson (A.3: C++, ali-ons and Java forms)."""
    raw = bytes(data)
    standard = True
    obj = _orjson_object(raw)
    flat = obj is not None
    try:
        if obj is None:
            obj = _loads(raw)  # keys are str; values str, int, ... (fastjson's forms go below)
    except (ValueError, UnicodeDecodeError):
        standard = False
        try:
            obj = fastjson.loads(raw, max_depth=MAX_HEADER_DEPTH)
        except fastjson.NestingError:
            raise ProtocolError(_TOO_DEEP) from None
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise ProtocolError(f"JSON header does not parse: {exc}") from None
    except RecursionError:  # json's own guard, far below a stack overflow
        raise ProtocolError(_TOO_DEEP) from None
    if standard and not flat:
        try:
            fastjson.check_depth(obj, raw, MAX_HEADER_DEPTH)
        except fastjson.NestingError:
            raise ProtocolError(_TOO_DEEP) from None
    if not isinstance(obj, dict):
        raise ProtocolError("JSON header is not an object")
    ext_raw = obj.get("extFields")
    ext: dict[str, str] = {}
    if standard and type(ext_raw) is dict:  # standard JSON keys are str: one pass
        ext = {k: v if type(v) is str else ext_value(v) for k, v in ext_raw.items() if v is not None}
    elif isinstance(ext_raw, dict):
        for key, value in ext_raw.items():
            if type(value) is str and type(key) is str:  # the common case
                ext[key] = value
            elif value is not None:
                # the dialect's keys as text, as a Map<String, String> gets them: JSON for an object
                name = ext_value(key.as_dict() if isinstance(key, fastjson.ObjectKey) else key)
                ext[name] = ext_value(value)
    elif ext_raw is not None:
        raise ProtocolError("JSON header: extFields is not an object")
    remark = obj.get("remark")
    if remark is not None and not isinstance(remark, str):
        remark = ext_value(remark)
    return dict(
        code=_int_field(obj, "code"),
        language=_json_language(obj.get("language")),
        version=_int_field(obj, "version"),
        opaque=_int_field(obj, "opaque"),
        flag=_int_field(obj, "flag"),
        remark=remark,
        ext_fields=ext,
    )


def _int_field(obj: Mapping[str, Any], name: str) -> int:
    value = obj.get(name)
    return value if type(value) is int else _json_int(obj, name)


# --- ROCKETMQ binary header (A.4) --------------------------------------------------------------
_FIXED = rfmt.BINARY_HEADER_FIXED_STRUCT
_REMARK_LEN = rfmt.REMARK_LENGTH_STRUCT
_EXT_LEN = rfmt.EXT_FIELDS_LENGTH_STRUCT
_KEY_LEN = rfmt.EXT_KEY_LENGTH_STRUCT
_VALUE_LEN = rfmt.EXT_VALUE_LENGTH_STRUCT


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    """``RocketMQSerializable.rocketMQProtocolEncode``; ``ext_fields`` in the given order."""
    if not _INT16_MIN <= cmd.code <= _INT16_MAX:
        raise ProtocolError(f"code {cmd.code} does not fit a ROCKETMQ header (int16); use JSON")
    if not _INT16_MIN <= cmd.version <= _INT16_MAX:
        raise ProtocolError(f"version {cmd.version} does not fit a ROCKETMQ header (int16)")
    remark = cmd.remark.encode("utf-8") if cmd.remark else b""
    ext = bytearray()
    for key, value in cmd.ext_fields.items():
        if value is None:
            continue
        k = key.encode("utf-8")
        v = value.encode("utf-8")
        if len(k) > _INT16_MAX:
            raise ProtocolError(f"extFields key of {len(k)} bytes does not fit a ROCKETMQ header")
        ext += _KEY_LEN.pack(len(k)) + k + _VALUE_LEN.pack(len(v)) + v
    return b"".join(
        (
            _FIXED.pack(cmd.code, cmd.language & 0xFF, cmd.version, cmd.opaque, cmd.flag),
            _REMARK_LEN.pack(len(remark)),
            remark,
            _EXT_LEN.pack(len(ext)),
            bytes(ext),
        )
    )


def _utf8(data: bytes | memoryview) -> str:
    return bytes(data).decode("utf-8", "replace")  # Java's new String(bytes, UTF_8)


def decode_binary_header(data: bytes | memoryview) -> dict[str, Any]:
    """``RocketMQSerializable.rocketMQProtocolDecode``; a zero-length remark or value is null."""
    buf = memoryview(data)
    n = len(buf)
    if n < _FIXED.size + _REMARK_LEN.size + _EXT_LEN.size:
        raise ProtocolError(f"ROCKETMQ header of {n} bytes is too short")
    code, language, version, opaque, flag = _FIXED.unpack_from(buf, 0)
    pos = _FIXED.size
    (remark_len,) = _REMARK_LEN.unpack_from(buf, pos)
    pos += _REMARK_LEN.size
    if remark_len < 0 or pos + remark_len + _EXT_LEN.size > n:
        raise ProtocolError(f"ROCKETMQ header: bad remark length {remark_len}")
    remark = _utf8(buf[pos : pos + remark_len]) if remark_len else None
    pos += remark_len
    (ext_len,) = _EXT_LEN.unpack_from(buf, pos)
    pos += _EXT_LEN.size
    end = pos + ext_len
    if ext_len < 0 or end > n:
        raise ProtocolError(f"ROCKETMQ header: bad extFields length {ext_len}")
    ext: dict[str, str] = {}
    while pos < end:
        if pos + _KEY_LEN.size > end:
            raise ProtocolError("ROCKETMQ header: truncated extFields entry")
        (key_len,) = _KEY_LEN.unpack_from(buf, pos)
        pos += _KEY_LEN.size
        if key_len < 0 or pos + key_len + _VALUE_LEN.size > end:
            raise ProtocolError(f"ROCKETMQ header: bad extFields key length {key_len}")
        key = _utf8(buf[pos : pos + key_len])
        pos += key_len
        (value_len,) = _VALUE_LEN.unpack_from(buf, pos)
        pos += _VALUE_LEN.size
        if value_len < 0 or pos + value_len > end:
            raise ProtocolError(f"ROCKETMQ header: bad extFields value length {value_len}")
        if value_len:
            ext[key] = _utf8(buf[pos : pos + value_len])
        else:
            ext.pop(key, None)  # readStr gives null: the key is absent for the header decoder
        pos += value_len
    try:
        language = LanguageCode(language)
    except ValueError:
        pass
    return dict(
        code=code, language=language, version=version, opaque=opaque, flag=flag, remark=remark, ext_fields=ext
    )


# --- frames (A.1) ------------------------------------------------------------------------------
def encode(cmd: RemotingCommand, *, max_frame_length: int = rfmt.MAX_FRAME_LENGTH) -> bytes:
    """The whole frame of ``cmd``: length, header-length word, header, body."""
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        header = encode_binary_header(cmd)
    else:
        header = encode_json_header(cmd)
    body = cmd.body or b""
    length = rfmt.HEADER_WORD_SIZE + len(header) + len(body)
    if len(header) > rfmt.HEADER_LENGTH_MASK or length + rfmt.LENGTH_FIELD_SIZE > max_frame_length:
        raise ProtocolError(f"a frame of {length + 4} bytes exceeds the {max_frame_length}-byte limit")
    prefix = rfmt.FRAME_PREFIX_STRUCT.pack(
        length, rfmt.header_length_and_type(cmd.serialize_type, len(header))
    )
    return b"".join((prefix, header, body))


def decode(frame: bytes | bytearray | memoryview) -> RemotingCommand:
    """``RemotingCommand.decode`` of one whole frame (length word included)."""
    view = frame if type(frame) is bytes else memoryview(frame)  # bytes slices need no view
    n = len(view)
    if n < rfmt.FRAME_PREFIX_SIZE:
        raise ProtocolError(f"a frame of {n} bytes is shorter than its {rfmt.FRAME_PREFIX_SIZE}-byte prefix")
    length, word = rfmt.FRAME_PREFIX_STRUCT.unpack_from(view, 0)
    if length != n - rfmt.LENGTH_FIELD_SIZE:
        raise ProtocolError(f"frame length field {length} does not match its {n} bytes")
    serialize_type = rfmt.serialize_type_of(word)
    header_length = rfmt.header_length_of(word)
    if header_length > length - rfmt.HEADER_WORD_SIZE:
        raise ProtocolError(f"header length {header_length} exceeds the frame length {length}")
    start = rfmt.FRAME_PREFIX_SIZE
    header = view[start : start + header_length]
    if serialize_type == SerializeType.JSON:
        fields = decode_json_header(header)
    elif serialize_type == SerializeType.ROCKETMQ:
        fields = decode_binary_header(header)
    else:
        raise ProtocolError(f"unknown serialize type {serialize_type}")
    return RemotingCommand(
        **fields,
        body=bytes(view[start + header_length :]),
        serialize_type=_SERIALIZE_TYPES[serialize_type],
    )


_SERIALIZE_TYPES = {int(t): t for t in SerializeType}


class FrameDecoder:
    """Cuts a byte stream into whole frames (``LengthFieldBasedFrameDecoder``, A.1).

    ``feed`` takes chunks of any size and returns the frames they complete. A length word that is
    negative, too small to hold the header-length word, or announces a frame above the limit
    raises ``ProtocolError`` before anything is buffered for it, so memory stays bounded.
    """

    __slots__ = ("_buffer", "max_frame_length")

    def __init__(self, max_frame_length: int = rfmt.MAX_FRAME_LENGTH):
        self._buffer = bytearray()
        self.max_frame_length = max_frame_length

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a whole frame (only those: nothing is allocated
        for the rest of a frame before its bytes arrive)."""
        return len(self._buffer)

    def clear(self) -> None:
        """Forget a partly received frame and free its buffer."""
        self._buffer = bytearray()

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        buffer = self._buffer
        if not buffer and type(data) is bytes and len(data) >= rfmt.LENGTH_FIELD_SIZE:
            (length,) = rfmt.LENGTH_STRUCT.unpack_from(data, 0)
            if 4 <= length and length + rfmt.LENGTH_FIELD_SIZE == len(data) <= self.max_frame_length:
                return [data]  # exactly one frame, the usual read of a request/response exchange
        buffer += data
        frames: list[bytes] = []
        pos = 0
        available = len(buffer)
        length_struct = rfmt.LENGTH_STRUCT
        while available - pos >= rfmt.LENGTH_FIELD_SIZE:
            (length,) = length_struct.unpack_from(buffer, pos)
            if length < 4:
                buffer.clear()
                raise ProtocolError(f"bad frame length {length}")
            total = length + rfmt.LENGTH_FIELD_SIZE
            if total > self.max_frame_length:
                buffer.clear()
                raise ProtocolError(
                    f"a frame of {total} bytes exceeds the {self.max_frame_length}-byte limit"
                )
            if available - pos < total:
                break
            frames.append(bytes(buffer[pos : pos + total]))
            pos += total
        if pos:
            del buffer[:pos]
        return frames

    def feed_commands(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        """``feed`` and decode every completed frame."""
        return [decode(frame) for frame in self.feed(data)]
