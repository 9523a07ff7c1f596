"""HPACK decoding (RFC 7541) for the server side of rmq serve's HTTP/2 gRPC endpoint.

One ``HpackDecoder`` per connection turns each complete header block (a HEADERS frame's fragment
and its CONTINUATION frames' joined, RFC 9113 §4.3) into the ``(name, value)`` pairs it carries,
keeping the connection's dynamic table (RFC 7541 §2.3.2, §4) across blocks.

What is checked here is HPACK's own layout: indices within the tables (§2.3.3), integers (§5.1,
bounded to 2**32 and ten continuation octets), string lengths within the block (§5.2), Huffman
strings without EOS and with at most seven bits of all-ones padding (§5.2), and dynamic table size
updates only at the start of a block and not above the size we advertised (§4.2, §6.3). Any
breach raises ``HpackError``, which HTTP/2 treats as a connection error of type COMPRESSION_ERROR
(RFC 9113 §4.3): the table state is then undefined and the connection must end. HTTP semantics
(lowercase names, pseudo-header order, connection-specific fields, RFC 9113 §8.2) are the
caller's; the never-indexed flag (§6.2.3) is not reported, since a server forwards nothing.

Speed: an indexed field (one octet for indices below 127) costs a table lookup. Huffman strings are
decoded a byte at a time through a 257-state table built at import from the code lengths of
Appendix B (the code is canonical: codes follow from the lengths). Decoded Huffman strings, and
whole literal fields sent without indexing under a static or literal name, are memoized by their raw
octets in small bounded module-level dicts (they depend on nothing but those octets), so the values
a client repeats on every call (gRPC sends custom metadata as literals without indexing) cost a
dict lookup; values that change on every call (a date, a request id, grpc-timeout) go through.
"""

from __future__ import annotations

from collections import deque

__all__ = ["HeaderListTooLarge", "HpackDecoder", "HpackError", "huffman_decode"]


class HpackError(Exception):
    """A malformed header block (RFC 7541 §2 to §6): HTTP/2's COMPRESSION_ERROR (RFC 9113 §4.3)."""


class HeaderListTooLarge(HpackError):
    """The decoded header list passes max_header_list_size, counted as RFC 9113 §6.5.2 does.

    Unlike its base class this leaves the decoder usable: the block was decoded to its end (the
    fields past the bound were discarded, the dynamic table updated as the block said), so the
    caller can refuse the one stream (e.g. RST_STREAM, or a 431 status) and go on.
    """

    def __init__(self, message: str, size: int, limit: int) -> None:
        super().__init__(message)
        self.size = size  # the whole list's size
        self.limit = limit


# RFC 7541 Appendix A: the static table, indices 1 to 61 (index 0 is never valid, §6.1)
_STATIC: tuple[tuple[bytes, bytes], ...] = (
    (b"", b""),
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
)
_STATIC_LEN = len(_STATIC)  # 62: the first dynamic index (§2.3.3)

_ENTRY_OVERHEAD = 32  # §4.1, and RFC 9113 §6.5.2 for the header list
_MAX_INT = 2**32  # larger integers are refused (§5.1 leaves the bound to the decoder)
_MAX_INT_OCTETS = 10  # continuation octets after the prefix

# RFC 7541 Appendix B: the code length of each symbol, 0 to 255 and EOS (256). The code is
# canonical: sorted by (length, symbol), each code is the previous plus one, shifted left by the
# growth in length; _huffman_codes() rebuilds the Appendix's codes from these.
# fmt: off
_HUFFMAN_LENGTHS = (
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
    30,
)
# fmt: on
_EOS = 256


def _huffman_codes() -> list[int]:
    """The codes of RFC 7541 Appendix B, rebuilt from their lengths (canonical Huffman code)."""
    codes = [0] * len(_HUFFMAN_LENGTHS)
    code = 0
    previous = 0
    for symbol in sorted(range(len(_HUFFMAN_LENGTHS)), key=lambda s: (_HUFFMAN_LENGTHS[s], s)):
        length = _HUFFMAN_LENGTHS[symbol]
        code <<= length - previous
        previous = length
        codes[symbol] = code
        code += 1
    return codes


