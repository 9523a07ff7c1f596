"""Message commands end to end over loopback (protocol.md B.6-B.8, C.4.6, C.4.7, C.5): sendMessage
stores records in the broker of ``rmq serve`` (``tests.admin.adminserver``); the query, print and
consume commands read them back through QUERY_MESSAGE, VIEW_MESSAGE_BY_ID and PULL_MESSAGE; text
checked against mqadmin's patterns."""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterator

import pytest

from formats import commitlog as fmt
from rmqcli.cli.admin.format import time_millis_to_human_string2
from rmqcli.cli.commands import ADMIN
from rmqcli.remoting.headers import PullMessageRequestHeader, SendMessageRequestHeaderV2
from tests.admin.adminserver import AdminServer
from tests.admin.runner import rmq, rmq_fail, run, run_together

SEND_HEAD = f"{'#Broker Name':<32} {'#QID':<4} {'#Send Result':<20} #MsgId\n"


@pytest.fixture
def single() -> Iterator[AdminServer]:
    with AdminServer((("DefaultCluster", "broker-a", 0),)) as s:
        s.create_topic(s.broker("broker-a"), "T", 4, 4)
        yield s


def send(server: AdminServer, *args: str) -> str:
    """sendMessage; returns the client msgId (UNIQ_KEY) of its one row."""
    out = rmq("sendMessage", "-n", server.namesrv, *args)
    assert out.startswith(SEND_HEAD)
    row = out[len(SEND_HEAD) :]
    assert re.fullmatch(r"broker-a {24} \d    SEND_OK {14}[0-9A-F]{32}\n", row), row
    return row.split()[-1]


def test_send_message_request_as_the_java_producer(single: AdminServer) -> None:
    uniq = send(single, "-t", "T", "-p", " hello ", "-k", "k1 k2", "-c", "TagA", "-b", "broker-a", "-i", "2")
    broker = single.broker("broker-a")
    codes = single.codes(broker.addr)
    assert codes == [34, 310, 35]
    request = next(cmd for who, cmd in single.commands if cmd.code == 310)
    header = SendMessageRequestHeaderV2.from_ext_fields(request.ext_fields)
    assert (header.b, header.c, header.d, header.e, header.f, header.h, header.n) == (
        "T",
        "TBW102",
        4,
        2,
        0,
        0,
        "broker-a",
    )
    assert header.a.isdigit() and not header.m and header.j == 0
    props = fmt.decode_properties(header.i)
    assert props == {"TAGS": "TagA", "KEYS": "k1 k2", "WAIT": "true", "UNIQ_KEY": uniq}
    assert header.i == fmt.encode_properties_as_broker(props).decode()  # HashMap order, no trailing separator
    assert request.body == b"hello" and header.a not in broker.controller.clients.producers  # unregistered
    # a body of 4 KiB or more is zlib-compressed with the ZLIB type bits (sysFlag 0x301)
    big = "x" * 5000
    send(single, "-t", "T", "-p", big)
    request = [cmd for who, cmd in single.commands if cmd.code == 310][-1]
    assert request.ext_fields["f"] == str(0x301) and zlib.decompress(request.body) == big.encode()
    code, err = rmq_fail("sendMessage", "-n", single.namesrv, "-t", "T", "-p", "x", "-i", "1")
    assert code == 2 and "Broker name must be set" in err


def test_send_to_unknown_topic_uses_tbw102(single: AdminServer) -> None:
    send(single, "-t", "Fresh", "-p", "x")
    assert single.codes("namesrv")[:2] == [105, 105]
    assert single.broker("broker-a").topics["Fresh"]["writeQueueNums"] == 4
    assert rmq("topicList", "-n", single.namesrv).splitlines().count("Fresh") == 1


