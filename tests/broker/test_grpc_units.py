"""The parts of ``rmqcli.broker.grpc`` on real bytes: stubs generated from the vendored protos,
messages parsed from their wire encoding into the properties the 5.1 proxy stores, status codes,
call metadata, and the FIFO queue choice (Guava's ``consistentHash`` values computed with the real
guava.jar of the 4.9.8 kit)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmqcli.broker.grpc import context as cc
from rmqcli.broker.grpc import convert
from rmqcli.broker.grpc import status as st
from rmqcli.broker.grpc.producer import consistent_hash, java_string_hash
from rmqcli.broker.grpc.settings import SettingsStore
from rmqcli.broker.grpc.stubs import load, stub_dir
from tests.support import ROOT

S = load()
D = S.definition

CTX = cc.CallContext("host@1@0@abc", "PYTHON", "5.1.2", "GRPC_V2", "", "r1", "127.0.0.1", 40123)


def wire_message(**system: object) -> object:
    """A Message as a client puts it on the wire, parsed back from those bytes."""
    m = D.Message()
    m.topic.name = "TopicG"
    m.body = b"hello"
    m.user_properties["color"] = "red"
    sp = m.system_properties
    sp.tag = "TagA"
    sp.keys.extend(["k1", "k2"])
    sp.message_id = "0102FC000000011DA50B19D09C00000000"
    sp.message_type = D.NORMAL
    sp.body_encoding = D.IDENTITY
    sp.born_timestamp.FromMilliseconds(1795700380000)
    sp.born_host = "192.0.2.2"
    for name, value in system.items():
        if name == "delivery_ms":
            sp.delivery_timestamp.FromMilliseconds(int(value))  # type: ignore[arg-type]
        else:
            setattr(sp, name, value)
    return D.Message.FromString(m.SerializeToString())


def test_status_codes_are_the_protos() -> None:
    for value, name in st.CODE_NAMES.items():
        assert D.Code.Value(name) == value, name
    status = D.Status.FromString(st.make(D, st.TOPIC_NOT_FOUND, "topic[x] not exist").SerializeToString())
    assert (status.code, status.message) == (40402, "topic[x] not exist")
    assert st.make(D, st.OK).message == "OK"
    assert st.from_remoting(0) == st.OK and st.from_remoting(3) == st.NOT_IMPLEMENTED
    assert (
        st.from_remoting(26) == st.CONSUMER_GROUP_NOT_FOUND
        and st.from_remoting(17) == st.INTERNAL_SERVER_ERROR
    )
    assert st.of_exception(D, ValueError("bad\nsecond line"), "x").message == "ValueError: bad"


def test_metadata_and_peer() -> None:
    meta = [("x-mq-client-id", "h@9@0@x"), ("x-mq-language", "PYTHON"), ("other-bin", b"\x00"),
            ("x-mq-client-version", "5.1.2"), ("x-mq-namespace", "n" * 5000)]  # fmt: skip
    ctx = cc.from_call(meta, "ipv6:[::1]:5555")
    assert (ctx.client_id, ctx.language, ctx.client_version) == ("h@9@0@x", "PYTHON", "5.1.2")
    assert len(ctx.namespace) == cc.MAX_VALUE_LENGTH
    assert ctx.remote_address == "[::1]:5555"
    assert cc.parse_peer("ipv4:127.0.0.1:40123") == ("127.0.0.1", 40123)
    assert cc.parse_peer("unix:/tmp/x") == ("", 0) and cc.parse_peer("ipv4:1.2.3.4:99999") == ("1.2.3.4", 0)
    with pytest.raises(st.GrpcStatusError) as caught:
        cc.from_call([], "ipv4:127.0.0.1:1").require_client_id()
    assert caught.value.code == st.CLIENT_ID_REQUIRED


def test_properties_as_the_proxy_builds_them() -> None:
    out = convert.outgoing(wire_message(), CTX)
    assert out.topic == "TopicG" and out.body == b"hello" and out.sys_flag == 0
    assert out.born_timestamp == 1795700380000
    assert out.properties == {
        "color": "red",
        "TAGS": "TagA",
        "KEYS": "k1 k2",
        "UNIQ_KEY": "0102FC000000011DA50B19D09C00000000",
        "RECONSUME_TIME": "0",
        "PGROUP": "TopicG",
        "__BORNHOST": "192.0.2.2",
        "BORN_TIMESTAMP": "1795700380000",
    }
    fifo = convert.outgoing(wire_message(message_group="order-1", born_host=""), CTX).properties
    assert fifo["__SHARDINGKEY"] == "order-1" and fifo["__BORNHOST"] == "127.0.0.1:40123"
    assert convert.message_type_of(fifo) == convert.FIFO
    tx = convert.outgoing(wire_message(message_type=D.TRANSACTION, body_encoding=D.GZIP), CTX)
    assert tx.properties["TRAN_MSG"] == "true" and tx.sys_flag == 0x1 | 0x4
    assert convert.message_type_of(tx.properties) == convert.TRANSACTION
    delayed = convert.outgoing(wire_message(delivery_ms=1795700390000), CTX, now_ms=1795700380000)
    assert delayed.properties["TIMER_DELIVER_MS"] == "1795700390000"
    assert convert.message_type_of(delayed.properties) == convert.DELAY_TYPE


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"tag": "a|b"}, st.ILLEGAL_MESSAGE_TAG),
        ({"tag": " "}, st.ILLEGAL_MESSAGE_TAG),
        ({"message_id": ""}, st.ILLEGAL_MESSAGE_ID),
        ({"message_group": "g" * 64}, st.ILLEGAL_MESSAGE_GROUP),
        ({"delivery_ms": 1795700380000 + 2 * 86400_000}, st.ILLEGAL_DELIVERY_TIME),
    ],
)
def test_refused_messages(change: dict, code: int) -> None:
    with pytest.raises(st.GrpcStatusError) as caught:
        convert.outgoing(wire_message(**change), CTX, now_ms=1795700380000)
    assert caught.value.code == code


def test_system_property_keys_and_sizes_are_refused() -> None:
    m = wire_message()
    m.user_properties["UNIQ_KEY"] = "mine"  # type: ignore[attr-defined]
    with pytest.raises(st.GrpcStatusError) as caught:
        convert.outgoing(m, CTX)
    assert (caught.value.code, caught.value.message) == (
        st.ILLEGAL_MESSAGE_PROPERTY_KEY,
        "property is used by system: UNIQ_KEY",
    )
    m = wire_message()
    m.user_properties["big"] = "v" * 20000  # type: ignore[attr-defined]
    with pytest.raises(st.GrpcStatusError) as caught:
        convert.outgoing(m, CTX)
    assert caught.value.code == st.MESSAGE_PROPERTIES_TOO_LARGE
    m = wire_message()
    m.body = b"x" * (4 * 1024 * 1024 + 1)  # type: ignore[attr-defined]
    with pytest.raises(st.GrpcStatusError) as caught:
        convert.outgoing(m, CTX)
    assert caught.value.code == st.MESSAGE_BODY_TOO_LARGE


def test_topic_type_check_when_the_topic_names_one() -> None:
    props = {"UNIQ_KEY": "x", "__SHARDINGKEY": "g"}
    convert.check_type("T", {"perm": 6}, props)  # a 4.x topic: no attribute, no check
    convert.check_type("T", {"attributes": {"message.type": "FIFO"}}, props)
    with pytest.raises(st.GrpcStatusError) as caught:
        convert.check_type("T", {"attributes": {"message.type": "NORMAL"}}, props)
    assert caught.value.code == st.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert (
        caught.value.message == "TopicMessageType validate failed, topic type is NORMAL, message type is FIFO"
    )
    convert.check_type("%RETRY%G", {"attributes": {"message.type": "NORMAL"}}, props)


def test_settings_answers() -> None:
    store = SettingsStore(D, {"GID": {"consumeMessageOrderly": True, "retryMaxTimes": 4}}.get)
    producer = D.Settings(client_type=D.PRODUCER)
    producer.publishing.topics.add(name="TopicG")
    store.update("p1", D.Settings.FromString(producer.SerializeToString()))
    merged = store.get("p1")
    assert merged.publishing.max_body_size == 4 * 1024 * 1024 and merged.publishing.validate_message_type
    assert merged.backoff_policy.max_attempts == 3
    assert merged.backoff_policy.exponential_backoff.initial.ToMilliseconds() == 10
    consumer = D.Settings(client_type=D.SIMPLE_CONSUMER)
    consumer.subscription.group.name = "GID"
    store.update("c1", consumer)
    merged = store.get("c1")
    assert merged.subscription.fifo and merged.subscription.receive_batch_size == 32
    assert merged.backoff_policy.max_attempts == 5
    assert len(merged.backoff_policy.customized_backoff.next) == 18
    assert store.remove("p1") is not None and store.get("p1") is None


# Hashing.consistentHash(String.hashCode(), n) of guava.jar (the 4.9.8 kit's lib/), by jshell
GUAVA = {
    "order-1": (-1207111310, [0, 3, 3, 3]),
    "group-A": (293427315, [0, 2, 2, 12]),
    "g": (103, [0, 1, 1, 12]),
    "\u00e9t\u00e9-42": (-1805227763, [0, 0, 6, 6]),
    "x" * 40: (847293440, [0, 0, 4, 14]),
}


@pytest.mark.parametrize("group", sorted(GUAVA))
def test_message_group_queue_is_guavas(group: str) -> None:
    code, buckets = GUAVA[group]
    assert java_string_hash(group) == code
    assert [consistent_hash(code, n) for n in (1, 4, 8, 16)] == buckets


def test_processes_starting_together_generate_the_stubs_once(tmp_path: Path) -> None:
    """Three first starts at once on an empty cache: each imports whole stubs, one directory stays
    (the others' copies are dropped), named after grpcio-tools' version and the protos' digest."""
    code = "from rmqcli.broker.grpc.stubs import load; print(load().service.__file__)"
    env = {**os.environ, "RMQ_GRPC_STUBS_DIR": str(tmp_path)}
    procs = [
        subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    [only] = list(tmp_path.iterdir())
    assert only.name == stub_dir(tmp_path).name and only.name.startswith("grpc-stubs-")
    assert set(outs) == {str(only / "apache/rocketmq/v2/service_pb2.py")}


def test_receipt_handles_decode_as_the_proxy_and_bad_ones_are_invalid() -> None:
    from rmqcli.broker.grpc import consumer as cons

    extra = cons.handle_of("3 1700000000000 30000 2 1 broker-a 0 5 123456")
    assert (extra.ck_queue_offset, extra.pop_time, extra.invisible_time, extra.revive_qid) == (
        3,
        1700000000000,
        30000,
        2,
    )
    assert extra.retry and extra.real_topic("T", "G") == "%RETRY%G_T"
    assert (extra.queue_id, extra.msg_queue_offset, extra.commit_log_offset) == (0, 5, 123456)
    for bad in ("", "1 2 3", "0 1 2 3 0 b 0", "x " * 9, "9" * 2000):  # under 8 fields, not numbers, too long
        with pytest.raises(st.GrpcStatusError) as caught:
            cons.handle_of(bad)
        assert caught.value.code == st.INVALID_RECEIPT_HANDLE


def test_offset_info_and_filter_tags_as_the_proxy_reads_them() -> None:
    from rmqcli.broker.grpc import consumer as cons

    assert cons._info_map("0 1 5;1 0 2;0 qo1%7 3") == {"0@1": ["5"], "1@0": ["2"], "0@qo1%7": ["3"]}
    assert cons._info_map("") == {} and cons._info_map("garbage") == {}
    tag = D.FilterExpression(type=D.TAG, expression=" A || B ")
    assert cons.tags_of(tag) == {"A", "B"}
    assert cons.tags_of(D.FilterExpression(type=D.TAG, expression="*")) is None
    assert cons.tags_of(D.FilterExpression(type=D.TAG, expression="")) is None
    assert cons.tags_of(D.FilterExpression(type=D.SQL, expression="a > 1")) is None


def test_a_subscription_entry_as_the_broker_keeps_it() -> None:
    from rmqcli.broker.grpc.client import subscription_data
    from rmqcli.broker.state import tag_codes

    entry = D.SubscriptionEntry(
        topic=D.Resource(name="T"), expression=D.FilterExpression(type=D.TAG, expression="A||B")
    )
    sub = subscription_data(entry)
    assert (sub.topic, sub.sub_string, sub.expression_type, sub.tags_set) == ("T", "A||B", "TAG", ["A", "B"])
    assert set(sub.code_set) == tag_codes("A||B")
    sql = subscription_data(
        D.SubscriptionEntry(
            topic=D.Resource(name="T"), expression=D.FilterExpression(type=D.SQL, expression="a>1")
        )
    )
    assert (sql.expression_type, sql.tags_set, sql.code_set) == ("SQL92", [], [])
