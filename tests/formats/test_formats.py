"""Round trips, golden bytes and properties of the schemas in ``formats/``."""

from __future__ import annotations

import zlib

import construct as cs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats import checkpoint, commitlog, consumequeue, fastjson, indexfile
from formats.derive import compile_struct, field_offsets
from formats.javahash import java_string_hash, string_hash
from rmqcli.store.read.commitlog import RecordError, decode_record
from tests.support.records import GOLDEN_RECORD, golden_fields


def test_golden_record_builds_and_parses():
    assert commitlog.MessageRecord.build(golden_fields()) == GOLDEN_RECORD
    parsed = commitlog.MessageRecord.parse(GOLDEN_RECORD)
    assert parsed.total_size == len(GOLDEN_RECORD) == 100
    assert parsed.topic == "T" and parsed.body == b"hi"
    rec = decode_record(GOLDEN_RECORD, 0, len(GOLDEN_RECORD))
    assert (rec.topic, rec.store_port, rec.properties) == ("T", 10911, {"TAGS": "a"})


def test_compiled_forms_follow_the_declaration():
    assert commitlog.PREFIX_STRUCT.size == commitlog.RecordPrefix.sizeof() == 48
    for flags, struct in commitlog.HEADER_STRUCTS.items():
        schema = commitlog.header_schema(bool(flags & 0x10), bool(flags & 0x20))
        assert struct.size == schema.sizeof()
    assert consumequeue.CQ_UNIT_SIZE == consumequeue.CqUnit.sizeof() == 20
    assert indexfile.HEADER_SIZE == 40 and indexfile.ENTRY_SIZE == 20
    assert field_offsets(commitlog.RecordPrefix)["sys_flag"] == 36
    assert field_offsets(commitlog.RecordPrefix)["physical_offset"] == 28


def test_compile_struct_rejects_variable_fields():
    with pytest.raises(TypeError):
        compile_struct(cs.Struct("x" / cs.GreedyBytes))


def test_test_vectors_from_formats_md():
    assert commitlog.body_crc(b"hi") == 0x58932AAC
    assert commitlog.body_crc(b"Hello RocketMQ") == 0x69C865ED
    assert commitlog.tags_code("TagA") == 2598919
    assert commitlog.tags_code("*") == 42
    assert commitlog.tags_code("a||b") == 3012833
    assert commitlog.tags_code(None) == commitlog.tags_code("") == 0
    assert java_string_hash("TopicTest#KEY1") == -1656969516
    assert indexfile.key_hash("TopicTest#KEY1") == 1656969516
    assert indexfile.slot_of(1656969516, indexfile.DEFAULT_HASH_SLOT_NUM) == 1969516
    assert (
        commitlog.offset_msg_id(bytes([192, 168, 0, 1]), 10911, 0x1234) == "C0A8000100002A9F0000000000001234"
    )
    assert indexfile.file_size() == 420_000_040


def test_offset_msg_id_round_trip_v6():
    address = bytes(range(16))
    msg_id = commitlog.offset_msg_id(address, 10911, 123456789)
    assert len(msg_id) == 56
    assert commitlog.decode_offset_msg_id(msg_id) == (address, 10911, 123456789)


def test_index_key_hash_min_value_is_zero():
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert indexfile.key_hash("polygenelubricants") == 0


@given(st.text(max_size=40))
def test_fast_hash_equals_utf16_hash(text):
    assert string_hash(text) == java_string_hash(text)
    assert -(2**31) <= string_hash(text) < 2**31


def test_properties_codec_tolerates_trailing_separator_and_drops_empties():
    raw = "KEYS\x01k1 k2\x02TAGS\x01TagA\x02\x01x\x02y\x01\x02"
    assert commitlog.decode_properties(raw) == {"KEYS": "k1 k2", "TAGS": "TagA"}
    assert commitlog.decode_properties(raw.encode()) == commitlog.decode_properties(raw + "\x02")
    assert commitlog.decode_properties("A\x011\x02A\x012") == {"A": "2"}  # last wins
    assert commitlog.encode_properties({"A": "1", "B": "2"}) == b"A\x011\x02B\x012"
    assert commitlog.encode_properties({"A": "1"}, trailing_separator=True) == b"A\x011\x02"