def _huffman_tables() -> tuple[list[int], list[bytes], frozenset[int], frozenset[int]]:
    """The byte-at-a-time decoding machine for the code of RFC 7541 Appendix B (§5.2).

    A state is an inner node of the code tree (0 to 255; 0 is the root: between symbols), or 256,
    the failed state (EOS decoded), which keeps itself. Entry ``state * 256 + octet`` of the first list
    is the next state times 256, of the second the symbols completed on the way (at most two: no
    code is shorter than five bits). A string may end only at the root or on the all-ones path
    within seven bits of it (padding with EOS's most significant bits, §5.2): the third set holds
    those states times 256, the fourth the all-ones states deeper than that (padding too long).
    """
    # the tree: children[node] = [zero, one]; a leaf is stored as -(symbol + 1)
    children: list[list[int]] = [[0, 0]]
    for symbol, code in enumerate(_huffman_codes()):
        node = 0
        for shift in range(_HUFFMAN_LENGTHS[symbol] - 1, 0, -1):
            bit = (code >> shift) & 1
            child = children[node][bit]
            if child == 0:
                children.append([0, 0])
                child = children[node][bit] = len(children) - 1
            node = child
        children[node][code & 1] = -(symbol + 1)
    failed = len(children)
    # a nibble at a time first (4096 walks of four bits), then each octet as two nibbles
    nibble_next: list[list[int]] = []
    nibble_emit: list[list[bytes]] = []
    for state in range(failed):
        next_row, emit_row = [], []
        for nibble in range(16):
            node, emitted = state, b""
            for shift in (3, 2, 1, 0):
                child = children[node][(nibble >> shift) & 1]
                if child >= 0:
                    node = child
                elif child == -(_EOS + 1):
                    node, emitted = failed, b""
                    break
                else:
                    node, emitted = 0, emitted + bytes((-child - 1,))
            next_row.append(node)
            emit_row.append(emitted)
        nibble_next.append(next_row)
        nibble_emit.append(emit_row)
    nibble_next.append([failed] * 16)
    nibble_emit.append([b""] * 16)
    octet_next: list[int] = []
    octet_emit: list[bytes] = []
    shared: dict[bytes, bytes] = {}
    for state in range(failed + 1):
        for high in range(16):
            middle = nibble_next[state][high]
            first = nibble_emit[state][high]
            octet_next.extend([node << 8 for node in nibble_next[middle]])
            if first:
                octet_emit.extend(
                    [shared.setdefault(first + last, first + last) for last in nibble_emit[middle]]
                )
            else:
                octet_emit.extend(nibble_emit[middle])
    ones = [0]
    for _ in range(29):  # EOS is thirty ones: its path's inner nodes
        ones.append(children[ones[-1]][1])
    return octet_next, octet_emit, frozenset(n << 8 for n in ones[:8]), frozenset(n << 8 for n in ones[8:])


_HUFFMAN_NEXT, _HUFFMAN_EMIT, _HUFFMAN_ENDS, _HUFFMAN_LONG_PADDING = _huffman_tables()
_HUFFMAN_FAILED = ((len(_HUFFMAN_NEXT) >> 8) - 1) << 8  # the last state

# memoized by raw octets; FIFO-bounded (a full dict drops its oldest entry)
_CACHE_ENTRIES = 512
_CACHE_MAX_RAW = 256  # longer raw strings or fields are decoded every time
_huffman_cache: dict[bytes, bytes] = {}
_field_cache: dict[bytes, tuple[bytes, bytes]] = {}


def _remember(cache: dict, key: bytes, value: object) -> None:
    """Put ``key`` in ``cache``, dropping the oldest entry if the cache is full."""
    if len(cache) >= _CACHE_ENTRIES:
        try:
            del cache[next(iter(cache))]
        except (KeyError, RuntimeError, StopIteration):  # another thread got there first
            cache.clear()
    cache[key] = value


def huffman_decode(raw: bytes) -> bytes:
    """The octets a Huffman-coded string literal (RFC 7541 §5.2, Appendix B) stands for."""
    decoded = _huffman_cache.get(raw)
    if decoded is not None:
        return decoded
    transitions = _HUFFMAN_NEXT
    emits = _HUFFMAN_EMIT
    state = 0
    parts: list[bytes] = []
    append = parts.append
    for octet in raw:
        entry = state | octet
        state = transitions[entry]
        append(emits[entry])
    if state not in _HUFFMAN_ENDS:
        if state == _HUFFMAN_FAILED:
            raise HpackError("Huffman string holds EOS (RFC 7541 §5.2)")
        if state in _HUFFMAN_LONG_PADDING:
            raise HpackError("Huffman string padded with more than 7 bits (RFC 7541 §5.2)")
        raise HpackError("Huffman string ends in padding that is not EOS's prefix (RFC 7541 §5.2)")
    decoded = b"".join(parts)
    if len(raw) <= _CACHE_MAX_RAW:
        _remember(_huffman_cache, raw, decoded)
    return decoded


def _integer_tail(data: bytes, pos: int, value: int) -> tuple[int, int]:
    """Finish an integer whose N-bit prefix was all ones (RFC 7541 §5.1): ``value`` is 2**N - 1,
    ``pos`` the first continuation octet. Returns the integer and the position after it."""
    end = len(data)
    shift = 0
    for _ in range(_MAX_INT_OCTETS):
        if pos >= end:
            raise HpackError("header block ends inside an integer (RFC 7541 §5.1)")
        octet = data[pos]
        pos += 1
        value += (octet & 0x7F) << shift
        if value > _MAX_INT:
            raise HpackError(f"integer above 2**32 in header block (RFC 7541 §5.1) at octet {pos - 1}")
        if octet < 0x80:
            return value, pos
        shift += 7
    raise HpackError(f"integer longer than {_MAX_INT_OCTETS} continuation octets (RFC 7541 §5.1)")


