"""POP over remoting against ``rmq serve`` (RocketMQ 5.1.1's answers, research notes issue21 §3, §7):
pop / ack / change invisible time / peek / notification / polling info, the ck and ack messages
in the revive topic, redelivery by the revive service, orderly pop, POLLING_FULL, bad input.

One ``rmq serve`` for the module (``popPollingSize=1`` so that a third held POP of one key is
refused), with rmq's own remoting client; invisible times of 1-2 s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from formats import fastjson
from rmqcli.remoting.client import RemotingClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support import popwire as w
from tests.support.serve import ServeProcess, wait_until, write_conf

REVIVE = "rmq_sys_REVIVE_LOG_DefaultCluster"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    tmp = tmp_path_factory.mktemp("pop")
    conf = write_conf(tmp / "broker.conf", popPollingSize="1", flushConsumerOffsetInterval="500")
    with ServeProcess(tmp / "store", conf) as proc:
        yield proc


def fill(addr: str, topic: str, n: int, queues: int = 1, tags: str = "T") -> None:
    assert w.create_topic(addr, topic, queues).code == RS.SUCCESS
    for i in range(n):
        assert w.send(addr, topic, f"{topic}-{i}".encode(), tags=tags, queue_id=i % queues).code == RS.SUCCESS


def test_revive_topic_exists_at_start(server: ServeProcess) -> None:
    config = w.topic_config(server.broker, REVIVE)
    assert config is not None
    assert (config["readQueueNums"], config["writeQueueNums"], config["perm"]) == (8, 8, 6)


def test_pop_writes_a_ck_and_ack_writes_an_ack(server: ServeProcess) -> None:
    """Both wait in the timer's topic and reach the revive queue at their times (5.1.1: the ck 1 s
    before the revive time, the ack at it), with the timer's properties added."""
    a = server.broker
    fill(a, "TopicP", 3)
    resp = w.pop(a, "GP", "TopicP", invisible=3000)
    assert resp.code == RS.SUCCESS and resp.remark == "FOUND"
    h = resp.ext_fields
    assert set(h) == {"popTime", "invisibleTime", "reviveQid", "restNum", "startOffsetInfo", "msgOffsetInfo"}
    assert (h["invisibleTime"], h["restNum"], h["startOffsetInfo"], h["msgOffsetInfo"]) == (
        "3000", "0", "0 0 0", "0 0 0,1,2"
    )  # fmt: skip
    msgs = w.popped(resp, "TopicP", "GP")
    assert [m.body for m in msgs] == [b"TopicP-0", b"TopicP-1", b"TopicP-2"]
    assert all("POP_CK" not in m.rec.properties for m in msgs)  # the client builds the handle
    assert w.ack(a, "GP", msgs[1]).code == RS.SUCCESS
    # the consumer offset moved past the popped messages (shared with PULL)
    assert w.query_offset(a, "GP", "TopicP", 0) == 3
    again = w.pop(a, "GP", "TopicP", invisible=3000)
    assert again.code == RS.POLLING_TIMEOUT and again.remark == "NO_MESSAGE_IN_QUEUE"
    assert again.ext_fields["startOffsetInfo"] == "" and again.ext_fields["msgOffsetInfo"] == ""
    pop_time, qid = int(h["popTime"]), int(h["reviveQid"])
    deadline = time.monotonic() + 30  # the ck and the ack reach the revive queue through the timer
    while True:
        stored = w.pull_all(a, REVIVE, qid)
        ck = next((r for r in stored if r.tags == "ck" and b'"c":"GP"' in r.body()), None)
        ack = next((r for r in stored if r.tags == "ack" and b'"c":"GP"' in r.body()), None)
        if ck is not None and ack is not None:
            break
        assert time.monotonic() < deadline, "the ck and the ack never reached the revive queue"
        time.sleep(0.2)
    assert (
        ck.body()
        == (
            f'{{"bm":0,"bn":"broker-a","c":"GP","d":[0,1,2],"it":3000,"n":3,"pt":{pop_time},"q":0,'
            f'"reviveTime":{pop_time + 3000},"ro":0,"so":0,"t":"TopicP"}}'
        ).encode()
    )
    timer_keys = {"REAL_TOPIC", "REAL_QID", "TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS"}
    assert set(ck.properties) == {"TAGS", "TIMER_DELIVER_MS", "UNIQ_KEY"} | timer_keys
    assert (ck.properties["TAGS"], ck.properties["TIMER_DELIVER_MS"], ck.properties["UNIQ_KEY"]) == (
        "ck",
        str(pop_time + 3000 - 1000),
        f"TopicP@0@0@GP@{pop_time}@broker-a@ck",
    )
    assert (ck.properties["REAL_TOPIC"], ck.properties["REAL_QID"]) == (REVIVE, str(qid))
    assert int(ck.properties["TIMER_DEQUEUE_MS"]) >= pop_time + 2000  # not before its time
    assert (
        ack.body()
        == f'{{"ao":1,"bn":"broker-a","c":"GP","pt":{pop_time},"q":0,"so":0,"t":"TopicP"}}'.encode()
    )
    assert ack.properties["TIMER_DELIVER_MS"] == str(pop_time + 3000)
    assert ack.properties["UNIQ_KEY"] == f"TopicP@0@1@GP@{pop_time}@broker-a@ack"
    assert int(ack.properties["TIMER_DEQUEUE_MS"]) >= pop_time + 3000