def test_hashmap_order_matches_a_broker_record():
    # basic-1's first record, as written by a 4.9.8 broker
    keys = ["TAGS", "KEYS", "UNIQ_KEY", "CLUSTER"]  # client order, then the broker adds CLUSTER
    assert commitlog.hashmap_order(keys) == ["KEYS", "UNIQ_KEY", "CLUSTER", "TAGS"]


_NAMES = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=12)


@settings(max_examples=200)
@given(st.lists(_NAMES, min_size=1, max_size=40, unique=True).filter(lambda names: "WAIT" not in names))
def test_a_stored_send_keeps_the_table_its_map_grew_to(names: list[str]) -> None:
    """Removing ``WAIT`` from a ``HashMap`` moves no other entry: the stored order is the full
    map's order without it, whatever table size the removal leaves behind."""
    from rmqcli.store.write.messages import broker_properties, stored_properties

    client = {name: "v" for name in names[:-1]}
    client["WAIT"] = "true"
    full = {**client, "CLUSTER": "C"}
    expected = [k for k in commitlog.hashmap_order(full) if k != "WAIT"]
    stored, text = stored_properties(client, "C")
    assert list(commitlog.decode_properties(text)) == expected
    assert list(stored) == [k for k in full if k != "WAIT"]
    assert broker_properties(client, "C") == ({**stored, "WAIT": "true"}, text)
    assert commitlog.hashmap_order(list(stored), grown_to=len(full)) == expected


def test_dispatch_tags_code_for_delay_records():
    props = {"DELAY": "3", "TAGS": "x"}
    assert commitlog.dispatch_tags_code("SCHEDULE_TOPIC_XXXX", props, 1000) == 1000 + 10_000
    assert commitlog.dispatch_tags_code("SCHEDULE_TOPIC_XXXX", {"DELAY": "99"}, 0) == 2 * 3_600_000
    assert commitlog.dispatch_tags_code("TopicA", props, 1000) == commitlog.tags_code("x")


def test_sysflag_helpers():
    assert commitlog.compression_type(0x301) == commitlog.CompressionType.ZLIB
    assert commitlog.transaction_type(8) == commitlog.TransactionType.COMMIT
    assert not commitlog.is_dispatched_to_queue(0x4) and not commitlog.is_dispatched_to_queue(0xC)
    assert commitlog.is_indexed(0x4) and not commitlog.is_indexed(0xC)


# --- hypothesis: records ---------------------------------------------------------------------
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
prop_text = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1)


@st.composite
def records(draw):
    sys_flag = draw(i32)
    born_v6 = bool(sys_flag & commitlog.BORNHOST_V6_FLAG)
    store_v6 = bool(sys_flag & commitlog.STOREHOST_V6_FLAG)
    magic = draw(st.sampled_from(commitlog.MESSAGE_MAGICS))
    max_topic = 127 if magic == commitlog.MAGIC_V1 else 400
    topic = draw(
        st.text(st.characters(blacklist_categories=("Cs",)), max_size=20).filter(
            lambda t: len(t.encode()) <= max_topic
        )
    )
    props = draw(st.dictionaries(prop_text, prop_text, max_size=4))
    return dict(
        magic_code=magic,
        body_crc=draw(i32),
        queue_id=draw(i32),
        flag=draw(i32),
        queue_offset=draw(i64),
        physical_offset=draw(i64),
        sys_flag=sys_flag,
        born_timestamp=draw(i64),
        born_host=dict(
            address=draw(st.binary(min_size=16 if born_v6 else 4, max_size=16 if born_v6 else 4)),
            port=draw(i32),
        ),
        store_timestamp=draw(i64),
        store_host=dict(
            address=draw(st.binary(min_size=16 if store_v6 else 4, max_size=16 if store_v6 else 4)),
            port=draw(i32),
        ),
        reconsume_times=draw(i32),
        prepared_transaction_offset=draw(i64),
        body=draw(st.binary(max_size=300)),
        topic=topic,
        properties=commitlog.encode_properties(props),
    )