def test_query_by_key_unique_key_and_id(single: AdminServer) -> None:
    n = single.namesrv
    broker = single.broker("broker-a")
    first = send(single, "-t", "T", "-p", "one", "-k", "shared", "-b", "broker-a", "-i", "1")
    second = send(
        single, "-t", "T", "-p", "two", "-k", "shared other", "-c", "TagB", "-b", "broker-a", "-i", "1"
    )
    out = rmq("queryMsgByKey", "-n", n, "-t", "T", "-k", "shared")
    assert out == (  # the index answers the newest first
        f"{'#Message ID':<50} {'#QID':>4} {'#Offset':>40}\n"
        f"{second:<50} {1:>4} {1:>40}\n{first:<50} {1:>4} {0:>40}\n"
    )
    assert rmq("queryMsgByKey", "-n", n, "-t", "T", "-k", "other").count("\n") == 2
    code, err = rmq_fail("queryMsgByKey", "-n", n, "-t", "T", "-k", "none")
    assert code == 3 and "NO_MESSAGE(208): query message by key finished, but no message." in err
    text = rmq("queryMsgByUniqueKey", "-n", n, "-t", "T", "-i", second)
    lines = text.split("\n")
    assert lines[0] == f"{'Topic:':<20} T" and lines[1] == f"{'Tags:':<20} [TagB]"
    assert lines[2] == f"{'Keys:':<20} [shared other]" and lines[3] == f"{'Queue ID:':<20} 1"
    assert lines[4] == f"{'Queue Offset:':<20} 1" and lines[12].startswith(f"{'Properties:':<20} {{")
    path = lines[13].split()[-1]
    assert path.endswith(f"rocketmq/msgbodys/{second}") and open(path, "rb").read() == b"two"
    assert text.endswith("\n\nWARN: No Consumer")
    # queryMsgById: the offset id names the broker; the tracks come from 300 / 203 / 208
    unit = broker.units("T", 1)[1]
    phys = unit.physical_offset
    offset_id = fmt.offset_msg_id(b"\x7f\x00\x00\x01", broker.port, phys)
    single.add_consumer("G", "10.0.0.1@1", {"T": "TagA"})
    single.commit(broker, "G", "T", {1: 2})
    text = rmq("queryMsgById", "-n", n, "-i", offset_id)
    lines = text.split("\n")
    assert lines[0] == f"{'OffsetID:':<20} {offset_id}" and lines[6] == f"{'CommitLog Offset:':<20} {phys}"
    stored = broker.controller.store.store_timestamp(unit)
    assert lines[9] == f"{'Store Timestamp:':<20} {time_millis_to_human_string2(stored)}"
    assert lines[11] == f"{'Store Host:':<20} {broker.addr}" and lines[12] == f"{'System Flag:':<20} 0"
    assert text.endswith(
        "\n\nMessageTrack [consumerGroup=G, trackType=CONSUMED_BUT_FILTERED, exceptionDesc=null]"
    )
    views = json.loads(rmq("queryMsgById", "-n", n, "-i", offset_id, "--json"))
    assert (
        views[0]["message"]["body"] == "two" and views[0]["tracks"][0]["trackType"] == "CONSUMED_BUT_FILTERED"
    )
    missing = fmt.offset_msg_id(b"\x7f\x00\x00\x01", broker.port, 999999)
    code, err = rmq_fail("queryMsgById", "-n", n, "-i", missing)
    assert code == 6 and "SYSTEM_ERROR(1): can not find message by the offset, 999999" in err
    # an offset id naming an address the NameServer does not list is never connected to
    code, err = rmq_fail("queryMsgById", "-n", n, "-i", fmt.offset_msg_id(b"\x7f\x00\x00\x01", 1, 0))
    assert code == 3 and "127.0.0.1:1" in err


