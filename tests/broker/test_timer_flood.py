"""Timers an attacker sends (issue 41), over remoting frames to ``rmq serve``: a flood of far-future
timers beyond ``timerMaxPending`` does not delay a due one (the far ones wait on disk, the server's
RSS read from /proc stays within a bound) and all of them are still there to deliver; a delay of
``Long.MAX`` ms or seconds is refused, not wrapped into the past; a cancel marker cancels only a
timer of its own topic with the key it names. In process: timers left on disk are all delivered, in
the order of their times."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rmqcli.broker.timer import api as timer
from rmqcli.broker.timer.service import TIMER_GROUP, timer_service
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.store.write.messages import InnerMessage
from tests.broker.test_timer_serve import TOPIC, delivered, send_many, start, tsend
from tests.support import popwire as w
from tests.support.controller import broker_controller
from tests.support.rss import rss_mib
from tests.support.serve import ServeProcess, wait_until

OTHER = "TopicTimerOther"
DAY_MS = 86_400_000


@contextmanager
def served(tmp_path: Path, name: str, **conf: str) -> Iterator[tuple[ServeProcess, str]]:
    """``rmq serve`` with ``TOPIC`` and ``OTHER``, and its broker address; stopped at the end."""
    s = start(tmp_path, name, **conf)
    try:
        for topic in (TOPIC, OTHER):
            assert w.create_topic(s.broker, topic, 1).code == RS.SUCCESS
        yield s, s.broker
    finally:
        s.stop()


def test_far_future_flood_does_not_delay_a_due_timer(tmp_path: Path) -> None:
    with served(tmp_path, "flood", timerMaxPending="2000") as (s, a):
        before = rss_mib(s)
        far = int(time.time() * 1000) + 2 * DAY_MS
        flood = [{"UNIQ_KEY": f"F{i}", "TIMER_DELIVER_MS": str(far + 1000 * (i % 600))} for i in range(2600)]
        assert all(r.code == RS.SUCCESS for r in send_many(a, flood))
        sent = time.monotonic()
        assert tsend(a, {"UNIQ_KEY": "DUE", "TIMER_DELAY_SEC": "3"}).code == RS.SUCCESS
        wait_until(lambda: len(delivered(a)) >= 1, 3 + 4, "the 3 s timer")
        took = time.monotonic() - sent
        assert [r.properties["UNIQ_KEY"] for r in delivered(a)] == ["DUE"] and took < 7
        assert rss_mib(s) - before < 32
        print(f"3 s timer after the flood: {took:.1f} s; RSS {before:.0f} -> {rss_mib(s):.0f} MiB")


def test_long_max_delays_are_refused(tmp_path: Path) -> None:
    with served(tmp_path, "max") as (_, a):
        for props in ({"TIMER_DELAY_MS": str(2**63 - 1)}, {"TIMER_DELAY_SEC": str(2**63 - 1)}):
            assert tsend(a, {"UNIQ_KEY": "WRAP", **props}).code == RS.MESSAGE_ILLEGAL
        time.sleep(1.5)
        assert delivered(a) == []  # not delivered at once


def test_a_cancel_marker_needs_the_topic_and_the_key(tmp_path: Path) -> None:
    with served(tmp_path, "cancel") as (_, a):
        at = str((int(time.time() * 1000) // 1000 + 3) * 1000 + 500)  # all in the same second
        for key in ("VICTIM", "BARE", "PREFIXED"):
            assert tsend(a, {"UNIQ_KEY": key, "TIMER_DELIVER_MS": at}).code == RS.SUCCESS
        markers = [
            (OTHER, "VICTIM"),  # another topic's marker: no effect
            (OTHER, f"{TOPIC}+VICTIM"),  # naming the victim's topic, sent to its own: no effect
            (TOPIC, "BARE"),  # 5.1.1's form
            (TOPIC, f"{TOPIC}+PREFIXED"),  # 5.2's form
        ]
        for i, (topic, key) in enumerate(markers):
            props = {"UNIQ_KEY": f"M{i}", "TIMER_DEL_UNIQKEY": key, "TIMER_DELIVER_MS": at}
            assert tsend(a, props, topic).code == RS.SUCCESS
        wait_until(lambda: delivered(a) != [], 10, "the timers' time")
        time.sleep(1.5)  # the cancelled ones would come in the same round
        assert [r.properties["UNIQ_KEY"] for r in delivered(a)] == ["VICTIM"]
        assert delivered(a, OTHER) == []  # markers are never delivered


def test_timers_left_on_disk_come_back_in_order_and_none_is_lost(tmp_path: Path) -> None:
    """In process, the clock driven by hand: 600 timers over 60 hours, at most 50 held; each due
    time's round delivers what is due, the rest read again from the timer queue as their time nears."""
    clock = [int(time.time() * 1000)]
    with broker_controller(tmp_path / "store", clock) as ctl:
        ctl.topics.put(TOPIC, 1, 1, 6)
        service = timer_service(ctl)
        service.cap = 50
        host = ctl.writer.store_host
        start_ms = clock[0] + 3_600_000
        dues = [start_ms + (i * 7919 % 600) * 360_000 for i in range(600)]  # shuffled, 6 min apart
        for i, due in enumerate(dues):
            props = {"UNIQ_KEY": f"U{i}", "TIMER_DELIVER_MS": str(due)}
            inner = InnerMessage(TOPIC, 0, b"b", props, None, born_timestamp=clock[0], born_host=host,
                                 store_host=host)  # fmt: skip
            timer.put_inner(ctl, inner)
        assert service.deliver_due(clock[0]) == 0 and len(service.heap) <= 50
        done = 0
        for now in sorted(set(dues)):
            done += service.deliver_due(now + 1000)
            assert len(service.heap) <= 50
        assert done == 600 and service.evictions > 0
        units = ctl.store.units(TOPIC, 0, 0, 1000)
        keys = [ctl.store.look_message(u.physical_offset).properties["UNIQ_KEY"] for u in units]
        assert keys == [f"U{i}" for i in sorted(range(600), key=lambda i: dues[i])]
        # timers 2 days (timerRollWindowSlot) or more ahead went back into the timer queue once
        rolled = sum(1 for due in dues if (due - 1) // 1000 * 1000 - clock[0] // 1000 * 1000 >= 172_800_000)
        assert rolled > 0 and ctl.offsets.query(TIMER_GROUP, timer.TIMER_TOPIC, 0) == 600 + rolled


def test_rolled_timers_sharing_one_slot_go_back_to_disk_and_a_due_one_is_held(tmp_path: Path) -> None:
    """In process, the clock still: more than ``cap`` timers 2 days and a few minutes ahead all roll
    into one window slot (one due time, a day ahead); they go back to disk, so that a timer due in
    3 s is held and delivered in time, and each of them is read again and rolled at the slot."""
    clock = [int(time.time() * 1000) // 1000 * 1000]
    with broker_controller(tmp_path / "store", clock) as ctl:
        ctl.topics.put(TOPIC, 1, 1, 6)
        service = timer_service(ctl)
        service.cap = 50
        host = ctl.writer.store_host

        def put(key: str, due: int) -> None:
            props = {"UNIQ_KEY": key, "TIMER_DELIVER_MS": str(due)}
            inner = InnerMessage(TOPIC, 0, b"b", props, None, born_timestamp=clock[0], born_host=host,
                                 store_host=host)  # fmt: skip
            timer.put_inner(ctl, inner)

        far = clock[0] + 2 * DAY_MS
        for i in range(120):
            put(f"F{i}", far + 1000 * (i % 60))
        put("DUE", clock[0] + 3000)
        assert service.deliver_due(clock[0]) == 0
        assert len(service.heap) <= 50 and service.evictions > 0
        assert service.deliver_due(clock[0] + 4000) == 1
        assert [ctl.store.look_message(u.physical_offset).properties["UNIQ_KEY"]
                for u in ctl.store.units(TOPIC, 0, 0, 10)] == ["DUE"]  # fmt: skip
        slot = clock[0] + DAY_MS  # the window's half: less than a third of a window was left after it
        assert service.deliver_due(slot + 1000) == 0  # the far timers read again and rolled
        units = ctl.store.units(timer.TIMER_TOPIC, 0, 0, 1000)
        keys = [ctl.store.look_message(u.physical_offset).properties["UNIQ_KEY"] for u in units]
        # put back once each; those exactly 2 days ahead (out - written is a window less 1 ms) were not rolled
        assert sorted(keys[121:]) == sorted(f"F{i}" for i in range(120) if i % 60)
        assert ctl.store.units(TOPIC, 0, 1, 10) == []
