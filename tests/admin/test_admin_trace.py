"""``queryMsgTraceById``: the trace decoder (``rmqcli.admin.trace``) on the real 4.9.8 client's stored
trace bodies, on every record type and field count ``TraceDataEncoder`` accepts, and on garbage;
mqadmin's text; and rmq against the real 4.9.8 broker (``traceTopicEnable=true``) beside the kit's
mqadmin (skipped without Java 17, the kit or javac)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from formats.javahash import hashmap_order
from rmqcli.admin.trace import decode_body, decode_records, java_split, views
from rmqcli.cli.admin.format_messages import query_msg_trace
from tests.support.cli import invoke_rmq, one_line_error
from tests.support.components import require
from tests.support.java import compile_programs, mqadmin, trace_round_trip
from tests.support.oracle import real_cluster
from tests.support.serve import wait_until

MSG_ID = "C0000202312E5FFD2B2781DF6D8A0000"
# the bodies the real 4.9.8 client stored in RMQ_SYS_TRACE_TOPIC (research notes, 6a)
PUB = (
    b"Pub\x011795670103437\x01DefaultRegion\x01TracePG\x01TraceTopicT\x01C0000202312E5FFD2B2781DF6D8A0000"
    b"\x01TagA\x01KEY1 KEY2\x01127.0.0.1:20911\x0111\x01148\x010"
    b"\x017F000001000051AF0000000000000000\x01true\x02"
)
SUB = (
    b"SubBefore\x011795670104162\x01null\x01TraceCG\x01C0000202312E5FFD2B2781DF70620002"
    b"\x01C0000202312E5FFD2B2781DF6D8A0000\x010\x01KEY1 KEY2\x02SubAfter\x01C0000202312E5FFD2B2781DF70620002"
    b"\x01C0000202312E5FFD2B2781DF6D8A0000\x012\x01true\x01KEY1 KEY2\x010\x011795670104164\x01TraceCG\x02"
)
ROW = "{:<10} {:<20} {:<20} {:<20} {:<10} {:<10}\n"


def record(*fields: object) -> str:
    return "\x01".join(map(str, fields)) + "\x02"


def local(millis: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(millis / 1000))


# --- the decoder ---------------------------------------------------------------------------------
def test_real_pub_body() -> None:
    (pub,) = decode_body(PUB)
    assert (pub.trace_type, pub.time_stamp, pub.region_id, pub.group_name) == (
        "Pub", 1795670103437, "DefaultRegion", "TracePG",
    )  # fmt: skip
    assert (pub.topic, pub.msg_id, pub.tags, pub.keys, pub.store_host) == (
        "TraceTopicT", MSG_ID, "TagA", "KEY1 KEY2", "127.0.0.1:20911",
    )  # fmt: skip
    assert (pub.body_length, pub.cost_time, pub.msg_type) == (11, 148, "Normal_Msg")
    assert pub.offset_msg_id == "7F000001000051AF0000000000000000" and pub.success and pub.client_host is None


def test_real_consume_body() -> None:
    before, after = decode_body(SUB)
    assert (before.trace_type, before.time_stamp, before.region_id, before.group_name) == (
        "SubBefore", 1795670104162, "null", "TraceCG",
    )  # fmt: skip
    assert (before.request_id, before.msg_id, before.retry_times, before.keys) == (
        "C0000202312E5FFD2B2781DF70620002", MSG_ID, 0, "KEY1 KEY2",
    )  # fmt: skip
    assert (after.trace_type, after.request_id, after.msg_id, after.cost_time, after.success) == (
        "SubAfter", "C0000202312E5FFD2B2781DF70620002", MSG_ID, 2, True,
    )  # fmt: skip
    assert (after.keys, after.context_code, after.time_stamp, after.group_name) == (
        "KEY1 KEY2", 0, 1795670104164, "TraceCG",
    )  # fmt: skip


def test_views_of_one_msg_id_with_the_born_host() -> None:
    got = views(MSG_ID, PUB + SUB, "127.0.0.1:54321")
    assert [(v.msg_type, v.group_name, v.client_host, v.status) for v in got] == [
        ("Pub", "TracePG", "127.0.0.1", "success"),
        ("SubBefore", "TraceCG", "127.0.0.1", "success"),
        ("SubAfter", "TraceCG", "127.0.0.1", "success"),
    ]
    assert views("OTHER", PUB + SUB, "127.0.0.1:1") == []
    (v6,) = views(MSG_ID, PUB, "[0:0:0:0:0:0:0:1]:9")  # getHostAddress: no brackets
    assert v6.client_host == "0:0:0:0:0:0:0:1"


PUB_HEAD = ["Pub", 1000, "R", "PG", "T", "ID", "tag", "k", "1.2.3.4:9", 5, 6, 3]


def test_pub_field_counts() -> None:
    """12 fields (success stays true), 13 (success), 14 (offsetMsgId, success), 15+ (clientHost)."""
    (p12,) = decode_records(record(*PUB_HEAD))
    assert p12.success and p12.offset_msg_id is None and p12.msg_type == "Delay_Msg"
    (p13,) = decode_records(record(*PUB_HEAD, "false"))
    assert not p13.success and p13.offset_msg_id is None
    (p14,) = decode_records(record(*PUB_HEAD, "OFF", "TRUE"))
    assert p14.success and p14.offset_msg_id == "OFF" and p14.client_host is None
    (p16,) = decode_records(record(*PUB_HEAD, "OFF", "false", "10.0.0.1", "extra"))
    assert not p16.success and p16.client_host == "10.0.0.1"


def test_sub_after_field_counts() -> None:
    """6 fields: no contextCode; 7 (a CLOUD record: no time or group, ends with \\x01): the time of
    decoding, as TraceContext's default; 9: time and group."""
    (s6,) = decode_records(record("SubAfter", "R", "ID", 7, "false", "k"), now=42)
    assert (s6.cost_time, s6.success, s6.context_code, s6.time_stamp, s6.group_name) == (7, False, 0, 42, "")
    (cloud,) = decode_records("SubAfter\x01R\x01ID\x013\x01true\x01k\x014\x01", now=43)
    assert (cloud.context_code, cloud.time_stamp, cloud.group_name) == (4, 43, "")
    (s9,) = decode_records(record("SubAfter", "R", "ID", 3, "true", "k", 1, 99, "CG"), now=44)
    assert (s9.context_code, s9.time_stamp, s9.group_name) == (1, 99, "CG")