def test_pulls_print_msg_by_queue_offset_and_consume(single: AdminServer) -> None:
    n = single.namesrv
    ids = [
        send(single, "-t", "T", "-p", f"m{i}", "-c", "A" if i % 2 else "B", "-b", "broker-a", "-i", "0")
        for i in range(3)
    ]
    out = rmq("printMsg", "-n", n, "-t", "T", "-s", "A")
    blocks = out.split("--------------------------------------------------------\n")
    assert len(blocks) == 5 and blocks[-1] == ""
    q0 = next(b for b in blocks if "queueId=0]\n" in b.splitlines()[0] + "\n")
    lines = q0.splitlines()
    assert lines[0] == "minOffset=0, maxOffset=3, MessageQueue [topic=T, brokerName=broker-a, queueId=0]"
    assert lines[1].startswith(f"MSGID: {ids[1]} MessageExt [brokerName=broker-a, queueId=0, storeSize=")
    assert "properties={MIN_OFFSET=0, MAX_OFFSET=3, " in lines[1] and "body=[109, 49]" in lines[1]
    assert lines[1].endswith("transactionId='null'}] BODY: m1")
    assert len(lines) == 2  # offset reached maxOffset: the loop ends without a status line
    pulls = [
        PullMessageRequestHeader.from_ext_fields(c.ext_fields) for _, c in single.commands if c.code == 11
    ]
    assert {(p.consumer_group, p.sys_flag, p.max_msg_nums, p.subscription) for p in pulls} == {
        ("TOOLS_CONSUMER", 4, 32, "A")
    }
    assert "BODY: NOT PRINT BODY" in rmq("printMsg", "-n", n, "-t", "T", "-d", "false")
    by_queue = rmq(
        "printMsgByQueue", "-n", n, "-t", "T", "-a", "broker-a", "-i", "0", "-p", "true", "-f", "true"
    )
    assert by_queue.count("MSGID: ") == 3 and by_queue.endswith(
        f"Tag: {'B':<30} Count: 2\nTag: {'A':<30} Count: 1\n"
    )
    assert rmq("printMsgByQueue", "-n", n, "-t", "T", "-a", "broker-a", "-i", "0") == ""
    view = rmq("queryMsgByOffset", "-n", n, "-t", "T", "-b", "broker-a", "-i", "0", "-o", "2")
    assert view.startswith(f"{'OffsetID:':<20} ") and f"{'Queue Offset:':<20} 2\n" in view
    assert rmq("queryMsgByOffset", "-n", n, "-t", "T", "-b", "broker-a", "-i", "0", "-o", "3") == ""
    out = rmq("consumeMessage", "-n", n, "-t", "T", "-b", "broker-a", "-i", "0", "-o", "1")
    assert out.startswith("Consume ok\nMSGID: ") and out.count("MSGID: ") == 2
    assert out.endswith(
        "MessageQueue [topic=T, brokerName=broker-a, queueId=0] print msg finished. "
        "status=NO_NEW_MSG, offset=3\n"
    )
    out = rmq("consumeMessage", "-n", n, "-t", "T", "-b", "broker-a", "-i", "0", "-c", "2")
    assert out.startswith("The oldler 2 message will be provided\nConsume ok\n") and out.count("MSGID: ") == 2
    # mqadmin's DEFAULT mode charges every queue one message more than it holds (empty ones too)
    out = rmq("consumeMessage", "-n", n, "-t", "T", "-c", "1")
    assert out.count("MSGID: ") <= 1
    data = json.loads(rmq("consumeMessage", "-n", n, "-t", "T", "--json"))
    assert sum(len(e.get("messages", [])) for e in data) == 3
    code, err = rmq_fail("consumeMessage", "-n", n, "-t", "T", "-i", "0")
    assert code == 2


