"""Decode one CommitLog record from bytes: the codec shared by the store's scans and the admin
tools, which read the same records in a broker's PULL_MESSAGE, QUERY_MESSAGE and
VIEW_MESSAGE_BY_ID answers (protocol.md B.8).

Layout and checks: formats.md §1.2 and §1.14 (``CommitLog.checkMessageAndReturnSize``,
``MessageDecoder.decode``), read with the compiled forms of ``formats.commitlog``. No file or
socket I/O: ``buf`` is any buffer (an mmap, a response body). Properties and bodies are decoded
only when asked for; errors are those of ``rmqcli.errors`` (a module that imports nothing).
"""

from __future__ import annotations

import functools
import ipaddress
import zlib
from dataclasses import dataclass, field

from formats import commitlog as fmt
from formats.derive import flat_fields
from rmqcli.errors import CorruptDataError, UsageError

_SIZE_MAGIC = fmt.SIZE_MAGIC_STRUCT
_SYS_FLAG = fmt.SYS_FLAG_STRUCT
_SYS_FLAG_AT = fmt.PREFIX_OFFSETS["sys_flag"]
_PROPS_LEN = fmt.PROPERTIES_LENGTH_STRUCT
_TOPIC_LEN = fmt.TOPIC_LENGTH_STRUCTS
_PROPS_LEN_SIZE = _PROPS_LEN.size
_MAGICS = fmt.MESSAGE_MAGICS
_MIN_RECORD_SIZE = fmt.MIN_RECORD_SIZE
_HOST_FLAGS = fmt.HOST_FLAGS
_HEADER_STRUCTS = fmt.HEADER_STRUCTS
_FIXED_SIZES = {flags: s.size for flags, s in fmt.HEADER_STRUCTS.items()}
_HEADER_FIELDS = [name.replace("_host.", "_") for name, _, _ in flat_fields(fmt.header_schema(False, False))]
_SYS_FLAG_INDEX = _HEADER_FIELDS.index("sys_flag")


@functools.lru_cache(maxsize=4096)
def format_host(address: bytes, port: int) -> str:
    """``ip:port`` as RocketMQ prints it (IPv6 uncompressed in brackets, like the JDK)."""
    if len(address) == 4:
        return f"{ipaddress.IPv4Address(address)}:{port}"
    groups = ":".join(f"{int.from_bytes(address[i : i + 2], 'big'):x}" for i in range(0, 16, 2))
    return f"[{groups}]:{port}"


class RecordError(Exception):
    """A record that fails ``checkMessageAndReturnSize``; ``reason`` is one line."""