def test_end_transaction() -> None:
    text = record(
        "EndTransaction",
        5,
        "DefaultRegion",
        "TPG",
        "T",
        "ID",
        "null",
        "null",
        "h:1",
        2,
        "TX",
        "COMMIT_MESSAGE",
        "true",
    )
    (end,) = decode_records(text)
    assert (end.trace_type, end.time_stamp, end.group_name, end.topic, end.msg_id, end.tags) == (
        "EndTransaction", 5, "TPG", "T", "ID", "null",
    )  # fmt: skip
    assert (end.msg_type, end.transaction_id, end.transaction_state, end.from_transaction_check) == (
        "Trans_msg_Commit", "TX", "COMMIT_MESSAGE", True,
    )  # fmt: skip
    shown = query_msg_trace(views("ID", text.encode(), "1.1.1.1:1"))
    assert shown == ""  # decoded, not printed (as SubBefore)


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "\x02\x02\x01\x01\x02",
        "Pub\x02",
        "Pub\x01x\x02",
        record(*PUB_HEAD[:11]),  # one field short
        record("Pub", "1e3", *PUB_HEAD[2:]),  # not a long
        record(*PUB_HEAD[:11], 4),  # no such MessageType
        record(*PUB_HEAD[:9], 99999999999, *PUB_HEAD[10:]),  # out of int range
        record("SubBefore", 1, "R", "G", "Q", "ID", "-", "k"),
        record("SubAfter", "R", "ID", "", "true", "k"),
        record("SubAfter", "R", "ID", 1, "true", "k", 0, "Subafter", "G"),
        record("EndTransaction", 5, "R", "G", "T", "ID", "t", "k", "h", 2, "TX", "MAYBE", "true"),
        record("Unknown", 1, 2, 3),
        "\udcff\x00\x01\x02" * 5,
    ],
)
def test_malformed_records_are_skipped(garbage: str) -> None:
    good = record(*PUB_HEAD, "OFF", "true")
    assert [r.trace_type for r in decode_records(garbage + good + garbage)] == ["Pub"]


def test_garbage_bytes_never_raise() -> None:
    import random

    rng = random.Random(7)
    pieces = [
        b"Pub",
        b"SubAfter",
        b"SubBefore",
        b"EndTransaction",
        b"\x01",
        b"\x02",
        b"1",
        b"-",
        b"\xff",
        b"true",
    ]
    for _ in range(2000):
        body = b"".join(rng.choice(pieces) for _ in range(rng.randrange(30)))
        for r in decode_body(body):
            assert r.trace_type in ("Pub", "SubBefore", "SubAfter", "EndTransaction")
    assert java_split("a\x01\x01b\x01\x01", "\x01") == ["a", "", "b"] and java_split("", "\x01") == [""]