def test_query_cq_check_rt_and_send_status(single: AdminServer) -> None:
    n, broker = single.namesrv, single.broker("broker-a")
    send(single, "-t", "T", "-p", "x", "-c", "TagA", "-b", "broker-a", "-i", "3")
    out = rmq("queryCq", "-n", n, "-t", "T", "-q", "3", "-i", "0")
    [unit] = broker.units("T", 3)
    phys, size, code = unit.physical_offset, unit.size, unit.tags_code
    rule = "======================================\n"
    assert out == (
        f"Queue data: \nmax: 1, min: 0\n{rule}idx: 0\n"
        f"ConsumeQueueData{{physicOffset={phys}, physicSize={size}, tagsCode={code}, extendDataJson='null', "
        f"bitMap='null', eval=false, msg='null'}}\n{rule}"
    )
    out = rmq("checkMsgSendRT", "-n", n, "-t", "T", "-a", "5", "-s", "16")
    lines = out.splitlines()
    assert lines[0] == f"{'#Broker Name':<32} {'#QID':<4} {'#Send Result':<20} #RT"
    assert [line.split()[:3] for line in lines[1:6]] == [["broker-a", str(i % 4), "true"] for i in range(5)]
    assert re.fullmatch(r"Avg RT: \d+\.\d\d", lines[6])
    assert rmq("checkMsgSendRT", "-n", n, "-t", "T", "-a", "1").endswith("Avg RT: NaN\n")
    assert broker.topics["broker-a"]["writeQueueNums"] == 1  # the broker's own topic
    out = rmq("sendMsgStatus", "-n", n, "-b", "broker-a", "-c", "2", "-s", "30")
    assert len(out.splitlines()) == 2
    assert re.fullmatch(
        r"(rt=\d+ms, SendResult=SendResult \[sendStatus=SEND_OK, msgId=[0-9A-F]{32}, "
        r"offsetMsgId=[0-9A-F]{32}, "
        r"messageQueue=MessageQueue \[topic=broker-a, brokerName=broker-a, queueId=0\], "
        r"queueOffset=[12]\]\n){2}",
        out,
    )
    stored = broker.units("broker-a", 0)
    assert (
        len(stored) == 3 and stored[1].size - stored[0].size == 11
    )  # 16 bytes -> "hello jodie" x2, 30 -> x3


def test_every_message_command_has_json(single: AdminServer) -> None:
    n, broker = single.namesrv, single.broker("broker-a")
    uniq = send(single, "-t", "T", "-p", "x", "-k", "k", "-b", "broker-a", "-i", "0")
    offset_id = fmt.offset_msg_id(b"\x7f\x00\x00\x01", broker.port, 0)
    calls = [
        ["sendMessage", "-t", "T", "-p", "y"],
        ["queryMsgById", "-i", offset_id],
        ["queryMsgByKey", "-t", "T", "-k", "k"],
        ["queryMsgByUniqueKey", "-t", "T", "-i", uniq],
        ["queryMsgByOffset", "-t", "T", "-b", "broker-a", "-i", "0", "-o", "0"],
        ["printMsg", "-t", "T"],
        ["printMsgByQueue", "-t", "T", "-a", "broker-a", "-i", "0"],
        ["queryCq", "-t", "T", "-q", "0", "-i", "0"],
        ["consumeMessage", "-t", "T"],
        ["checkMsgSendRT", "-t", "T", "-a", "2"],
        ["sendMsgStatus", "-b", "broker-a", "-c", "1"],
        ["queryMsgTraceById", "-i", "k", "-t", "T"],
    ]
    for args in calls:
        json.loads(rmq(*args, "-n", n, "--json"))
    assert {c[0] for c in calls} == {n for n, where in ADMIN.items() if where.startswith("admin.message:")}
    single.add_consumer("G", "10.0.0.1@1", {"T": "*"})
    out = rmq("queryMsgByUniqueKey", "-n", n, "-t", "T", "-i", uniq, "-g", "G", "-d", "10.0.0.1@1")
    assert out == (
        "ConsumeMessageDirectlyResult [order=false, autoCommit=true, consumeResult=CR_SUCCESS, "
        "remark=null, spentTimeMills=1]"
    )


def test_send_then_print_in_subprocesses(single: AdminServer) -> None:
    env = {"NAMESRV_ADDR": single.namesrv}
    sent, missing = run_together(
        ["sendMessage", "-t", "T", "-p", "héllo", "-b", "broker-a", "-i", "1"],
        ["printMsg", "-t", "Missing"],
        env=env,
    )
    assert sent.returncode == 0 and sent.stdout.startswith(SEND_HEAD), sent.stderr
    assert (
        missing.returncode == 3
        and "TOPIC_NOT_EXIST(17)" in missing.stderr
        and missing.stderr.count("\n") == 1
    )
    proc = run("printMsgByQueue", "-t", "T", "-a", "broker-a", "-i", "1", "-p", "true", "-d", "true", env=env)
    assert proc.returncode == 0 and proc.stdout.endswith("BODY: héllo\n"), proc.stderr
