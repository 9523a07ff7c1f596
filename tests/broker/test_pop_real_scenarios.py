"""More POP scenarios in ``rmq serve`` beside the real RocketMQ 5.1.1 broker (``../shared/rocketmq-5.1.1``),
each started once for the module: the same requests to both, at once, and per step the same answer
codes, remarks, header fields and messages (bodies, tags, queue ids, offsets, reconsume times).

Pop and revive times differ between any two runs: they are compared as "within a tolerance" or as
relations (the new pop time after a change is not older than the first), never as numbers. Which
queue a ``queueId -1`` POP starts with is random in both brokers: what is compared there is what
does not depend on it (how many messages, how many per queue, what is left).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support import popwire as w
from tests.support.realdiff import Pair, Seen, changed, pair, run_both, same, until

pytestmark = [pytest.mark.java, pytest.mark.java5]

# 5.1.1's send path adds these to every message it stores; rmq keeps 4.9.8's (test_timer_real_broker)
EVERY_SEND = {"MSG_REGION", "TRACE_ON"}
# s: an un-acked message back from the retry topic (timer + revive service, loaded machine)
REVIVE_WAIT = 45.0


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with pair(tmp_path_factory.mktemp("pop-real")) as p:
        yield p


def answer(resp: Any) -> tuple[int, str | None, list[str]]:
    return resp.code, resp.remark, sorted(resp.ext_fields)


def shown(msgs: list[w.Popped]) -> list[tuple[bytes, str | None, int, int, int]]:
    return [(m.body, m.rec.tags, m.rec.queue_id, m.rec.queue_offset, m.rec.reconsume_times) for m in msgs]


def offset_info(text: str) -> list[str]:
    return sorted(filter(None, text.split(";")))


# --- queueId -1 over four queues, maxMsgNums smaller than what they hold -------------------------
def committed(a: str, group: str, topic: str, queue: int) -> int:
    """The group's offset once one is committed (at most 10 s): 5.1.1 commits a POP's or an ack's
    offset after its answer (through its ck buffer), so a -1 read at once on a loaded machine
    means "not yet"; a -1 after 10 s is the answer."""
    until(lambda: w.query_offset(a, group, topic, queue) != -1, 10.0, 0.2)
    return w.query_offset(a, group, topic, queue)


def spread(a: str) -> Seen:
    seen: Seen = {}
    assert w.create_topic(a, "TopicSpread", 4).code == RS.SUCCESS
    for qid in range(4):
        for i in range(2):
            assert w.send(a, "TopicSpread", f"q{qid}-{i}".encode(), queue_id=qid).code == RS.SUCCESS
    until(lambda: all(len(w.pull_all(a, "TopicSpread", q)) == 2 for q in range(4)), 10)
    first = w.pop(a, "GSpread", "TopicSpread", num=5, invisible=60000)
    h = first.ext_fields
    msgs = w.popped(first, "TopicSpread", "GSpread")
    seen["pop5"] = answer(first)
    seen["pop5.count"] = len(msgs)
    per_queue: dict[int, list[int]] = {}
    for m in msgs:
        per_queue.setdefault(m.rec.queue_id, []).append(m.rec.queue_offset)
    # the queue the POP starts with is random: how many each queue gave, not which queue
    seen["pop5.per_queue"] = sorted(len(v) for v in per_queue.values())
    seen["pop5.offsets_from_0"] = all(sorted(v) == list(range(len(v))) for v in per_queue.values())
    seen["pop5.restNum"] = h["restNum"]
    seen["pop5.startOffsetInfo.entries"] = len(offset_info(h["startOffsetInfo"]))
    seen["pop5.msgOffsetInfo.entries"] = len(offset_info(h["msgOffsetInfo"]))
    seen["pop5.bodies_match_queues"] = all(m.body.startswith(f"q{m.rec.queue_id}-".encode()) for m in msgs)
    rest = w.pop(a, "GSpread", "TopicSpread", num=32, invisible=60000)
    more = w.popped(rest, "TopicSpread", "GSpread")
    seen["pop32"] = (answer(rest), rest.ext_fields["restNum"], len(more))
    everything = sorted(m.body for m in msgs + more)
    seen["all.bodies"] = everything
    empty = w.pop(a, "GSpread", "TopicSpread", num=32, invisible=60000)
    seen["pop.empty"] = (empty.code, empty.remark, empty.ext_fields.get("restNum"))
    seen["acks"] = sorted({w.ack(a, "GSpread", m).code for m in msgs + more})
    seen["offsets"] = [committed(a, "GSpread", "TopicSpread", q) for q in range(4)]
    return seen


def test_pop_any_queue_spreads_max_msg_nums_over_the_queues(brokers: Pair) -> None:
    same(*run_both(brokers, spread))


# --- a TAG expression that filters -----------------------------------------------------------------
def tags(a: str) -> Seen:
    seen: Seen = {}
    assert w.create_topic(a, "TopicTag", 1).code == RS.SUCCESS
    for i, tag in enumerate(["A", "B", "A", "C", "B"]):
        assert w.send(a, "TopicTag", f"t{i}{tag}".encode(), tags=tag).code == RS.SUCCESS
    w.dispatched(a, "TopicTag", 5)
    a_only = w.pop(a, "GTagA", "TopicTag", exp="A", invisible=60000)
    msgs = w.popped(a_only, "TopicTag", "GTagA")
    seen["pop.A"] = (
        *answer(a_only),
        a_only.ext_fields["restNum"],
        offset_info(a_only.ext_fields["msgOffsetInfo"]),
    )
    seen["pop.A.messages"] = shown(msgs)
    again = w.pop(a, "GTagA", "TopicTag", exp="A", invisible=60000)
    seen["pop.A.again"] = (again.code, again.remark, again.ext_fields.get("restNum"))
    seen["offset.A"] = committed(a, "GTagA", "TopicTag", 0)
    two = w.pop(a, "GTagBC", "TopicTag", exp="B || C", num=2, invisible=60000)
    bc = w.popped(two, "TopicTag", "GTagBC")
    seen["pop.B||C.2"] = (*answer(two), two.ext_fields["restNum"], shown(bc))
    seen["offset.B||C"] = committed(a, "GTagBC", "TopicTag", 0)
    nothing = w.pop(a, "GTagX", "TopicTag", exp="X", invisible=60000)
    seen["pop.X"] = (nothing.code, nothing.remark, nothing.ext_fields.get("restNum"))
    seen["offset.X"] = committed(a, "GTagX", "TopicTag", 0)
    seen["acks"] = [w.ack(a, "GTagA", m).code for m in msgs] + [w.ack(a, "GTagBC", m).code for m in bc]
    return seen


def test_pop_tag_expression_filters(brokers: Pair) -> None:
    same(*run_both(brokers, tags))


# --- change invisible time, then ack with the new handle / with the old one ----------------------
def change_then_ack(a: str) -> Seen:
    seen: Seen = {}
    w.filled(a, "TopicChg", [b"keep", b"acked"])
    first = w.pop(a, "GChg", "TopicChg", invisible=60000)
    keep, acked = w.popped(first, "TopicChg", "GChg")
    pop_time = int(first.ext_fields["popTime"])
    c_acked = w.change(a, "GChg", acked, 1000)
    c_keep = w.change(a, "GChg", keep, 1000)
    for name, resp in (("change.acked", c_acked), ("change.keep", c_keep)):
        h = resp.ext_fields
        seen[name] = (*answer(resp), h["invisibleTime"], h["reviveQid"] == first.ext_fields["reviveQid"])
        # times: the new pop time is now, so not before the first pop's and within a minute of it
        seen[name + ".popTime"] = 0 <= int(h["popTime"]) - pop_time < 60000
    new_acked = changed(acked, c_acked)
    seen["ack.new_handle"] = answer(w.ack(a, "GChg", new_acked))
    seen["ack.old_handle_after_change"] = answer(w.ack(a, "GChg", acked))
    seen["ack.old_handle.keep"] = answer(w.ack(a, "GChg", keep))  # the changed ck stays un-acked
    back = w.pop_until(a, "GChg", "TopicChg", 1, timeout=REVIVE_WAIT, invisible=60000)
    seen["back"] = [(m.body, m.rec.reconsume_times, m.real_topic) for m in back]
    # "acked" was acked with its new handle: nothing more comes back (a long poll of 3 s)
    seen["back.more"] = shown(w.pop_until(a, "GChg", "TopicChg", 1, timeout=3, invisible=60000))
    seen["ack.back"] = [answer(w.ack(a, "GChg", m)) for m in back]
    return seen


def test_change_invisible_time_then_ack_new_and_old_handles(brokers: Pair) -> None:
    same(*run_both(brokers, change_then_ack))


# --- invisible time running out: the message back from the retry topic ----------------------------
def expiry(a: str) -> Seen:
    seen: Seen = {}
    w.filled(a, "TopicExp", [b"e0", b"e1"])
    first = w.pop(a, "GExp", "TopicExp", invisible=2000)
    msgs = w.popped(first, "TopicExp", "GExp")
    seen["pop"] = (*answer(first), first.ext_fields["invisibleTime"], shown(msgs))
    seen["ack.e1"] = answer(w.ack(a, "GExp", msgs[1]))
    invisible = w.pop(a, "GExp", "TopicExp", invisible=2000)
    seen["pop.while_invisible"] = (invisible.code, invisible.remark)
    back = w.pop_until(a, "GExp", "TopicExp", 1, timeout=REVIVE_WAIT, invisible=60000)
    seen["back"] = [
        (m.body, m.rec.topic, m.real_topic, m.rec.reconsume_times, m.rec.tags, m.extra.split(" ")[4])
        for m in back
    ]
    seen["back.properties"] = [
        sorted(set(m.rec.properties) - {"POP_CK", "1ST_POP_TIME"} - EVERY_SEND) for m in back
    ]
    seen["back.1ST_POP_TIME"] = [
        m.rec.properties.get("1ST_POP_TIME") == first.ext_fields["popTime"] for m in back
    ]
    retry = w.topic_config(a, "%RETRY%GExp_TopicExp")
    seen["retry.topic"] = retry and (retry["readQueueNums"], retry["writeQueueNums"], retry["perm"])
    seen["ack.back"] = [answer(w.ack(a, "GExp", m)) for m in back]
    return seen


def test_invisible_time_expiring_brings_the_message_back_once_retried(brokers: Pair) -> None:
    same(*run_both(brokers, expiry))


# --- orderly POP: the queue blocked while its batch is un-acked -----------------------------------
def orderly(a: str) -> Seen:
    seen: Seen = {}
    w.filled(a, "TopicOrd", [f"o{i}".encode() for i in range(3)])
    first = w.pop(a, "GOrd", "TopicOrd", num=2, invisible=60000, order=True)
    h = first.ext_fields
    msgs = w.popped(first, "TopicOrd", "GOrd")
    seen["pop"] = (*answer(first), h["reviveQid"], h["restNum"], h.get("orderCountInfo"), shown(msgs))
    blocked = w.pop(a, "GOrd", "TopicOrd", num=2, invisible=60000, order=True)
    seen["pop.blocked"] = (blocked.code, blocked.remark, blocked.ext_fields.get("restNum"), blocked.body)
    seen["ack.0"] = answer(w.ack(a, "GOrd", msgs[0]))
    half = w.pop(a, "GOrd", "TopicOrd", num=2, invisible=60000, order=True)
    seen["pop.half_acked"] = (half.code, half.remark, half.ext_fields.get("restNum"), half.body)
    seen["ack.1"] = answer(w.ack(a, "GOrd", msgs[1]))
    seen["offset"] = committed(a, "GOrd", "TopicOrd", 0)
    nxt = w.pop(a, "GOrd", "TopicOrd", num=2, invisible=2000, order=True)
    last = w.popped(nxt, "TopicOrd", "GOrd")
    seen["pop.next"] = (*answer(nxt), nxt.ext_fields.get("orderCountInfo"), shown(last))

    # not acked within its 2 s: the same message again, its count one more
    def pop_found() -> Any:
        resp = w.pop(a, "GOrd", "TopicOrd", num=2, invisible=60000, order=True, poll=1000)
        return resp if resp.code == RS.SUCCESS else None

    again = until(pop_found, 30)
    seen["pop.again"] = again and (
        *answer(again),
        again.ext_fields.get("orderCountInfo"),
        shown(w.popped(again, "TopicOrd", "GOrd")),
    )
    if again:
        seen["ack.again"] = [answer(w.ack(a, "GOrd", m)) for m in w.popped(again, "TopicOrd", "GOrd")]
    seen["offset.end"] = committed(a, "GOrd", "TopicOrd", 0)
    return seen


def test_orderly_pop_blocks_its_queue_until_the_batch_is_acked(brokers: Pair) -> None:
    same(*run_both(brokers, orderly))


# --- PEEK and NOTIFICATION, empty and not --------------------------------------------------------
def peek_notify(a: str) -> Seen:
    seen: Seen = {}
    assert w.create_topic(a, "TopicPeek", 1).code == RS.SUCCESS
    info = {"consumerGroup": "GPeek", "topic": "TopicPeek", "queueId": 0}

    def peek() -> Any:
        resp = w.call(a, RC.PEEK_MESSAGE, {**info, "maxMsgNums": 4})
        return (*answer(resp), resp.ext_fields.get("restNum"), [r.body() for r in w.records(resp.body)])

    def notification(qid: int) -> Any:
        note = {**info, "queueId": qid, "pollTime": 300, "bornTime": int(time.time() * 1000)}
        resp = w.call(a, RC.NOTIFICATION, note)
        return (*answer(resp), resp.ext_fields.get("hasMsg"))

    seen["peek.empty"] = peek()
    seen["notification.empty.q0"] = notification(0)
    seen["notification.empty.any"] = notification(-1)
    assert w.send(a, "TopicPeek", b"p0").code == RS.SUCCESS
    assert w.send(a, "TopicPeek", b"p1").code == RS.SUCCESS
    w.dispatched(a, "TopicPeek", 2)
    seen["peek.two"] = peek()
    seen["peek.two.again"] = peek()  # a peek moves nothing
    seen["notification.two.q0"] = notification(0)
    seen["notification.two.any"] = notification(-1)
    popped = w.popped(w.pop(a, "GPeek", "TopicPeek", invisible=60000), "TopicPeek", "GPeek")
    seen["peek.after_pop"] = peek()
    seen["notification.after_pop"] = notification(0)
    seen["acks"] = [w.ack(a, "GPeek", m).code for m in popped]
    return seen


def test_peek_and_notification_on_empty_and_filled_queues(brokers: Pair) -> None:
    same(*run_both(brokers, peek_notify))


# --- a topic that does not exist, a group that may not consume -------------------------------------
def refused(a: str) -> Seen:
    seen: Seen = {}
    missing = w.pop(a, "GMiss", "TopicNotThere", invisible=60000)
    seen["pop.no_topic"] = missing.code
    seen["pop.no_topic.remark"] = missing.remark
    peek = w.call(a, RC.PEEK_MESSAGE, {"consumerGroup": "GMiss", "topic": "TopicNotThere", "queueId": 0,
                                       "maxMsgNums": 1})  # fmt: skip
    seen["peek.no_topic"] = peek.code
    seen["peek.no_topic.remark"] = peek.remark
    seen["topic.created"] = w.topic_config(a, "TopicNotThere") is not None
    w.filled(a, "TopicOff", [b"off"])
    group = {"groupName": "GOff", "consumeEnable": False}
    seen["group.update"] = w.call(
        a, RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json.dumps(group).encode()
    ).code
    off = w.pop(a, "GOff", "TopicOff", invisible=60000)
    seen["pop.consume_disabled"] = (off.code, off.remark)
    peek = w.call(a, RC.PEEK_MESSAGE, {"consumerGroup": "GOff", "topic": "TopicOff", "queueId": 0,
                                       "maxMsgNums": 1})  # fmt: skip
    seen["peek.consume_disabled"] = (peek.code, peek.remark)
    note = {"consumerGroup": "GOff", "topic": "TopicOff", "queueId": 0, "pollTime": 100,
            "bornTime": int(time.time() * 1000)}  # fmt: skip
    resp = w.call(a, RC.NOTIFICATION, note)
    seen["notification.consume_disabled"] = (resp.code, resp.remark)
    return seen


@pytest.fixture(scope="module")
def refusals(brokers: Pair) -> tuple[Seen, Seen]:
    return run_both(brokers, refused)


def test_pop_of_a_missing_topic_and_of_a_group_that_may_not_consume(refusals: tuple[Seen, Seen]) -> None:
    """Codes and remarks, TOPIC_NOT_EXIST's with 5.1.1's FAQ line (``FAQUrl.suggestTodo``)."""
    same(*refusals)
