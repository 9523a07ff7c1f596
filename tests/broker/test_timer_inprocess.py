"""The timer (``rmqcli.broker.timer``) on a ``BrokerController`` in this process: the put hook's
rules as 5.1.1's ``HookUtils.transformTimerMessage`` states them, and the delivery service holding
no more than its cap while 500 timers put through ``put_inner`` (the function POP's revive log
calls) all reach their queue in the order of their times, with the delivered prefix committed."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from formats import commitlog as fmt
from rmqcli.broker.timer import api as timer
from rmqcli.broker.timer import message as tm
from rmqcli.broker.timer.config import TimerConfig
from rmqcli.broker.timer.service import TIMER_GROUP, timer_service
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.store.write.messages import InnerMessage
from tests.support.controller import broker_controller

NOW = 1_795_691_341_055
CONFIG = TimerConfig()
ILLEGAL = [
    {"TIMER_DELAY_SEC": "259201"},
    {"TIMER_DELAY_SEC": "3s"},
    {"TIMER_DELIVER_MS": ""},
    {"TIMER_DELAY_MS": "99999999999999999999"},  # beyond a long: Long.parseLong throws
    {"TIMER_DEL_UNIQKEY": "U", "TIMER_DELIVER_MS": "1"},  # a cancel in the past
]


def timed(props: dict[str, str], sys_flag: int = 0) -> dict[str, str] | None:
    return tm.timed(props, "T", 3, sys_flag, CONFIG, NOW)


def test_the_put_hook_rules() -> None:
    out = timed({"TIMER_DELAY_SEC": "3"})
    assert out == {"TIMER_OUT_MS": "1795691344000", "REAL_TOPIC": "T", "REAL_QID": "3"}
    # precedence: DELAY_SEC, then DELAY_MS, then DELIVER_MS
    both = {"TIMER_DELAY_SEC": "3", "TIMER_DELAY_MS": "10000", "TIMER_DELIVER_MS": "1"}
    assert timed(both) == out
    assert timed({"TIMER_DELAY_MS": "10000", "TIMER_DELIVER_MS": "1"})["TIMER_OUT_MS"] == "1795691351000"
    # an exact multiple of the precision goes one unit earlier
    assert timed({"TIMER_DELIVER_MS": "1795691350000"})["TIMER_OUT_MS"] == "1795691349000"
    assert timed({"TIMER_DELIVER_MS": str(NOW)}) is None  # not after now: stored as sent
    assert timed({"TIMER_DELAY_SEC": "-5"}) is None
    assert timed({"TIMER_DELAY_SEC": "3", "TIMER_OUT_MS": "1"}) is None  # transformed once already
    assert timed({"TIMER_DELAY_SEC": "3"}, sys_flag=int(fmt.TransactionType.PREPARED)) is None
    assert timed({"TIMER_DELAY_SEC": "3"}, sys_flag=int(fmt.TransactionType.COMMIT)) is not None
    delayed = {"DELAY": "2", "TIMER_DELAY_SEC": "3", "TIMER_DELIVER_MS": "5", "K": "v"}
    assert timed(delayed) is None and delayed == {"DELAY": "2", "K": "v"}  # the 4.x level wins
    assert timed({"TIMER_DELAY_SEC": "259200"}) is not None
    for bad in ILLEGAL:
        with pytest.raises(tm.TimerRefusal) as refused:
            timed(bad)
        assert refused.value.code == RS.MESSAGE_ILLEGAL and "259200000ms" in refused.value.remark
    # no Java wrap-around: a delay that overflows a long is beyond the max delay, refused
    for huge in ({"TIMER_DELAY_SEC": str(2**62)}, {"TIMER_DELAY_MS": str(2**63 - 1)}):
        with pytest.raises(tm.TimerRefusal) as refused:
            timed(huge)
        assert refused.value.code == RS.MESSAGE_ILLEGAL
    with pytest.raises(tm.TimerRefusal) as off:
        tm.timed({"TIMER_DELAY_SEC": "3"}, "T", 0, 0, TimerConfig(wheel_enable=False), NOW)
    assert off.value.code == RS.SYSTEM_ERROR
    assert tm.due_ms(1795691344000, CONFIG) == 1795691345000  # read once the slot has passed


def test_the_service_holds_at_most_its_cap_and_delivers_in_order(tmp_path: Path) -> None:
    clock = [int(time.time() * 1000)]
    with broker_controller(tmp_path / "store", clock) as ctl:
        ctl.topics.put("TopicIn", 1, 1, 6)
        service = timer_service(ctl)
        service.cap = 50
        base = int(time.time() * 1000) + 1500
        host = ctl.writer.store_host
        for i in range(500):
            props = {"TAGS": "ck", "UNIQ_KEY": f"U{i}", "TIMER_DELIVER_MS": str(base + 250 * (i // 100))}
            inner = InnerMessage("TopicIn", 0, b"b", props, None, born_timestamp=clock[0], born_host=host,
                                 store_host=host)  # fmt: skip
            result = timer.put_inner(ctl, inner)
            assert (result.topic, result.queue_offset) == (timer.TIMER_TOPIC, i)
        assert ctl.store.max_offset("TopicIn", 0) == 0
        highest = 0

        async def run() -> None:
            nonlocal highest
            task = asyncio.create_task(timer.run(ctl))
            deadline = time.monotonic() + 20
            while service.delivered < 500 and time.monotonic() < deadline:
                highest = max(highest, len(service.heap))
                await asyncio.sleep(0.005)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

        asyncio.run(run())
        assert service.delivered == 500 and 0 < highest <= 50
        units = ctl.store.units("TopicIn", 0, 0, 1000)
        recs = [ctl.store.look_message(u.physical_offset) for u in units]
        assert sorted(r.properties["UNIQ_KEY"] for r in recs) == sorted(f"U{i}" for i in range(500))
        outs = [int(r.properties["TIMER_OUT_MS"]) for r in recs]
        assert outs == sorted(outs)
        assert ctl.offsets.query(TIMER_GROUP, timer.TIMER_TOPIC, 0) == 500
        assert timer.TIMER_TOPIC not in ctl.writer.config.topics
