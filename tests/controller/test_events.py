"""Controller event entry bodies (controller.md §3.2-§3.3): the i16 type prefix and fastjson JSON,
byte for byte as 5.1.1's ``EventSerializer`` writes them, and the refusal of bodies it cannot use."""

from __future__ import annotations

import pytest

from rmqcli.controller import events as ev
from rmqcli.errors import CorruptDataError

# (event, entry body) pairs; the bodies are the ones 5.1.1's EventSerializer produces for these events
KNOWN = [
    (
        ev.ElectMasterEvent("broker-a", True, 2),
        b'\x00\x03{"brokerName":"broker-a","eventType":"ELECT_MASTER_EVENT","newMasterBrokerId":2,'
        b'"newMasterElected":true}',
    ),
    (
        ev.ElectMasterEvent("broker-a", False),
        b'\x00\x03{"brokerName":"broker-a","eventType":"ELECT_MASTER_EVENT","newMasterElected":false}',
    ),
    (
        ev.AlterSyncStateSetEvent("broker-a", frozenset({2, 1})),
        b'\x00\x01{"brokerName":"broker-a","eventType":"ALTER_SYNC_STATE_SET_EVENT","newSyncStateSet":[1,2]}',
    ),
    (
        ev.ApplyBrokerIdEvent(
            "DefaultCluster", "broker-a", "127.0.0.1:30911", 1, "127.0.0.1:30911;1700000000000"
        ),
        b'\x00\x02{"brokerAddress":"127.0.0.1:30911","brokerName":"broker-a","clusterName":"DefaultCluster",'
        b'"eventType":"APPLY_BROKER_ID_EVENT","newBrokerId":1,"registerCheckCode":"127.0.0.1:30911;1700000000000"}',
    ),
    (
        ev.CleanBrokerDataEvent("broker-a", frozenset({1, 2})),
        b'\x00\x05{"brokerIdSetToClean":[1,2],"brokerName":"broker-a","eventType":"CLEAN_BROKER_DATA_EVENT"}',
    ),
    (
        ev.CleanBrokerDataEvent("broker-a"),
        b'\x00\x05{"brokerName":"broker-a","eventType":"CLEAN_BROKER_DATA_EVENT"}',
    ),
    (
        ev.UpdateBrokerAddressEvent("DefaultCluster", "broker-a", "127.0.0.1:30912", 2),
        b'\x00\x06{"brokerAddress":"127.0.0.1:30912","brokerId":2,"brokerName":"broker-a",'
        b'"clusterName":"DefaultCluster","eventType":"UPDATE_BROKER_ADDRESS"}',
    ),
    (
        ev.UpdateBrokerAddressEvent(None, "broker-a", None, None),
        b'\x00\x06{"brokerName":"broker-a","eventType":"UPDATE_BROKER_ADDRESS"}',
    ),
    (
        ev.ApplyBrokerIdEvent(None, "b", None, -5, None),
        b'\x00\x02{"brokerName":"b","eventType":"APPLY_BROKER_ID_EVENT","newBrokerId":-5}',
    ),
]


@pytest.mark.parametrize(("event", "body"), KNOWN, ids=[type(e).__name__ for e, _ in KNOWN])
def test_known_layout_and_round_trip(event: ev.Event, body: bytes) -> None:
    assert ev.encode(event) == body
    assert ev.decode(body) == event


def test_type_ids_are_5_1_1s() -> None:
    assert {t.name: t.value for t in ev.EventType} == {
        "ALTER_SYNC_STATE_SET_EVENT": 1,
        "APPLY_BROKER_ID_EVENT": 2,
        "ELECT_MASTER_EVENT": 3,
        "READ_EVENT": 4,
        "CLEAN_BROKER_DATA_EVENT": 5,
        "UPDATE_BROKER_ADDRESS": 6,
    }