def test_unacked_messages_come_back_from_the_retry_topic(server: ServeProcess) -> None:
    a = server.broker
    fill(a, "TopicR", 2)
    first = w.pop(a, "GR", "TopicR", invisible=1000)
    msgs = w.popped(first, "TopicR", "GR")
    assert len(msgs) == 2 and all(m.rec.reconsume_times == 0 for m in msgs)
    assert w.ack(a, "GR", msgs[0]).code == RS.SUCCESS
    back = w.pop_until(a, "GR", "TopicR", 1, invisible=1000)
    assert [m.body for m in back] == [b"TopicR-1"]
    m = back[0]
    assert m.rec.topic == "TopicR" and m.rec.reconsume_times == 1 and m.real_topic == "%RETRY%GR_TopicR"
    assert m.rec.properties["1ST_POP_TIME"] == first.ext_fields["popTime"]
    extra = m.extra.split(" ")
    assert extra[4] == "1" and extra[5] == "broker-a" and extra[6] == "0" and len(extra) == 8
    retry = w.topic_config(a, "%RETRY%GR_TopicR")
    assert retry is not None and (retry["readQueueNums"], retry["perm"]) == (1, 6)
    again = w.pop_until(a, "GR", "TopicR", 1, invisible=1000)  # not acked: once more
    assert [x.rec.reconsume_times for x in again] == [2]
    assert again[0].rec.properties["1ST_POP_TIME"] == first.ext_fields["popTime"]
    assert w.ack(a, "GR", again[0]).code == RS.SUCCESS
    assert w.pop_until(a, "GR", "TopicR", 1, timeout=3.5, invisible=1000) == []


def test_change_invisible_time_brings_a_message_back_sooner(server: ServeProcess) -> None:
    a = server.broker
    fill(a, "TopicC", 1)
    msgs = w.popped(w.pop(a, "GC", "TopicC", invisible=60000), "TopicC", "GC")
    resp = w.change(a, "GC", msgs[0], 1000)
    assert resp.code == RS.SUCCESS
    assert set(resp.ext_fields) == {"popTime", "invisibleTime", "reviveQid"}
    assert resp.ext_fields["invisibleTime"] == "1000"
    assert resp.ext_fields["reviveQid"] == msgs[0].extra.split(" ")[3]
    back = w.pop_until(a, "GC", "TopicC", 1, invisible=60000)
    assert [(m.body, m.rec.reconsume_times) for m in back] == [(b"TopicC-0", 1)]
    # the retried one, invisible again for 60 s: changed to 1 s, comes back a third time
    assert w.change(a, "GC", back[0], 1000).code == RS.SUCCESS
    third = w.pop_until(a, "GC", "TopicC", 1, invisible=60000)
    assert [m.rec.reconsume_times for m in third] == [2]
    assert w.ack(a, "GC", third[0]).code == RS.SUCCESS


