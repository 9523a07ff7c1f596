"""rmqcli.grpcserver.hpack_decode: RFC 7541's examples, the hpack package's encoder as an independent
implementation, malformed blocks, and the header-list bound."""

from __future__ import annotations

import pytest
from hpack import Encoder, HeaderTuple, NeverIndexedHeaderTuple
from hpack.hpack import encode_integer
from hpack.huffman import HuffmanEncoder
from hpack.huffman_constants import REQUEST_CODES, REQUEST_CODES_LENGTH
from hpack.table import HeaderTable
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqcli.grpcserver import hpack_decode
from rmqcli.grpcserver.hpack_decode import HeaderListTooLarge, HpackDecoder, HpackError, huffman_decode

HUFFMAN = HuffmanEncoder(REQUEST_CODES, REQUEST_CODES_LENGTH)


def test_huffman_code_is_appendix_b() -> None:
    """The codes rebuilt from the embedded lengths are RFC 7541 Appendix B's (as in the hpack package)."""
    assert hpack_decode._HUFFMAN_LENGTHS == tuple(REQUEST_CODES_LENGTH)
    assert hpack_decode._huffman_codes() == list(REQUEST_CODES)


def test_static_table_is_appendix_a() -> None:
    assert hpack_decode._STATIC[1:] == HeaderTable.STATIC_TABLE


