"""The in-process POP API (what the gRPC layer calls; ``rmqcli.broker.pop`` docstring) on a
``BrokerController`` in this process, without sockets: pop, ack, change invisible time, revive
rounds at a chosen time, a restarted revive service, a held pop woken by a put, and a malformed
ck in the revive topic."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from formats.records import decode_record
from rmqcli.broker.controller import BrokerController
from rmqcli.broker.pop import ack as pop_ack
from rmqcli.broker.pop import constants as k
from rmqcli.broker.pop import pop as pop_mod
from rmqcli.broker.pop.checkpoint import PopCheckPoint
from rmqcli.broker.pop.revive import ReviveService
from rmqcli.broker.pop.service import pop_service
from rmqcli.broker.timer.service import timer_service
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.store.write.messages import Message
from tests.support.controller import broker_controller

TOPIC, GROUP = "TopicIn", "GIn"
REVIVE = "rmq_sys_REVIVE_LOG_DefaultCluster"


@pytest.fixture
def ctl(tmp_path: Path) -> Iterator[BrokerController]:
    clock = [int(time.time() * 1000) - 60_000]  # stored a minute ago
    with broker_controller(tmp_path / "store", clock) as controller:
        controller.topics.put(TOPIC, 1, 1, 6)
        for i in range(3):
            controller.store.put(Message(TOPIC, 0, f"m{i}".encode(), {"TAGS": "T", "UNIQ_KEY": f"U{i}"}))
        yield controller


def handle(res: pop_mod.PopResult, index: int, broker: str = "broker-a") -> tuple[str, str, int]:
    """(extra info, real topic, queue offset) of the ``index``-th message, as a client builds it."""
    rec = decode_record(res.records[index], 0, len(res.records[index]))
    if k.PROPERTY_POP_CK in rec.properties:
        return rec.properties[k.PROPERTY_POP_CK], k.pop_retry_topic(TOPIC, GROUP), rec.queue_offset
    start = int(res.start_offset_info.split(" ")[2])
    extra = k.build_extra_info(
        start, res.pop_time, res.invisible_time, res.revive_qid, TOPIC, broker, 0, rec.queue_offset
    )
    return extra, TOPIC, rec.queue_offset


def revive_at(ctl: BrokerController, revive: ReviveService, now: int) -> int:
    """The timer's deliveries due by ``now`` (cks and acks reach the revive queue), then a revive
    round at ``now``: how many messages it revived."""
    timer_service(ctl).deliver_due(now)
    return revive.round(now=now)


def request(**kw: object) -> pop_mod.PopRequest:
    return pop_mod.PopRequest(**{"group": GROUP, "topic": TOPIC, "queue_id": -1, "max_msg_nums": 32,
                                 "invisible_time": 5000, **kw})  # type: ignore[arg-type]  # fmt: skip


def test_pop_ack_and_revive_in_process(ctl: BrokerController) -> None:
    res = pop_mod.pop_once(ctl, request())
    assert res.code == RS.SUCCESS and len(res.records) == 3
    assert res.offsets == [(False, 0, 0), (False, 0, 1), (False, 0, 2)]
    extra, topic, offset = handle(res, 0)
    receipt = k.parse_extra_info(res.handle(0, "broker-a"))  # the proxy's 9 fields
    assert receipt.encode().startswith(extra + " ") and receipt.commit_log_offset is not None
    assert receipt.commit_log_offset == decode_record(res.records[0], 0, len(res.records[0])).physical_offset
    pop_ack.ack_message(ctl, pop_ack.AckRequest(GROUP, topic, 0, extra, offset))
    svc = pop_service(ctl)
    # the ck waits in the timer until 1 s before its revive time, then 2 s more for its acks
    assert revive_at(ctl, svc.revive, res.pop_time + 4000) == 0  # not due yet
    assert revive_at(ctl, svc.revive, res.pop_time + 7001) == 2
    again = pop_mod.pop_once(ctl, request())
    assert [decode_record(r, 0, len(r)).body() for r in again.records] == [b"m1", b"m2"]
    assert all(retry for retry, _, _ in again.offsets)
    rec = decode_record(again.records[0], 0, len(again.records[0]))
    assert rec.topic == TOPIC and rec.reconsume_times == 1
    retried = k.parse_extra_info(again.handle(0, "broker-a"))
    assert retried.retry and retried.real_topic(TOPIC, GROUP) == k.pop_retry_topic(TOPIC, GROUP)
    # change invisible time: a new ck for the message, due at the new time
    extra, topic, offset = handle(again, 0)
    changed = pop_ack.change_invisible_time(
        ctl, pop_ack.ChangeInvisibleRequest(GROUP, topic, 0, extra, offset, invisible_time=100)
    )
    assert changed.invisible_time == 100 and changed.revive_qid == again.revive_qid
    extra2, topic2, offset2 = handle(again, 1)
    pop_ack.ack_message(ctl, pop_ack.AckRequest(GROUP, topic2, 0, extra2, offset2))
    # the changed ck's time has passed: stored in the revive queue at once, revived 2 s after it
    assert revive_at(ctl, svc.revive, changed.pop_time + 101) == 0
    assert revive_at(ctl, svc.revive, changed.pop_time + 2101) == 1  # the changed one only
    assert revive_at(ctl, svc.revive, again.pop_time + 7001) == 0  # the old ck: acked by the change
    # a fresh revive service (a restart) starts from the committed offsets: nothing twice
    fresh = ReviveService(ctl, svc)
    assert revive_at(ctl, fresh, again.pop_time + 60_000) == 0


def test_refusals_are_pop_errors(ctl: BrokerController) -> None:
    with pytest.raises(pop_mod.PopError) as err:
        pop_mod.pop_once(ctl, request(topic="NoSuchTopic"))
    assert err.value.code == RS.TOPIC_NOT_EXIST
    with pytest.raises(pop_mod.PopError) as err:
        pop_ack.ack_message(ctl, pop_ack.AckRequest(GROUP, TOPIC, 0, "1 2 3", 0))
    assert err.value.code == RS.MESSAGE_ILLEGAL


def test_a_held_pop_is_woken_by_a_put(ctl: BrokerController) -> None:
    pop_mod.pop_once(ctl, request())  # everything popped

    async def go() -> pop_mod.PopResult:
        held = asyncio.ensure_future(pop_mod.pop_message(ctl, request(poll_time=5000)))
        await asyncio.sleep(0.2)
        assert not held.done() and pop_service(ctl).polling.count(TOPIC, GROUP, -1) == 1
        ctl.store.put(Message(TOPIC, 0, b"late", {"TAGS": "T"}))
        return await asyncio.wait_for(held, 3)

    res = asyncio.run(go())
    assert res.code == RS.SUCCESS and len(res.records) == 1


def test_a_malformed_ck_is_skipped(ctl: BrokerController) -> None:
    for body in (
        b"not json",
        b'{"n": 500}',
        b'{"so":0,"pt":1,"it":1,"n":1,"q":0,"t":"TopicIn","c":"GIn","d":[9,9]}',
    ):
        ctl.store.put(Message(REVIVE, 0, body, {"TAGS": "ck"}))
    ctl.store.put(Message(REVIVE, 0, b"[]", {"TAGS": "ack"}))
    svc = pop_service(ctl)
    assert svc.revive.round() == 0
    assert ctl.offsets.query(k.REVIVE_GROUP, REVIVE, 0) == 3  # past all four


def test_a_ck_delivered_by_a_timer_waits_for_its_acks(ctl: BrokerController) -> None:
    """A ck the timer delivered (TIMER_DEQUEUE_MS set): revived 2 s after its time, not before."""
    svc = pop_service(ctl)
    pop_time = int(time.time() * 1000)
    ck = PopCheckPoint(0, pop_time, 1000, 1, 0, TOPIC, GROUP, "broker-a", diff=[0])
    props = {"TAGS": "ck", "TIMER_DEQUEUE_MS": str(pop_time + 900), "REAL_TOPIC": REVIVE, "REAL_QID": "0"}
    host = ctl.writer.store_host  # the broker's own put: born host = store host
    ctl.store.put(Message(REVIVE, 0, ck.to_json().encode(), props, born_host=host, store_host=host))
    assert svc.revive.round(now=pop_time + 1001) == 0
    assert svc.revive.round(now=pop_time + 3001) == 1


def test_a_ck_a_client_sent_is_ignored(ctl: BrokerController) -> None:
    svc = pop_service(ctl)
    pop_time = int(time.time() * 1000)
    ck = PopCheckPoint(0, pop_time, 1000, 1, 0, TOPIC, GROUP, "broker-a", diff=[0])
    ctl.store.put(Message(REVIVE, 0, ck.to_json().encode(), {"TAGS": "ck"}))  # born at a client's address
    assert svc.revive.round(now=pop_time + 5000) == 0
    assert ctl.offsets.query(k.REVIVE_GROUP, REVIVE, 0) == 0