def test_orderly_pop_blocks_the_queue_until_acked(server: ServeProcess) -> None:
    a = server.broker
    fill(a, "TopicO", 3)
    first = w.pop(a, "GO", "TopicO", invisible=1500, order=True)
    assert first.code == RS.SUCCESS
    h = first.ext_fields
    assert (h["reviveQid"], h["orderCountInfo"], h["msgOffsetInfo"]) == ("999", "0 0 0", "0 0 0,1,2")
    blocked = w.pop(a, "GO", "TopicO", invisible=1500, order=True)
    assert blocked.code == RS.POLLING_TIMEOUT and blocked.ext_fields["restNum"] == "3"
    assert w.query_offset(a, "GO", "TopicO", 0) == 0  # the batch's start
    again = w.pop_until(a, "GO", "TopicO", 3, invisible=30000, order=True, attempt="A1")
    assert [m.rec.queue_offset for m in again] == [0, 1, 2]  # after the invisible time: the same batch
    # the same attempt id is never blocked (a client retrying a lost answer), another one is
    retried = w.popped(w.pop(a, "GO", "TopicO", invisible=30000, order=True, attempt="A1"), "TopicO", "GO")
    assert [m.rec.queue_offset for m in retried] == [0, 1, 2]
    other = w.pop(a, "GO", "TopicO", invisible=30000, order=True, attempt="A2")
    assert other.code == RS.POLLING_TIMEOUT and other.ext_fields["restNum"] == "3"


def test_orderly_counts_and_acks(server: ServeProcess) -> None:
    a = server.broker
    fill(a, "TopicQ", 3)
    w.pop(a, "GQ", "TopicQ", invisible=1000, order=True)
    resp = None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        resp = w.pop(a, "GQ", "TopicQ", invisible=30000, order=True, poll=1000)
        if resp.code == RS.SUCCESS:
            break
    assert resp is not None and resp.code == RS.SUCCESS
    assert resp.ext_fields["orderCountInfo"] == "0 qo0%0 1;0 qo0%1 1;0 qo0%2 1;0 0 1"
    msgs = w.popped(resp, "TopicQ", "GQ")
    assert [m.rec.reconsume_times for m in msgs] == [0, 0, 0]
    assert msgs[0].extra.split(" ")[3] == "999"
    assert w.ack(a, "GQ", msgs[0]).code == RS.SUCCESS
    assert w.ack(a, "GQ", msgs[2]).code == RS.SUCCESS
    assert w.query_offset(a, "GQ", "TopicQ", 0) == 1  # the first un-acked offset
    still = w.pop(a, "GQ", "TopicQ", invisible=30000, order=True)
    assert still.code == RS.POLLING_TIMEOUT and still.ext_fields["restNum"] == "2"
    assert w.ack(a, "GQ", msgs[1]).code == RS.SUCCESS
    assert w.ack(a, "GQ", msgs[1]).code == RS.SUCCESS  # a duplicate ack is fine
    assert w.query_offset(a, "GQ", "TopicQ", 0) == 3
    assert w.send(a, "TopicQ", b"TopicQ-3").code == RS.SUCCESS
    # each POP is held for up to 1 s: it answers once the reput has dispatched the new message
    nxt: list = []
    deadline = time.monotonic() + 20
    while not nxt and time.monotonic() < deadline:
        nxt = w.popped(w.pop(a, "GQ", "TopicQ", invisible=30000, order=True, poll=1000), "TopicQ", "GQ")
    assert [(m.rec.queue_offset, m.body) for m in nxt] == [(3, b"TopicQ-3")]
    assert nxt[0].rec.properties.get("POP_CK") is None


def notification() -> dict[str, object]:
    born = int(time.time() * 1000)
    return {"consumerGroup": "GN", "topic": "TopicH", "queueId": -1, "pollTime": 200, "bornTime": born}