# --- mqadmin's text ------------------------------------------------------------------------------
def test_text_pub_rows_then_sub_groups_in_hashmap_order() -> None:
    pubs = PUB + record(*PUB_HEAD[:3], "PG2", "T", MSG_ID, *PUB_HEAD[6:], "OFF", "false").encode()
    groups = ["CG_b", "CG_a", "AnotherGroup"]
    subs = b"".join(
        record("SubAfter", f"R{i}", MSG_ID, i, "true", "k", 0, 1795670104164 + i, g).encode()
        for i, g in enumerate(groups + ["CG_a"])
    )
    text = query_msg_trace(views(MSG_ID, pubs + SUB + subs, "10.1.2.3:77"))
    pub_head = ROW.format("#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status")
    sub_head = ROW.format("#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status")
    expected = (
        pub_head + ROW.format("Pub", "TracePG", "10.1.2.3", local(1795670103437), "148ms", "success") + "\n"
    )
    expected += pub_head + ROW.format("Pub", "PG2", "10.1.2.3", local(1000), "6ms", "failed") + "\n"
    rows = {
        "TraceCG": [(1795670104164, 2)],
        "CG_b": [(1795670104164, 0)],
        "CG_a": [(1795670104165, 1), (1795670104167, 3)],
    }
    rows["AnotherGroup"] = [(1795670104166, 2)]
    for group in hashmap_order(["TraceCG", *groups]):
        expected += sub_head
        for ts, cost in rows[group]:
            expected += ROW.format("Sub", group, "10.1.2.3", local(ts), f"{cost}ms", "success")
        expected += "\n"
    assert text == expected


# --- rmq and mqadmin against the real 4.9.8 broker -----------------------------------------------
@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The real NameServer and Broker with ``traceTopicEnable=true``: the name server's address and
    a state directory for the kit's tools."""
    require("java")
    tmp = tmp_path_factory.mktemp("real-trace")
    with real_cluster(tmp, "RealTraceCluster", "real-trace", traceTopicEnable="true") as real:
        yield real.namesrv, tmp / "tools"


def rmq(*args: str) -> tuple[int, str]:
    result = invoke_rmq(*args)
    return result.exit_code, result.stdout if result.exit_code == 0 else one_line_error(result.stderr)


@pytest.mark.java
def test_rmq_reads_the_real_brokers_traces_as_mqadmin(real: tuple[str, Path], tmp_path: Path) -> None:
    ns, state = real
    classes = compile_programs(tmp_path / "classes")
    msg_id = trace_round_trip(classes, state, ns, "TracedTopicR", "TracePG_R", "TraceCG_R")
    wait_until(lambda: "Sub " in rmq("queryMsgTraceById", "-n", ns, "-i", msg_id)[1], 15, "both traces")
    code, ours = rmq("queryMsgTraceById", "-n", ns, "-i", msg_id)
    assert code == 0 and ours.splitlines()[1].split()[:3] == ["Pub", "TracePG_R", "127.0.0.1"]
    assert ours.splitlines()[4].split()[:3] == ["Sub", "TraceCG_R", "127.0.0.1"]
    assert mqadmin(state, "queryMsgTraceById", "-n", ns, "-i", msg_id).stdout == ours
    # the failures: mqadmin's cause, rmq's one line and exit 3
    missing = mqadmin(state, "queryMsgTraceById", "-n", ns, "-i", "NoSuchMsgId").stderr
    assert "CODE: 208  DESC: query message by key finished, but no message." in missing
    code, err = rmq("queryMsgTraceById", "-n", ns, "-i", "NoSuchMsgId")
    assert code == 3 and "NO_MESSAGE(208): query message by key finished, but no message." in err
    code, err = rmq("queryMsgTraceById", "-n", ns, "-i", msg_id, "-t", "NoSuchTraceTopic")
    assert code == 3 and "TOPIC_NOT_EXIST(17): The topic[NoSuchTraceTopic] not matched route info" in err
    # a key no message has: the broker answers QUERY_NOT_FOUND, which MQAdminImpl takes as empty
    missing = mqadmin(state, "queryMsgByKey", "-n", ns, "-t", "TracedTopicR", "-k", "NoSuchKey").stderr
    assert "CODE: 208  DESC: query message by key finished, but no message." in missing
    code, err = rmq("queryMsgByKey", "-n", ns, "-t", "TracedTopicR", "-k", "NoSuchKey")
    assert code == 3 and "NO_MESSAGE(208): query message by key finished, but no message." in err
