"""``ScheduleService`` in process over a real store: due units are delivered in order, a unit whose
time lies further ahead than its level's delay counts as due (``correctDeliverTimestamp``), a record
that cannot be delivered is skipped, and offsets start inside the queue (``correctDelayOffset``)."""

from __future__ import annotations

from pathlib import Path

from formats import commitlog as fmt
from rmqcli.broker.controller import BrokerController
from rmqcli.store.write.messages import InnerMessage, Message
from tests.support.controller import broker_controller

T0 = 1_800_000_000_000


def delayed(ctl: BrokerController, key: str, level: int) -> None:
    ctl.store.put(Message("TopicS", 1, key.encode(), {"KEYS": key, "DELAY": str(level)}))


def keys_in(ctl: BrokerController, topic: str, queue_id: int) -> list[str]:
    units = ctl.store.units(topic, queue_id, 0, 100)
    return [ctl.store.look_message(u.physical_offset).properties["KEYS"] for u in units]  # type: ignore[union-attr]


def test_due_units_are_delivered_in_order(tmp_path: Path) -> None:
    clock = [T0]
    with broker_controller(tmp_path / "store", clock) as ctl:
        delayed(ctl, "a", 2)  # 5 s
        clock[0] += 1000
        delayed(ctl, "b", 2)
        delayed(ctl, "c", 1)  # 1 s
        service = ctl.schedule
        assert service.deliver_due(now=T0 + 1500) == 0
        assert service.deliver_due(now=T0 + 2000) == 1  # c
        assert keys_in(ctl, "TopicS", 1) == ["c"]
        assert service.deliver_due(now=T0 + 5000) == 1  # a; b is due at T0 + 6000
        assert service.deliver_due(now=T0 + 6000) == 1
        assert keys_in(ctl, "TopicS", 1) == ["c", "a", "b"]
        assert service.offsets == {1: 1, 2: 2} and service.changed
        assert service.deliver_due(now=T0 + 99_000) == 0


def test_a_delivery_time_beyond_the_levels_delay_counts_as_now(tmp_path: Path) -> None:
    clock = [T0 + 60_000]  # stored "in the future": the broker's clock went back since
    with broker_controller(tmp_path / "store", clock) as ctl:
        delayed(ctl, "future", 1)
        assert ctl.schedule.deliver_due(now=T0) == 1


def test_a_record_with_a_bad_real_queue_id_is_skipped(tmp_path: Path) -> None:
    clock = [T0]
    with broker_controller(tmp_path / "store", clock) as ctl:
        props = {"KEYS": "bad", "REAL_TOPIC": "TopicS", "REAL_QID": "x", "DELAY": "1"}
        text = fmt.encode_properties_as_broker(props)
        del props["DELAY"]  # the map decides the store's delay handling; the string keeps DELAY
        ctl.store.put_inner(InnerMessage(fmt.SCHEDULE_TOPIC, 0, b"bad", props, text))
        delayed(ctl, "good", 1)
        assert ctl.schedule.deliver_due(now=T0 + 1000) == 1
        assert keys_in(ctl, "TopicS", 1) == ["good"]
        assert ctl.schedule.offsets == {1: 2}


def test_offsets_outside_the_queue_are_corrected(tmp_path: Path) -> None:
    clock = [T0]
    with broker_controller(tmp_path / "store", clock) as ctl:
        delayed(ctl, "a", 1)
        ctl.writer.config.delay_offsets.update({1: 7, 3: 2})  # level 3 has no queue: left alone
        ctl.schedule.correct_offsets()
        assert ctl.schedule.offsets == {1: 1, 3: 2}
        assert ctl.schedule.deliver_due(now=T0 + 5000) == 0  # offset 1 is the end of the queue