def test_held_pops_polling_info_and_polling_full(server: ServeProcess) -> None:
    a = server.broker
    assert w.create_topic(a, "TopicH", 1).code == RS.SUCCESS

    async def go() -> tuple[list[RemotingCommand], RemotingCommand, RemotingCommand, RemotingCommand]:
        async with RemotingClient() as client:

            def req(code: int, header: object) -> RemotingCommand:
                return RemotingCommand.request(code, header, version=453)

            held = [
                asyncio.ensure_future(
                    client.invoke(
                        a, req(RC.POP_MESSAGE, w.pop_header("GH", "TopicH", queue_id=0, poll=8000)), 15
                    )
                )
                for _ in range(2)
            ]
            deadline = time.monotonic() + 7  # until both pops are held, within their 8 s
            while True:
                info = await client.invoke(
                    a, req(RC.POLLING_INFO, {"consumerGroup": "GH", "topic": "TopicH", "queueId": 0}), 5
                )
                if info.ext_fields.get("pollingNum") == "2" or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
            full = await client.invoke(
                a, req(RC.POP_MESSAGE, w.pop_header("GH", "TopicH", queue_id=0, poll=8000)), 15
            )
            note = await client.invoke(
                a,
                req(RC.NOTIFICATION, notification()),
                5,
            )  # fmt: skip
            send = await client.invoke(
                a,
                req(RC.SEND_MESSAGE_V2, {"a": "PG", "b": "TopicH", "c": "TBW102", "d": 4, "e": 0, "f": 0,
                                         "g": int(time.time() * 1000), "h": 0, "i": "TAGS\x01T\x02"}),
                5,
            )  # fmt: skip
            assert send.code == RS.SUCCESS
            return list(await asyncio.gather(*held)), info, full, note

    held, info, full, note = asyncio.run(go())
    assert info.code == RS.SUCCESS and info.ext_fields == {"pollingNum": "2"}
    assert full.code == RS.POLLING_FULL
    assert note.code == RS.SUCCESS and note.ext_fields == {"hasMsg": "false"}
    codes = sorted(r.code for r in held)
    assert codes[0] == RS.SUCCESS  # woken by the send; the other finds nothing more
    has = w.call(a, RC.NOTIFICATION, notification())
    assert has.code == RS.SUCCESS and has.ext_fields == {"hasMsg": "true"}
    peek = w.call(
        a, RC.PEEK_MESSAGE, {"consumerGroup": "GN", "topic": "TopicH", "queueId": 0, "maxMsgNums": 4}
    )
    assert peek.code == RS.SUCCESS and peek.remark == "FOUND" and len(w.records(peek.body)) == 1
    assert peek.ext_fields == {"popTime": "0", "invisibleTime": "0", "reviveQid": "0", "restNum": "1"}
    assert w.query_offset(a, "GN", "TopicH", 0) == -1  # a peek commits nothing
    none = w.call(
        a, RC.PEEK_MESSAGE, {"consumerGroup": "GH", "topic": "TopicH", "queueId": 0, "maxMsgNums": 4}
    )
    assert none.code == RS.PULL_NOT_FOUND and none.remark == "NO_MESSAGE_IN_QUEUE"


def test_init_mode_and_offsets_shared_with_pull(server: ServeProcess) -> None:
    a = server.broker
    fill(a, "TopicI", 5)
    last = w.popped(w.pop(a, "GMAX", "TopicI", init_mode=1), "TopicI", "GMAX")
    assert [m.rec.queue_offset for m in last] == [4]  # MAX: from the last message on
    first = w.popped(w.pop(a, "GMIN", "TopicI", init_mode=0), "TopicI", "GMIN")
    assert [m.rec.queue_offset for m in first] == [0, 1, 2, 3, 4]
    # an offset committed by a 4.x consumer is where POP starts
    commit = {"consumerGroup": "GPULL", "topic": "TopicI", "queueId": 0, "commitOffset": 3}
    assert w.call(a, RC.UPDATE_CONSUMER_OFFSET, commit).code == RS.SUCCESS
    rest = w.popped(w.pop(a, "GPULL", "TopicI", init_mode=1), "TopicI", "GPULL")
    assert [m.rec.queue_offset for m in rest] == [3, 4]
    assert w.query_offset(a, "GPULL", "TopicI", 0) == 5
    tagged = w.popped(w.pop(a, "GTAG", "TopicI", exp="Other"), "TopicI", "GTAG")
    assert tagged == [] and w.query_offset(a, "GTAG", "TopicI", 0) == 5  # filtered out: the offset moves