def _strip(container):
    return {
        k: (_strip(v) if isinstance(v, dict) else v)
        for k, v in container.items()
        if not k.startswith("_") and k != "padding"
    }


@settings(max_examples=200)
@given(records())
def test_record_round_trip(fields):
    data = commitlog.MessageRecord.build(fields)
    parsed = commitlog.MessageRecord.parse(data)
    assert parsed.total_size == len(data)
    rebuilt = commitlog.MessageRecord.build(parsed)
    assert rebuilt == data
    for key, value in fields.items():
        got = parsed[key]
        assert (dict(address=got.address, port=got.port) if isinstance(value, dict) else got) == value
    rec = decode_record(data, 0, len(data))
    assert (rec.topic, rec.body_length, rec.properties_raw) == (
        fields["topic"],
        len(fields["body"]),
        fields["properties"],
    )
    assert rec.stored_body == fields["body"]


@given(st.binary(min_size=0, max_size=400))
def test_random_bytes_only_raise_record_error(data):
    try:
        decode_record(data, 0, len(data))
    except RecordError:
        pass


# fixed-size layouts: (schema, field strategies in layout order, struct of the same bytes or None,
# size, where zero padding starts or None); formats.md §2 (consume queue unit), §3 (index header and
# entry), §4 (checkpoint page)
FIXED_LAYOUTS = {
    "cq-unit": (
        consumequeue.CqUnit,
        dict(commitlog_offset=i64, size=i32, tags_code=i64),
        consumequeue.CQ_UNIT_STRUCT,
        consumequeue.CQ_UNIT_SIZE,
        None,
    ),
    "index-header": (
        indexfile.IndexHeader,
        dict(
            begin_timestamp=i64,
            end_timestamp=i64,
            begin_phy_offset=i64,
            end_phy_offset=i64,
            hash_slot_count=i32,
            index_count=i32,
        ),
        indexfile.HEADER_STRUCT,
        indexfile.HEADER_SIZE,
        None,
    ),
    "index-entry": (
        indexfile.IndexEntry,
        dict(key_hash=i32, phy_offset=i64, time_diff=i32, prev_index=i32),
        indexfile.ENTRY_STRUCT,
        indexfile.ENTRY_SIZE,
        None,
    ),
    "checkpoint": (
        checkpoint.CheckpointPage,
        dict(
            physic_msg_timestamp=i64,
            logics_msg_timestamp=i64,
            index_msg_timestamp=i64,
            master_flushed_offset=i64,
            confirm_phy_offset=i64,
        ),
        None,
        checkpoint.PAGE_SIZE,
        40,
    ),
}


@pytest.mark.parametrize(
    ("schema", "fields", "packed", "size", "zeros_from"), FIXED_LAYOUTS.values(), ids=FIXED_LAYOUTS
)
@given(data=st.data())
def test_fixed_layout_round_trip(schema, fields, packed, size, zeros_from, data):
    values = data.draw(st.fixed_dictionaries(fields))
    built = schema.build(values)
    assert len(built) == size
    if packed is not None:
        assert packed.unpack(built) == tuple(values[name] for name in fields)
    if zeros_from is not None:
        assert built[zeros_from:] == bytes(size - zeros_from)
    assert _strip(schema.parse(built)) == values


@given(i64, i64, st.binary(max_size=64))
def test_cq_ext_unit_round_trip(tags, store_time, bitmap):
    unit = dict(tags_code=tags, msg_store_time=store_time, filter_bitmap=bitmap)
    parsed = consumequeue.CqExtUnit.parse(consumequeue.CqExtUnit.build(unit))
    assert parsed.size == consumequeue.CQ_EXT_UNIT_FIXED + len(bitmap)
    assert (parsed.tags_code, parsed.msg_store_time, parsed.filter_bitmap) == (tags, store_time, bitmap)