def test_browser_secure_escapes() -> None:
    name = "a<b>(c)\"d\\e/f\n\t\x01\x7fé\u2028€😀&'\b\f\r\x1f\x80\x9f\xa0\u2029"
    body = ev.encode(ev.ElectMasterEvent(name, True, 1))
    expected = (
        '{"brokerName":"a\\u003Cb\\u003E\\u0028c\\u0029\\"d\\\\e/f\\n\\t\\u0001\\u007Fé\\u2028€😀&\'\\b\\f\\r'
        '\\u001F\\u0080\\u009F\xa0\\u2029","eventType":"ELECT_MASTER_EVENT","newMasterBrokerId":1,'
        '"newMasterElected":true}'
    )
    assert body == b"\x00\x03" + expected.encode("utf-8")
    assert ev.decode(body).broker_name == name


def test_id_sets_in_java_hash_set_order() -> None:
    # long hashes: -1 -> bucket 0, Long.MAX_VALUE -> bucket 0, 2^32 -> bucket 1, 5 -> bucket 5
    event = ev.AlterSyncStateSetEvent("x", frozenset({5, 2**32, 2**63 - 1, -1}))
    assert ev.to_json(event).endswith(b'"newSyncStateSet":[-1,9223372036854775807,4294967296,5]}')


def test_alter_set_is_a_copied_set_clean_set_a_grown_one() -> None:
    ids = frozenset({*range(1, 12), 17})  # 12 ids: a copied HashSet has 32 buckets, a grown one 16
    alter = ev.to_json(ev.AlterSyncStateSetEvent("b", ids))
    assert alter.endswith(b'"newSyncStateSet":[1,2,3,4,5,6,7,8,9,10,11,17]}')
    clean = ev.to_json(ev.CleanBrokerDataEvent("b", ids))
    assert clean.startswith(b'{"brokerIdSetToClean":[1,17,2,3,4,5,6,7,8,9,10,11],')


def test_empty_entry_carries_no_event() -> None:
    assert ev.decode_entry(b"") is None
    with pytest.raises(CorruptDataError, match="shorter than its 2-byte event type"):
        ev.decode(b"")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"\x03", "body of 1 bytes"),
        (b"\x00\x00{}", "unknown event type 0"),
        (b"\xff\xff{}", "unknown event type -1"),
        (b"\x00\x07{}", "unknown event type 7"),
        (b'\x00\x04{"brokerName":"b"}', "ReadEvent"),
        (b"\x00\x03not json", "JSON does not parse"),
        (b"\x00\x03[]", "not a non-empty object"),
        (b"\x00\x03{}", "not a non-empty object"),
        (b"\x00\x03", "JSON does not parse"),
        (b'\x00\x05{"brokerIdSetToClean":[1]}', "no brokerName"),
        (b'\x00\x01{"brokerName":"b"}', "no newSyncStateSet"),
        (b'\x00\x01{"brokerName":"b","newSyncStateSet":[1,"x"]}', "is not a number"),
        (b'\x00\x03{"brokerName":"b","newMasterElected":true}', "without newMasterBrokerId"),
        (b'\x00\x03{"brokerName":"b","newMasterElected":"maybe"}', "is not a boolean"),
        (b'\x00\x02{"brokerName":"b","newBrokerId":9223372036854775808}', "is not a long"),
    ],
)
def test_bad_bodies_raise(body: bytes, message: str) -> None:
    with pytest.raises(CorruptDataError, match=message) as err:
        ev.decode(body, "dledger-n0/data/00000000000000000000", 4096)
    assert str(err.value).startswith(
        "dledger-n0/data/00000000000000000000 at byte 4096: controller event entry:"
    )


def test_reading_is_lenient_like_fastjson() -> None:
    # strings for numbers and booleans, missing properties as Java defaults, eventType ignored
    assert ev.decode(b'\x00\x03{"brokerName":"b","newMasterElected":"true","newMasterBrokerId":"4"}') == (
        ev.ElectMasterEvent("b", True, 4)
    )
    assert ev.decode(b'\x00\x02{"brokerName":"b","eventType":"NOPE"}') == ev.ApplyBrokerIdEvent(
        None, "b", None, 0, None
    )
    assert ev.decode(b'\x00\x03{"brokerName":"b"}') == ev.ElectMasterEvent("b", False, None)
    assert ev.decode(b'\x00\x01{"brokerName":"b","newSyncStateSet":[3,1,3]}') == ev.AlterSyncStateSetEvent(
        "b", frozenset({1, 3})
    )