def test_bad_requests_are_refused(server: ServeProcess) -> None:
    a = server.broker
    fill(a, "TopicB", 1)
    assert w.pop(a, "GB", "TopicB", num=33).code == RS.SYSTEM_ERROR
    assert w.pop(a, "GB", "NoSuchTopic").code == RS.TOPIC_NOT_EXIST
    assert w.pop(a, "GB", "TopicB", queue_id=5).code == RS.SYSTEM_ERROR
    assert w.pop(a, "G/../x", "TopicB").code == RS.SYSTEM_ERROR
    assert w.pop(a, "GB", "TopicB", invisible=-5).code == RS.SYSTEM_ERROR
    too_late = w.pop_header("GB", "TopicB")
    too_late.born_time -= 10_000
    late = w.call(a, RC.POP_MESSAGE, too_late)
    assert late.code == RS.POLLING_TIMEOUT and "timeout too much" in (late.remark or "")
    missing = w.call(a, RC.POP_MESSAGE, {"consumerGroup": "GB", "topic": "TopicB"})
    assert missing.code == RS.SYSTEM_ERROR
    msgs = w.popped(w.pop(a, "GB", "TopicB", invisible=60000), "TopicB", "GB")
    m = msgs[0]

    def ack(**over: object) -> RemotingCommand:
        header = {"consumerGroup": "GB", "topic": "TopicB", "queueId": 0, "extraInfo": m.extra, "offset": 0}
        header.update(over)
        return w.call(a, RC.ACK_MESSAGE, header)

    assert ack(topic="NoSuchTopic").code == RS.TOPIC_NOT_EXIST
    assert ack(queueId=3).code == RS.MESSAGE_ILLEGAL
    assert ack(offset=99).code == RS.NO_MESSAGE
    assert ack(extraInfo="nonsense").code == RS.MESSAGE_ILLEGAL
    assert ack(extraInfo="0 1 2 77 0 broker-a 0 0").code == RS.MESSAGE_ILLEGAL  # no such revive queue
    assert ack(extraInfo="x" * 5000).code == RS.MESSAGE_ILLEGAL
    assert ack(offset="abc").code == RS.SYSTEM_ERROR
    assert ack().code == RS.SUCCESS
    change = {"consumerGroup": "GB", "topic": "TopicB", "queueId": 0, "extraInfo": m.extra, "offset": 0}
    assert w.call(a, RC.CHANGE_MESSAGE_INVISIBLETIME, {**change, "invisibleTime": -1}).code == RS.SYSTEM_ERROR
    assert w.call(a, RC.CHANGE_MESSAGE_INVISIBLETIME, change).code == RS.SYSTEM_ERROR  # no invisibleTime
    peek = {"consumerGroup": "GB", "topic": "TopicB", "queueId": 0, "maxMsgNums": 100000}
    assert w.call(a, RC.PEEK_MESSAGE, peek).code == RS.SYSTEM_ERROR


def test_order_info_is_persisted(server: ServeProcess, tmp_path: Path) -> None:
    a = server.broker
    fill(a, "TopicF", 2)
    w.pop(a, "GF", "TopicF", invisible=30000, order=True)
    path = server.store / "config" / "consumerOrderInfo.json"
    wait_until(lambda: path.exists() and "TopicF@GF" in path.read_text(), 30, "the order info persisted")
    table = fastjson.loads(path.read_text())["table"]  # fastjson: queue ids as bare numbers
    info = table["TopicF@GF"][0]
    assert info["o"] == [0, 1] and info["i"] == 30000 and info["cm"] == 0


def test_concurrent_pops_of_one_group_share_the_messages(server: ServeProcess) -> None:
    a = server.broker
    fill(a, "TopicS", 24, queues=4)
    seen: list[bytes] = []
    for _ in range(6):
        answers = w.calls(a, [(RC.POP_MESSAGE, w.pop_header("GS", "TopicS", num=3, invisible=60000))] * 3)
        for resp in answers:
            if resp.code == RS.SUCCESS:
                seen += [m.body for m in w.popped(resp, "TopicS", "GS")]
    assert sorted(seen) == sorted(f"TopicS-{i}".encode() for i in range(24))  # each once
