"""POP in ``rmq serve`` beside the real RocketMQ 5.1.1 broker (``../shared/rocketmq-5.1.1``): the same
requests to both, the same answer codes, remarks and header fields, and the same ck / ack messages
in the revive topic (body keys, values but times, properties but the timer's own), then the same
redelivery from ``%RETRY%<group>_<topic>`` (research notes issue21 §7).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support import popwire as w
from tests.support.oracle5 import real_cluster5
from tests.support.serve import ServeProcess, write_conf

pytestmark = [pytest.mark.java, pytest.mark.java5]

REVIVE = "rmq_sys_REVIVE_LOG_DefaultCluster"
TIMER_ONLY = {
    "REAL_TOPIC",
    "REAL_QID",
    "TIMER_OUT_MS",
    "TIMER_ENQUEUE_MS",
    "TIMER_DEQUEUE_MS",
    "TIMER_ROLL_TIMES",
}
TIMES = {"pt", "reviveTime"}


def answer(resp: Any) -> tuple[int, str | None, list[str]]:
    return resp.code, resp.remark, sorted(resp.ext_fields)


def scenario(a: str) -> dict[str, Any]:
    """The same requests to one broker; what each answered."""
    seen: dict[str, Any] = {}
    w.filled(a, "TopicP", [f"body{i}".encode() for i in range(3)])
    info = {"consumerGroup": "GP", "topic": "TopicP", "queueId": 0}
    peek = w.call(a, RC.PEEK_MESSAGE, {**info, "maxMsgNums": 2})
    seen["peek.before"] = (*answer(peek), peek.ext_fields.get("restNum"), len(w.records(peek.body)))
    note = {**info, "queueId": -1, "pollTime": 100, "bornTime": int(time.time() * 1000)}
    has = w.call(a, RC.NOTIFICATION, note)
    seen["notification.before"] = (*answer(has), has.ext_fields)
    resp = w.pop(a, "GP", "TopicP", invisible=3000)
    seen["pop"] = answer(resp)
    h = resp.ext_fields
    seen["pop.fields"] = (h["invisibleTime"], h["restNum"], h["startOffsetInfo"], h["msgOffsetInfo"])
    msgs = w.popped(resp, "TopicP", "GP")
    seen["pop.messages"] = [(m.body, m.rec.reconsume_times, "POP_CK" in m.rec.properties) for m in msgs]
    seen["ack"] = answer(w.ack(a, "GP", msgs[1]))
    seen["ack.again"] = answer(w.ack(a, "GP", msgs[1]))
    again = w.pop(a, "GP", "TopicP", invisible=3000)
    seen["pop.again"] = answer(again)
    seen["pop.again.fields"] = (again.ext_fields["startOffsetInfo"], again.ext_fields["msgOffsetInfo"])
    change = w.change(a, "GP", msgs[2], 1000)
    seen["change"] = answer(change)
    seen["change.fields"] = (
        change.ext_fields["invisibleTime"],
        change.ext_fields["reviveQid"] == h["reviveQid"],
    )
    seen["polling_info"] = (
        *answer(w.call(a, RC.POLLING_INFO, info)),
        w.call(a, RC.POLLING_INFO, info).ext_fields,
    )
    peek = w.call(a, RC.PEEK_MESSAGE, {**info, "maxMsgNums": 4})
    seen["peek"] = (peek.code, peek.remark, peek.ext_fields.get("restNum"))
    note = {**info, "queueId": -1, "pollTime": 100, "bornTime": int(time.time() * 1000)}
    seen["notification"] = (*answer(w.call(a, RC.NOTIFICATION, note)),)
    base = {"consumerGroup": "GP", "topic": "TopicP", "queueId": 0, "extraInfo": msgs[0].extra, "offset": 0}
    seen["ack.no_topic"] = w.call(a, RC.ACK_MESSAGE, {**base, "topic": "NoSuchTopic"}).code
    seen["ack.bad_queue"] = w.call(a, RC.ACK_MESSAGE, {**base, "queueId": 5}).code
    seen["ack.bad_offset"] = w.call(a, RC.ACK_MESSAGE, {**base, "offset": 99}).code
    # refusals, answered before any polling: a poll time keeps a loaded machine's delay from turning
    # them into POLLING_TIMEOUT ("timeout too much": 500 ms past bornTime + pollTime, checked first)
    seen["pop.33"] = w.pop(a, "GP", "TopicP", num=33, poll=10_000).code
    seen["pop.no_topic"] = w.pop(a, "GP", "NoSuchTopic", poll=10_000).code
    seen["pop.bad_queue"] = w.pop(a, "GP", "TopicP", queue_id=7, poll=10_000).code
    orderly(a, seen)
    back = w.pop_until(a, "GP", "TopicP", 2, timeout=30, invisible=3000)
    seen["revived"] = sorted(
        (
            m.body,
            m.rec.topic,
            m.rec.reconsume_times,
            m.extra.split(" ")[4],
            "1ST_POP_TIME" in m.rec.properties,
        )
        for m in back
    )
    retry = w.topic_config(a, "%RETRY%GP_TopicP")
    seen["retry.topic"] = retry and (retry["readQueueNums"], retry["writeQueueNums"], retry["perm"])
    for m in back:
        assert w.ack(a, "GP", m).code == RS.SUCCESS
    seen["revive"] = revive_messages(a, int(h["popTime"]))
    return seen


def orderly(a: str, seen: dict[str, Any]) -> None:
    """Orderly POP: no ck, the queue blocked until its batch is acked, then the next offset."""
    w.filled(a, "TopicO", [f"o{i}".encode() for i in range(3)])
    first = w.pop(a, "GO", "TopicO", invisible=30000, order=True)
    h = first.ext_fields
    seen["order.pop"] = (*answer(first), h["reviveQid"], h["orderCountInfo"], h["msgOffsetInfo"])
    blocked = w.pop(a, "GO", "TopicO", invisible=30000, order=True)
    seen["order.blocked"] = (*answer(blocked), blocked.ext_fields["restNum"])
    msgs = w.popped(first, "TopicO", "GO")
    seen["order.ack02"] = [answer(w.ack(a, "GO", msgs[i])) for i in (0, 2)]
    still = w.pop(a, "GO", "TopicO", invisible=30000, order=True)
    seen["order.still"] = (*answer(still), still.ext_fields["restNum"])
    seen["order.ack1"] = answer(w.ack(a, "GO", msgs[1]))
    seen["order.offset"] = w.query_offset(a, "GO", "TopicO", 0)
    assert w.send(a, "TopicO", b"o3").code == RS.SUCCESS
    w.dispatched(a, "TopicO", 4)
    nxt = w.pop(a, "GO", "TopicO", invisible=30000, order=True)
    seen["order.next"] = (*answer(nxt), nxt.ext_fields["msgOffsetInfo"], nxt.ext_fields["orderCountInfo"])
    change = w.change(a, "GO", w.popped(nxt, "TopicO", "GO")[0], 1000)
    seen["order.change"] = (*answer(change), change.ext_fields["reviveQid"])


def revive_messages(a: str, pop_time: int) -> list[tuple[str, list[str], dict[str, Any], list[str], str]]:
    """The group's ck and ack messages of the first pop: tag, body keys in order, body values but
    times, property keys but the timer's, UNIQ_KEY with the pop time taken out."""
    out = []
    for qid in range(8):
        for rec in w.pull_all(a, REVIVE, qid):
            body = json.loads(rec.body())
            if body.get("c") != "GP" or body.get("pt") != pop_time:
                continue
            values = {k: v for k, v in body.items() if k not in TIMES}
            props = sorted(set(rec.properties) - TIMER_ONLY)
            uniq = rec.properties["UNIQ_KEY"].replace(str(pop_time), "<pt>")
            out.append((rec.tags or "", list(body), values, props, uniq))
    return sorted(out, key=lambda x: (x[0], x[4]))


def test_pop_answers_and_revive_messages_match_the_real_broker(tmp_path: Path) -> None:
    (tmp_path / "rmq").mkdir()
    with ServeProcess(tmp_path / "rmq" / "store", write_conf(tmp_path / "broker.conf")) as server:
        ours = scenario(server.broker)
    home = tmp_path / "real"
    home.mkdir()
    with real_cluster5(home) as real:
        theirs = scenario(real.broker)
    assert ours["revive"], "no ck found in rmq's revive topic"
    differ = {key: (ours.get(key), theirs[key]) for key in theirs if ours.get(key) != theirs[key]}
    assert differ == {}