def test_ext_address_arithmetic():
    addr = consumequeue.ext_offset_to_address(1234)
    assert consumequeue.is_ext_address(addr)
    assert consumequeue.ext_address_to_offset(addr) == 1234
    assert not consumequeue.is_ext_address(-(2**31))


def test_index_positions():
    assert indexfile.slot_position(0) == 40
    assert indexfile.entry_position(1, 500) == 40 + 500 * 4 + 20
    assert indexfile.geometry_from_size(42040) == (500, 2000)
    assert indexfile.geometry_from_size(indexfile.file_size()) == (5_000_000, 20_000_000)
    assert indexfile.time_diff_seconds(5999, 1000) == 4
    assert indexfile.time_diff_seconds(0, 1000) == 0
    assert indexfile.time_diff_seconds(5000, 0) == 0


def test_checkpoint_derived_values():
    assert checkpoint.min_timestamp(10_000, 20_000) == 7_000
    assert checkpoint.min_timestamp(0, 20_000) == 0
    assert checkpoint.min_timestamp_index(10_000, 20_000, 5_000) == 5_000


def test_blank_record():
    data = commitlog.BlankRecord.build(dict(total_size=1247))
    assert data == (1247).to_bytes(4, "big") + bytes.fromhex("cbd43194")
    with pytest.raises(cs.ConstructError):
        commitlog.BlankRecord.parse(bytes(8))


def test_compressed_body_flag_and_zlib_stream():
    body = zlib.compress(b"x" * 5000, 5)
    assert body[:1] == b"\x78"  # a zlib stream (RFC 1950), as java.util.zip.Deflater writes
    assert commitlog.compression_type(commitlog.COMPRESSED_FLAG) == commitlog.CompressionType.ZLIB_LEGACY


# --- fastjson ---------------------------------------------------------------------------------
def test_fastjson_bare_and_object_keys():
    assert fastjson.loads('{"offsetTable":{"T@G":{0:5,1:7}}}') == {"offsetTable": {"T@G": {0: 5, 1: 7}}}
    parsed = fastjson.loads('{{"brokerName":"b","queueId":1,"topic":"t"}:42}')
    ((key, value),) = parsed.items()
    assert key.as_dict() == {"brokerName": "b", "queueId": 1, "topic": "t"} and value == 42
    assert fastjson.dumps(parsed) == '{{"brokerName":"b","queueId":1,"topic":"t"}:42}'


def test_fastjson_pretty_form():
    data = {"offsetTable": {"T@G": {0: 20}}, "empty": {}}
    assert (
        fastjson.dumps(data, pretty=True)
        == '{\n\t"offsetTable":{\n\t\t"T@G":{0:20\n\t\t}\n\t},\n\t"empty":{}\n}'
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(max_size=5), children, max_size=3)
        | st.dictionaries(st.integers(0, 100), children, max_size=3)
    ),
    max_leaves=15,
)


@given(json_values, st.booleans())
def test_fastjson_round_trip(value, pretty):
    assert fastjson.loads(fastjson.dumps(value, pretty=pretty)) == value


string_keyed_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=20,
)


@settings(max_examples=300)
@given(st.one_of(string_keyed_values, json_values), st.booleans())
def test_fastjson_dumps_is_the_reference_writer_byte_for_byte(value, pretty):
    """``dumps`` hands string-keyed values to ``json``'s encoder: the text must be the one the
    level-by-level writer makes, in both forms (and with integer keys the writer's own)."""
    assert fastjson.dumps(value, pretty=pretty) == fastjson.tree_dumps(value, pretty=pretty)


def test_fastjson_dumps_of_the_real_brokers_config_files():
    from tests.support import REAL_ROOT

    files = sorted(REAL_ROOT.glob("*/*/config/*.json"))
    assert files, f"no config/*.json under {REAL_ROOT}"
    for path in files:
        value = fastjson.loads(path.read_text())
        for pretty in (False, True):
            assert fastjson.dumps(value, pretty=pretty) == fastjson.tree_dumps(value, pretty=pretty), path


@given(st.text(max_size=60))
def test_fastjson_garbage_raises_value_error_only(text):
    try:
        fastjson.loads(text)
    except ValueError:
        pass