def _string_end(data: bytes, pos: int) -> int:
    """The position after the string literal at ``pos`` (RFC 7541 §5.2), checked to fit the block."""
    return _string_bounds(data, pos)[1]


def _string_bounds(data: bytes, pos: int) -> tuple[int, int]:
    """Where the octets of the string literal at ``pos`` start and end (RFC 7541 §5.2: H bit,
    7-bit prefix length, octets), checked to fit the block."""
    if pos >= len(data):
        raise HpackError("header block ends before a string literal (RFC 7541 §5.2)")
    length = data[pos] & 0x7F
    if length == 0x7F:
        length, pos = _integer_tail(data, pos + 1, 0x7F)
    else:
        pos += 1
    end = pos + length
    if end > len(data):
        raise HpackError(f"string literal of {length} octets runs past the header block (RFC 7541 §5.2)")
    return pos, end


def _string(data: bytes, pos: int) -> tuple[bytes, int]:
    """The string literal at ``pos`` (RFC 7541 §5.2) and the position after it."""
    first = data[pos] if pos < len(data) else 0
    pos, end = _string_bounds(data, pos)
    if first & 0x80:
        return huffman_decode(data[pos:end]), end
    return data[pos:end], end


class HpackDecoder:
    """The decoding half of one HTTP/2 connection's HPACK context (RFC 7541 §2.2, §3).

    ``max_header_list_size`` is the SETTINGS_MAX_HEADER_LIST_SIZE we advertised (RFC 9113
    §6.5.2), ``max_table_size`` the dynamic table's starting maximum (4096 unless our SETTINGS say
    otherwise, RFC 9113 §6.5.2 SETTINGS_HEADER_TABLE_SIZE). ``max_allowed_table_size`` starts
    equal to it; set it when our SETTINGS_HEADER_TABLE_SIZE changes: a size update above it is an
    error (§4.2). When it shrinks, §4.2 makes the encoder send an update at the start of its next
    block; that is not enforced here (the encoder's table stays within what it was allowed before).
    """

    __slots__ = ("max_header_list_size", "max_allowed_table_size", "_table", "_size", "_max_size")

    def __init__(self, max_header_list_size: int = 16384, max_table_size: int = 4096) -> None:
        self.max_header_list_size = max_header_list_size
        self.max_allowed_table_size = max_table_size
        self._table: deque[tuple[bytes, bytes]] = deque()  # newest first: index 62 is _table[0]
        self._size = 0  # §4.1: sum of len(name) + len(value) + 32
        self._max_size = max_table_size  # the last size update's value (§4.2)

    @property
    def table(self) -> list[tuple[bytes, bytes]]:
        """The dynamic table's entries, newest (index 62) first."""
        return list(self._table)

    @property
    def table_size(self) -> int:
        """The dynamic table's size (RFC 7541 §4.1)."""
        return self._size

    @property
    def table_max_size(self) -> int:
        """The dynamic table's maximum size, as the encoder last set it (RFC 7541 §4.2, §6.3)."""
        return self._max_size

    def decode(self, block: bytes | bytearray | memoryview) -> list[tuple[bytes, bytes]]:
        """One complete header block (HEADERS + CONTINUATION payloads joined) -> (name, value)
        pairs in order (RFC 7541 §3.2, field representations §6).

        Raises ``HpackError`` for a malformed block (the connection must then end), or
        ``HeaderListTooLarge`` once the whole block was decoded, if its list passes
        ``max_header_list_size``: the fields past the bound are dropped as they are decoded, but
        the dynamic table takes every insertion the block makes, so the next block decodes right.
        """
        data = block if type(block) is bytes else bytes(block)
        end = len(data)
        pos = 0
        fields: list[tuple[bytes, bytes]] = []
        append = fields.append
        static = _STATIC
        table = self._table
        limit = self.max_header_list_size
        total = 0
        while pos < end and data[pos] & 0xE0 == 0x20:  # §4.2: size updates only come first
            pos = self._size_update(data, pos)
        while pos < end:
            octet = data[pos]
            if octet & 0x80:  # §6.1 indexed header field, 7-bit prefix index
                if octet != 0xFF:
                    index = octet & 0x7F
                    pos += 1
                else:
                    index, pos = _integer_tail(data, pos + 1, 0x7F)
                if index < _STATIC_LEN:
                    if index == 0:
                        raise HpackError("indexed header field with index 0 (RFC 7541 §6.1)")
                    field = static[index]
                else:
                    try:
                        field = table[index - _STATIC_LEN]
                    except IndexError:
                        raise HpackError(self._bad_index(index)) from None
            elif octet & 0x40:  # §6.2.1 literal with incremental indexing, 6-bit prefix
                field, pos = self._literal(data, pos, 0x3F)
                self._insert(field)
            elif octet & 0x20:
                raise HpackError("dynamic table size update after a header field (RFC 7541 §4.2)")
            else:  # §6.2.2 without indexing (0000), §6.2.3 never indexed (0001): 4-bit prefix
                field = None
                if not octet & 0x0F and pos + 1 < end:  # a literal name: grpc's custom metadata
                    name_end = pos + 2 + data[pos + 1]  # H bit 0 and a 7-bit length when < 0x7F
                    if data[pos + 1] < 0x7F and name_end < end and data[name_end] < 0x7F:
                        stop = name_end + 1 + data[name_end]  # the value: plain, 7-bit length
                        if stop <= end:
                            field = (data[pos + 2 : name_end], data[name_end + 1 : stop])
                            pos = stop
                if field is None:
                    field, pos = self._literal_not_indexed(data, pos)
            total += len(field[0]) + len(field[1]) + _ENTRY_OVERHEAD
            if total <= limit:
                append(field)
        if total > limit:
            raise HeaderListTooLarge(
                f"header list of {total} octets passes the {limit} advertised (RFC 9113 §6.5.2)", total, limit
            )
        return fields

    def _bad_index(self, index: int) -> str:
        return (
            f"index {index} past the static table and the {len(self._table)} dynamic entries"
            " (RFC 7541 §2.3.3)"
        )

    def _name(self, index: int) -> bytes:
        """The name at ``index`` (§6.2: a literal field's indexed name)."""
        if index < _STATIC_LEN:
            return _STATIC[index][0]
        try:
            return self._table[index - _STATIC_LEN][0]
        except IndexError:
            raise HpackError(self._bad_index(index)) from None

    def _literal(self, data: bytes, pos: int, mask: int) -> tuple[tuple[bytes, bytes], int]:
        """A literal header field (§6.2): index of the name in an N-bit prefix (0: the name is a
        string literal next), then the value's string literal."""
        index = data[pos] & mask
        if index == mask:
            index, pos = _integer_tail(data, pos + 1, mask)
        else:
            pos += 1
        if index == 0:
            name, pos = _string(data, pos)
        else:
            name = self._name(index)
        value, pos = _string(data, pos)
        return (name, value), pos

    def _literal_not_indexed(self, data: bytes, pos: int) -> tuple[tuple[bytes, bytes], int]:
        """A literal field without indexing or never indexed (§6.2.2, §6.2.3), memoized by its raw
        octets when its name is a literal or in the static table (its meaning then depends on
        nothing else)."""
        start = pos
        index = data[pos] & 0x0F
        if index == 0x0F:
            index, pos = _integer_tail(data, pos + 1, 0x0F)
        else:
            pos += 1
        if index >= _STATIC_LEN:
            value, pos = _string(data, pos)
            return (self._name(index), value), pos
        stop = _string_end(data, _string_end(data, pos) if index == 0 else pos)
        if stop - start > _CACHE_MAX_RAW:
            return self._literal(data, start, 0x0F)
        key = data[start:stop]
        field = _field_cache.get(key)
        if field is None:
            field = self._literal(data, start, 0x0F)[0]
            _remember(_field_cache, key, field)
        return field, stop

    def _insert(self, field: tuple[bytes, bytes]) -> None:
        """Add a field to the dynamic table, evicting the oldest entries to fit (§4.4)."""
        size = len(field[0]) + len(field[1]) + _ENTRY_OVERHEAD
        if size > self._max_size:  # §4.4: not an error, the table is emptied
            self._table.clear()
            self._size = 0
            return
        self._table.appendleft(field)
        self._size += size
        if self._size > self._max_size:
            self._evict()

    def _evict(self) -> None:
        """Drop the oldest entries until the table fits its maximum size (§4.3)."""
        table = self._table
        while self._size > self._max_size:
            name, value = table.pop()
            self._size -= len(name) + len(value) + _ENTRY_OVERHEAD

    def _size_update(self, data: bytes, pos: int) -> int:
        """A dynamic table size update (§6.3: 001 and a 5-bit prefix integer); returns the
        position after it."""
        size = data[pos] & 0x1F
        if size == 0x1F:
            size, pos = _integer_tail(data, pos + 1, 0x1F)
        else:
            pos += 1
        if size > self.max_allowed_table_size:
            raise HpackError(
                f"dynamic table size update to {size} above the {self.max_allowed_table_size} allowed"
                " (RFC 7541 §4.2)"
            )
        self._max_size = size
        self._evict()
        return pos
