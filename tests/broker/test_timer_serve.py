"""5.x timer messages in ``rmq serve`` (``rmqcli.broker.timer``), with rmq's remoting client: a
``TIMER_DELAY_SEC`` send is answered with the timer queue's offset, is not in its topic at once and
is there after its time with 5.1.1's properties; a past ``TIMER_DELIVER_MS`` is stored at once; a
delay beyond ``timerMaxDelaySec`` is refused with 5.1.1's code and remark; a cancel marker; timers
pending across a SIGKILL are all delivered after the restart; 2,000 timers with only 100 held in
memory all arrive, in the order of their times."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from formats.records import Record
from rmqcli.remoting import headers as hd
from rmqcli.remoting.client import RemotingClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support import popwire as w
from tests.support.serve import ServeProcess, wait_until, write_conf

TOPIC = "TopicTimer"
ILLEGAL = (
    "timer message illegal, the delay time should not be bigger than the max delay {}ms; or if set "
    "del msg, the delay time should be bigger than the current time"
)


def props_text(props: dict[str, str]) -> str:
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items())


def header(topic: str, props: dict[str, str]) -> hd.SendMessageRequestHeaderV2:
    return hd.SendMessageRequestHeaderV2(
        a="PG", b=topic, c="TBW102", d=4, e=0, f=0, g=int(time.time() * 1000), h=0, i=props_text(props)
    )


def tsend(addr: str, props: dict[str, str], topic: str = TOPIC) -> RemotingCommand:
    return w.call(addr, RC.SEND_MESSAGE_V2, header(topic, {"TAGS": "T", **props}), b"body")


def send_many(addr: str, all_props: list[dict[str, str]]) -> list[RemotingCommand]:
    """Many sends on one connection, 100 at a time."""

    async def go() -> list[RemotingCommand]:
        out: list[RemotingCommand] = []
        async with RemotingClient() as client:
            for i in range(0, len(all_props), 100):
                chunk = all_props[i : i + 100]
                out += await asyncio.gather(
                    *(
                        client.invoke(
                            addr, RemotingCommand.request(RC.SEND_MESSAGE_V2, header(TOPIC, p), b"b"), 20.0
                        )
                        for p in chunk
                    )
                )
        return out

    return asyncio.run(go())


def delivered(addr: str, topic: str = TOPIC) -> list[Record]:
    return w.pull_all(addr, topic, 0)


def start(tmp_path: Path, name: str, **conf: str) -> ServeProcess:
    return ServeProcess(tmp_path / name, write_conf(tmp_path / f"{name}.conf", **conf)).start()


def test_delay_past_and_refusals(tmp_path: Path) -> None:
    s = start(tmp_path, "a")
    try:
        a = s.broker
        assert w.create_topic(a, TOPIC, 1).code == RS.SUCCESS
        first = tsend(a, {"UNIQ_KEY": "U-DELAY", "TIMER_DELAY_SEC": "3"})
        assert first.code == RS.SUCCESS and first.remark is None
        assert sorted(first.ext_fields) == ["MSG_REGION", "TRACE_ON", "msgId", "queueId", "queueOffset"]
        assert (
            first.ext_fields["queueOffset"] == "0" and first.ext_fields["queueId"] == "0"
        )  # the timer queue's
        second = tsend(a, {"UNIQ_KEY": "U-DELAY2", "TIMER_DELAY_MS": "3000"})
        assert second.code == RS.SUCCESS and second.ext_fields["queueOffset"] == "1"
        # a cancel marker for U-DELAY2, sent with its deliver time: U-DELAY2 never arrives
        timer_of = {"UNIQ_KEY": "U-DEL", "TIMER_DEL_UNIQKEY": "U-DELAY2", "TIMER_DELAY_MS": "3000"}
        assert tsend(a, timer_of).code == RS.SUCCESS
        assert delivered(a) == []  # not at once
        past = tsend(a, {"UNIQ_KEY": "U-PAST", "TIMER_DELIVER_MS": str(int(time.time() * 1000) - 5000)})
        assert past.code == RS.SUCCESS and past.ext_fields["queueOffset"] == "0"  # the topic's own queue
        now = delivered(a)
        assert [r.properties["UNIQ_KEY"] for r in now] == ["U-PAST"]
        assert "TIMER_OUT_MS" not in now[0].properties and "REAL_TOPIC" not in now[0].properties
        too_long = tsend(a, {"UNIQ_KEY": "U-LONG", "TIMER_DELAY_SEC": "300000"})
        assert (too_long.code, too_long.remark) == (RS.MESSAGE_ILLEGAL, ILLEGAL.format(259200000))
        assert sorted(too_long.ext_fields) == ["MSG_REGION", "TRACE_ON"]
        bad = tsend(a, {"UNIQ_KEY": "U-BAD", "TIMER_DELAY_SEC": "soon"})
        assert (bad.code, bad.remark) == (RS.MESSAGE_ILLEGAL, ILLEGAL.format(259200000))
        cancel_past = tsend(a, {"UNIQ_KEY": "U-DELPAST", "TIMER_DEL_UNIQKEY": "X", "TIMER_DELIVER_MS": "1"})
        assert cancel_past.code == RS.MESSAGE_ILLEGAL
        wait_until(lambda: len(delivered(a)) >= 2, 10, "the delayed message")
        time.sleep(1.5)  # the cancelled one would come in the same round
        got = {r.properties["UNIQ_KEY"]: r for r in delivered(a)}
        assert sorted(got) == ["U-DELAY", "U-PAST"]
        p = got["U-DELAY"].properties
        assert {
            "TIMER_DELAY_SEC",
            "TIMER_OUT_MS",
            "TIMER_ENQUEUE_MS",
            "TIMER_DEQUEUE_MS",
            "REAL_TOPIC",
            "REAL_QID",
        } <= set(p)
        assert (p["REAL_TOPIC"], p["REAL_QID"], p["TAGS"]) == (TOPIC, "0", "T")
        out = int(p["TIMER_OUT_MS"])
        assert out % 1000 == 0 and int(p["TIMER_DEQUEUE_MS"]) >= out + 1000  # the slot is read after it
        assert got["U-DELAY"].body() == b"body"
        # the timer topic has no topic config, as 5.1.1's
        assert w.topic_config(a, "rmq_sys_wheel_timer") is None
    finally:
        s.stop()


def test_sigkill_with_timers_pending(tmp_path: Path) -> None:
    s = start(tmp_path, "k")
    a = s.broker
    assert w.create_topic(a, TOPIC, 1).code == RS.SUCCESS
    keys = [f"K{i}" for i in range(20)]
    now = int(time.time() * 1000)
    answers = send_many(
        a, [{"UNIQ_KEY": k, "TIMER_DELIVER_MS": str(now + 1500 + 200 * i)} for i, k in enumerate(keys)]
    )
    assert all(r.code == RS.SUCCESS for r in answers)
    wait_until(lambda: len(delivered(a)) >= 1, 10, "the first timers")  # some delivered, some pending
    s.kill()
    again = ServeProcess(s.store, s.conf)
    again.start()
    try:
        wait_until(
            lambda: {r.properties["UNIQ_KEY"] for r in delivered(again.broker)} >= set(keys), 20, "all 20"
        )
    finally:
        again.stop()


def test_many_timers_bounded_in_order(tmp_path: Path) -> None:
    s = start(tmp_path, "m", timerMaxPending="100")
    try:
        a = s.broker
        assert w.create_topic(a, TOPIC, 1).code == RS.SUCCESS
        # due after the 2000 sends, which take 1-4 s, and over 8 s on a very loaded machine: one sent
        # after its time would be stored as an ordinary message, with no TIMER_OUT_MS
        base = int(time.time() * 1000) + 20000
        sent = [{"UNIQ_KEY": f"M{i}", "TIMER_DELIVER_MS": str(base + 1000 * (i // 500))} for i in range(2000)]
        assert all(r.code == RS.SUCCESS for r in send_many(a, sent))
        wait_until(lambda: len(delivered(a)) >= 2000, 60, "2000 timers")
        got = delivered(a)
        assert sorted(r.properties["UNIQ_KEY"] for r in got) == sorted(p["UNIQ_KEY"] for p in sent)
        outs = [int(r.properties["TIMER_OUT_MS"]) for r in got]
        assert outs == sorted(outs)  # in the order of their times
    finally:
        s.stop()