@dataclass(slots=True)
class Record:
    """One decoded CommitLog record; ``position`` is where it was read."""

    file: str
    position: int
    total_size: int
    magic_code: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_address: bytes
    born_port: int
    store_timestamp: int
    store_address: bytes
    store_port: int
    reconsume_times: int
    prepared_transaction_offset: int
    body_length: int
    topic: str
    properties_raw: bytes
    body_offset: int  # within the record
    _source: object = field(default=None, repr=False, compare=False)
    file_position: int = field(default=0, compare=False)  # ``position`` within ``file``
    _props: dict[str, str] | None = field(default=None, repr=False, compare=False)

    @property
    def properties(self) -> dict[str, str]:
        if self._props is None:
            self._props = fmt.decode_properties(self.properties_raw)
        return self._props

    @property
    def stored_body(self) -> bytes:
        start = self.file_position + self.body_offset
        return bytes(self._source[start : start + self.body_length])

    @property
    def compressed(self) -> bool:
        return bool(self.sys_flag & fmt.COMPRESSED_FLAG)

    def body(self, *, raw: bool = False) -> bytes:
        """The body, inflated when the compressed flag is set (unless ``raw``)."""
        data = self.stored_body
        if raw or not self.compressed or not data:
            return data
        kind = fmt.compression_type(self.sys_flag)
        try:
            if kind in (fmt.CompressionType.ZLIB, fmt.CompressionType.ZLIB_LEGACY):
                return zlib.decompress(data)
            if kind == fmt.CompressionType.ZSTD:
                import zstandard  # optional

                return zstandard.ZstdDecompressor().decompressobj().decompress(data)
            if kind == fmt.CompressionType.LZ4:
                import lz4.frame  # optional

                return lz4.frame.decompress(data)
        except ImportError as exc:
            raise UsageError(f"{kind.name} bodies need the '{exc.name}' package") from exc
        except Exception as exc:
            raise CorruptDataError(
                f"cannot decompress {kind.name} body: {exc}", self.file, self.position
            ) from exc
        raise CorruptDataError(f"unknown compression type {kind}", self.file, self.position)

    @property
    def msg_id(self) -> str:
        return fmt.offset_msg_id(self.store_address, self.store_port, self.physical_offset)

    @property
    def born_host(self) -> str:
        return format_host(self.born_address, self.born_port)

    @property
    def store_host(self) -> str:
        return format_host(self.store_address, self.store_port)

    @property
    def tags(self) -> str | None:
        return self.properties.get(fmt.PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        return [k for k in self.properties.get(fmt.PROPERTY_KEYS, "").split(fmt.KEY_SEPARATOR) if k]

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(fmt.PROPERTY_UNIQ_KEY)

    @property
    def end(self) -> int:
        return self.position + self.total_size


# ``decode_record`` passes the header's fields straight on: Record declares them in the same order.
assert list(Record.__dataclass_fields__)[2 : 2 + len(_HEADER_FIELDS)] == _HEADER_FIELDS, _HEADER_FIELDS


def record_properties(data: bytes | memoryview) -> dict[str, str]:
    """The properties of the one record ``data`` holds (``MessageDecoder.decodeProperties``);
    empty when the record does not decode."""
    try:
        return decode_record(data, 0, len(data)).properties
    except RecordError:
        return {}


def decode_record(buf, pos: int, limit: int, file_name: str = "", file_from: int = 0) -> Record:
    """Decode and check the record at ``buf[pos:]``; raises ``RecordError``.

    Checks mirror ``checkMessageAndReturnSize``: known magic, size within the file, field
    lengths, and TOTALSIZE equal to the recomputed length. One function, no helpers: scans call it
    once per record.
    """
    if pos + _SIZE_MAGIC.size > limit:
        raise RecordError("truncated record header")
    total, magic = _SIZE_MAGIC.unpack_from(buf, pos)
    if magic not in _MAGICS:
        raise RecordError(f"illegal magic code 0x{magic & 0xFFFFFFFF:08x}")
    if total < _MIN_RECORD_SIZE or total > limit - pos:
        raise RecordError(f"total size {total} out of bounds")
    hosts = _SYS_FLAG.unpack_from(buf, pos + _SYS_FLAG_AT)[0] & _HOST_FLAGS
    fixed = _FIXED_SIZES[hosts]
    if fixed > total:
        raise RecordError("record shorter than its header")
    header = _HEADER_STRUCTS[hosts].unpack_from(buf, pos)  # the fields of ``Record``, in order
    # the body, topic and properties, each length checked against the record's end
    body_len = header[-1]
    end = pos + total
    p = pos + fixed
    if body_len < 0 or p + body_len > end:
        raise RecordError(f"body length {body_len} out of bounds")
    p += body_len
    tl_struct = _TOPIC_LEN[magic]
    if p + tl_struct.size > end:
        raise RecordError("truncated topic length")
    topic_len = tl_struct.unpack_from(buf, p)[0]
    p += tl_struct.size
    if topic_len < 0 or p + topic_len + _PROPS_LEN_SIZE > end:
        raise RecordError(f"topic length {topic_len} out of bounds")
    topic_bytes = bytes(buf[p : p + topic_len])
    p += topic_len
    props_len = _PROPS_LEN.unpack_from(buf, p)[0]
    p += _PROPS_LEN_SIZE
    if props_len > 0:
        if p + props_len > end:
            raise RecordError(f"properties length {props_len} out of bounds")
        props_raw = bytes(buf[p : p + props_len])
    else:
        props_raw = b""
    expected = fmt.calc_msg_length(header[_SYS_FLAG_INDEX], body_len, topic_len, props_len, magic)
    if expected != total:
        raise RecordError(f"total size {total} != computed length {expected}")
    try:
        topic = topic_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError("topic is not UTF-8") from exc
    return Record(file_name, file_from + pos, *header, topic, props_raw, fixed, buf, pos)