# RFC 7541 Appendix C.3 (without Huffman) and C.4 (with Huffman): three requests on one connection.
# Each step: the block, the header list, the dynamic table after it (newest first) and its size.
REQUESTS_HEADERS = [
    [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/"), (b":authority", b"www.example.com")],
    [
        (b":method", b"GET"),
        (b":scheme", b"http"),
        (b":path", b"/"),
        (b":authority", b"www.example.com"),
        (b"cache-control", b"no-cache"),
    ],
    [
        (b":method", b"GET"),
        (b":scheme", b"https"),
        (b":path", b"/index.html"),
        (b":authority", b"www.example.com"),
        (b"custom-key", b"custom-value"),
    ],
]
REQUESTS_TABLES = [
    ([(b":authority", b"www.example.com")], 57),
    ([(b"cache-control", b"no-cache"), (b":authority", b"www.example.com")], 110),
    (
        [
            (b"custom-key", b"custom-value"),
            (b"cache-control", b"no-cache"),
            (b":authority", b"www.example.com"),
        ],
        164,
    ),
]
C3_BLOCKS = [
    "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
    "8286 84be 5808 6e6f 2d63 6163 6865",
    "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
]
C4_BLOCKS = [
    "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
    "8286 84be 5886 a8eb 1064 9cbf",
    "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
]


@pytest.mark.parametrize("blocks", [C3_BLOCKS, C4_BLOCKS], ids=["C.3", "C.4"])
def test_rfc7541_request_examples(blocks: list[str]) -> None:
    decoder = HpackDecoder()
    for block, headers, (table, size) in zip(blocks, REQUESTS_HEADERS, REQUESTS_TABLES, strict=True):
        assert decoder.decode(bytes.fromhex(block)) == headers
        assert decoder.table == table
        assert decoder.table_size == size


@pytest.mark.parametrize(
    ("block", "headers", "table"),
    [
        # C.2.1 literal with indexing, C.2.2 without indexing, C.2.3 never indexed, C.2.4 indexed
        (
            "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
            [(b"custom-key", b"custom-header")],
            [(b"custom-key", b"custom-header")],
        ),
        ("040c 2f73 616d 706c 652f 7061 7468", [(b":path", b"/sample/path")], []),
        ("1008 7061 7373 776f 7264 0673 6563 7265 74", [(b"password", b"secret")], []),
        ("82", [(b":method", b"GET")], []),
    ],
    ids=["C.2.1", "C.2.2", "C.2.3", "C.2.4"],
)
def test_rfc7541_field_examples(block: str, headers: list, table: list) -> None:
    decoder = HpackDecoder()
    for _ in range(2):  # the second time from the caches
        assert decoder.decode(bytes.fromhex(block)) == headers
    assert decoder.table == table + table


def test_input_types_and_empty_block() -> None:
    block = bytes.fromhex(C4_BLOCKS[0])
    assert HpackDecoder().decode(memoryview(block)) == REQUESTS_HEADERS[0]
    assert HpackDecoder().decode(bytearray(block)) == REQUESTS_HEADERS[0]
    assert HpackDecoder().decode(b"") == []


def test_table_size_updates_and_eviction() -> None:
    decoder = HpackDecoder()
    decoder.decode(bytes.fromhex(C3_BLOCKS[0]) + bytes.fromhex(C3_BLOCKS[1])[3:])  # two entries, 110
    assert decoder.table_size == 110
    # §4.2: two updates at the start (the smallest, then the final); 60 keeps only the newest
    assert decoder.decode(b"\x3f\x1d\x20\x82") == [(b":method", b"GET")]  # 31 + 29 = 60, then 0
    assert (decoder.table, decoder.table_size, decoder.table_max_size) == ([], 0, 0)
    decoder.decode(b"\x3f\x1d")  # back to 60: an entry of 57 fits
    decoder.decode(bytes.fromhex(C3_BLOCKS[0]))
    assert decoder.table == [(b":authority", b"www.example.com")]
    decoder.decode(bytes.fromhex(C3_BLOCKS[1]))  # 53 more: the older entry goes (§4.4)
    assert decoder.table == [(b"cache-control", b"no-cache")]
    # an entry larger than the table empties it, and is no error (§4.4)
    assert decoder.decode(b"\x40\x01a\x40" + b"b" * 64) == [(b"a", b"b" * 64)]
    assert (decoder.table, decoder.table_size) == ([], 0)
    decoder.max_allowed_table_size = 4096
    decoder.decode(b"\x3f\xe1\x1f")  # 4096
    assert decoder.table_max_size == 4096


def _literal_not_indexed(name: bytes, value: bytes, huffman: bool, never: bool, name_index: int) -> bytes:
    """A literal field without indexing (or never indexed), RFC 7541 §6.2.2/§6.2.3, encoded by hand
    (the hpack package's encoder never emits the former)."""

    def string(octets: bytes) -> bytes:
        if huffman:
            octets = HUFFMAN.encode(octets)
        length = encode_integer(len(octets), 7)
        if huffman:
            length[0] |= 0x80
        return bytes(length) + octets

    head = encode_integer(name_index, 4)
    if never:
        head[0] |= 0x10
    return bytes(head) + (string(name) if name_index == 0 else b"") + string(value)


COMMON = [
    (b":method", b"POST"),
    (b":path", b"/apache.rocketmq.v2.MessagingService/SendMessage"),
    (b":authority", b"localhost:8081"),
    (b"content-type", b"application/grpc"),
    (b"te", b"trailers"),
    (b"grpc-timeout", b"2999m"),
    (b"user-agent", b"grpc-python/1.85.1 grpc-c/47.0.0 (linux; chttp2)"),
    (b"x-mq-language", b"PYTHON"),
    (b"x-mq-client-id", b"host@4711@0@1a2b3c"),
    (b"cache-control", b"no-cache"),
]
names = st.one_of(
    st.sampled_from([n for n, _ in COMMON + list(HeaderTable.STATIC_TABLE)]), st.binary(max_size=24)
)
values = st.one_of(st.sampled_from([v for _, v in COMMON]), st.binary(max_size=48))
fields = st.tuples(
    st.one_of(st.sampled_from(COMMON + list(HeaderTable.STATIC_TABLE)), st.tuples(names, values)),
    st.sampled_from(["indexed", "never", "plain", "plain-never"]),  # who encodes it, and how
    st.booleans(),  # Huffman
)


@settings(deadline=None, max_examples=300)
@given(
    table_size=st.sampled_from([4096, 256, 0]),
    blocks=st.lists(st.lists(fields, max_size=12), min_size=1, max_size=6),
)
def test_decodes_what_hpack_encodes(table_size: int, blocks: list) -> None:
    """Blocks from the hpack package's encoder (incremental indexing, never indexed, Huffman or not),
    with fields without indexing spliced in (they leave the table alone), through one pair."""
    encoder = Encoder()
    encoder.header_table_size = table_size  # its next block starts with a size update
    decoder = HpackDecoder(max_table_size=table_size, max_header_list_size=1 << 20)
    for block_fields in blocks:
        block = [encoder.encode([], huffman=False)]  # the size update, if any, comes first
        for (name, value), how, huffman in block_fields:
            if how == "indexed":
                block.append(encoder.encode([HeaderTuple(name, value)], huffman=huffman))
            elif how == "never":
                block.append(encoder.encode([NeverIndexedHeaderTuple(name, value)], huffman=huffman))
            else:
                static = [i for i, (n, _) in enumerate(hpack_decode._STATIC) if n == name and i]
                index = static[0] if static and len(value) % 2 else 0  # a static name, or a literal one
                block.append(_literal_not_indexed(name, value, huffman, how == "plain-never", index))
        assert decoder.decode(b"".join(block)) == [field for field, _, _ in block_fields]
        assert decoder.table == list(encoder.header_table.dynamic_entries)
        assert decoder.table_size == sum(len(n) + len(v) + 32 for n, v in decoder.table)
        assert decoder.table_max_size == table_size


@settings(deadline=None, max_examples=300)
@given(st.binary(max_size=64))
def test_huffman_round_trip(octets: bytes) -> None:
    assert huffman_decode(HUFFMAN.encode(octets)) == octets


@settings(deadline=None, max_examples=300)
@given(st.lists(st.binary(max_size=24), max_size=4))
def test_garbage_raises_only_hpack_errors(blocks: list[bytes]) -> None:
    decoder = HpackDecoder()
    for block in blocks:
        try:
            decoder.decode(block)
        except HpackError:
            return


@pytest.mark.parametrize(
    ("block", "message"),
    [
        (b"\x80", "index 0"),
        (b"\xbe", "index 62 past"),  # the dynamic table is empty
        (b"\xff\x80\x80\x04", "index 65663 past"),
        (b"\x7e\x01a", "index 62 past"),  # a literal's name index
        (b"\x0f\x30\x01a", "index 63 past"),
        (b"\xff", "inside an integer"),
        (b"\x82\xff\x81", "inside an integer"),
        (b"\x40\x05ab", "runs past"),
        (b"\x40\x01a\x7f\x90\x01", "runs past"),
        (b"\x40", "before a string"),
        (b"\x00\x03abc", "before a string"),
        (b"\xff\xff\xff\xff\xff\x0f", "above 2**32"),
        (b"\x3f\xff\xff\xff\xff\x0f", "above 2**32"),
        (b"\xff" + b"\x80" * 11 + b"\x01", "longer than 10"),
        (b"\x00\x01a\x84\xff\xff\xff\xff", "EOS"),  # EOS (30 ones) and two bits of padding
        (b"\x00\x01a\x81\x18", "not EOS's prefix"),  # 'a' (00011) padded with zeros
        (b"\x00\x01a\x82\x1f\xff", "more than 7 bits"),  # 'a' and eleven ones
        (b"\x00\x01a\x81\xfe", "not EOS's prefix"),  # a code of ones then a zero, cut short
        (b"\x3f\xe2\x1f", "above the 4096 allowed"),  # 4097
        (b"\x82\x20", "after a header field"),
        (b"\x82\x3f\xe1\x1f", "after a header field"),
    ],
)
def test_malformed_blocks(block: bytes, message: str) -> None:
    with pytest.raises(HpackError, match=message.replace("*", r"\*")) as caught:
        HpackDecoder().decode(block)
    assert type(caught.value) is HpackError
    assert "\n" not in str(caught.value)


def test_allowed_table_size_can_shrink() -> None:
    decoder = HpackDecoder()
    decoder.max_allowed_table_size = 100
    with pytest.raises(HpackError, match="above the 100 allowed"):
        decoder.decode(b"\x3f\x46")  # 101
    decoder = HpackDecoder()
    decoder.max_allowed_table_size = 100
    assert decoder.decode(b"\x3f\x45\x82") == [(b":method", b"GET")]  # 100


def test_header_list_too_large_keeps_the_table() -> None:
    encoder = Encoder()
    decoder = HpackDecoder(max_header_list_size=200)
    big = [(b":method", b"POST"), (b"x-big", b"v" * 100), (b"x-other", b"w" * 60), (b"x-last", b"z")]
    with pytest.raises(HeaderListTooLarge) as caught:
        decoder.decode(encoder.encode(big))
    assert caught.value.size == sum(len(n) + len(v) + 32 for n, v in big)
    assert caught.value.limit == 200
    assert isinstance(caught.value, HpackError)
    assert decoder.table == list(encoder.header_table.dynamic_entries)  # every insertion made
    # the next block refers to those entries by index
    small = [(b":method", b"POST"), (b"x-other", b"w" * 60), (b"x-last", b"z")]
    block = encoder.encode(small)
    assert block == bytes([0x83, 0xBF, 0xBE])
    assert decoder.decode(block) == small
    # exactly at the bound is allowed (the bound is passed only above it)
    decoder.max_header_list_size = sum(len(n) + len(v) + 32 for n, v in small)
    assert decoder.decode(block) == small


def test_caches_are_bounded() -> None:
    decoder = HpackDecoder()
    for i in range(hpack_decode._CACHE_ENTRIES + 50):
        value = b"value-%d" % i
        assert decoder.decode(_literal_not_indexed(b"x-n", value, True, False, 0)) == [(b"x-n", value)]
    assert len(hpack_decode._field_cache) <= hpack_decode._CACHE_ENTRIES
    assert len(hpack_decode._huffman_cache) <= hpack_decode._CACHE_ENTRIES
    # a field under a dynamic name is not memoized: the same octets mean another name later
    decoder.decode(b"\x40\x03x-a\x01a\x40\x03x-b\x01b")  # x-b is 62, x-a 63
    block = b"\x0f\x2f\x01v"  # without indexing, name 62
    assert decoder.decode(block) == [(b"x-b", b"v")]
    decoder.decode(b"\x40\x03x-c\x01c")
    assert decoder.decode(block) == [(b"x-c", b"v")]
