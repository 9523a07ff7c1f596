"""The controller's liveness table (controller.md §3.7) on an injected clock."""

from __future__ import annotations

from rmqcli.controller.heartbeat import BrokerIdentity, HeartbeatTable


class Clock:
    def __init__(self, now: int = 1_000_000):
        self.now = now

    def __call__(self) -> int:
        return self.now


def test_defaults_and_timeout_boundary() -> None:
    clock = Clock()
    t = HeartbeatTable(clock)
    t.on_heartbeat("c", "broker-a", "10.0.0.1:10911", 1)
    info = t.live_info("c", "broker-a", 1)
    assert info is not None
    assert (info.epoch, info.max_offset, info.heartbeat_timeout_millis, info.election_priority) == (
        -1,
        -1,
        10_000,
        2147483647,
    )
    clock.now += 10_000
    assert t.is_active("c", "broker-a", 1)  # last + timeout >= now
    clock.now += 1
    assert not t.is_active("c", "broker-a", 1)
    assert not t.is_active("other-cluster", "broker-a", 1)  # keyed by cluster too


def test_position_only_grows() -> None:
    clock = Clock()
    t = HeartbeatTable(clock)
    t.on_heartbeat("c", "b", "a:1", 2, epoch=3, max_offset=500, confirm_offset=400, election_priority=5)
    info = t.live_info("c", "b", 2)
    assert info is not None and info.confirm_offset == 0  # a new entry ignores the confirm offset
    t.on_heartbeat("c", "b", "a:1", 2, epoch=3, max_offset=200, confirm_offset=150, election_priority=1)
    assert (info.epoch, info.max_offset, info.confirm_offset, info.election_priority) == (3, 500, 0, 1)
    t.on_heartbeat("c", "b", "a:1", 2, epoch=3, max_offset=600, confirm_offset=550)
    assert (info.epoch, info.max_offset, info.confirm_offset) == (3, 600, 550)
    assert info.election_priority == 2147483647  # a missing priority resets to the default
    t.on_heartbeat("c", "b", "a:1", 2, epoch=4, max_offset=10, confirm_offset=10)
    assert (info.epoch, info.max_offset) == (4, 10)
    t.on_heartbeat("c", "b", "a:9", 2, epoch=2, max_offset=10**9, timeout_millis=3000)
    assert (info.epoch, info.max_offset, info.heartbeat_timeout_millis, info.broker_addr) == (
        4,
        10,
        3000,
        "a:1",
    )


def test_scan_removes_silent_entries() -> None:
    clock = Clock()
    t = HeartbeatTable(clock)
    t.on_heartbeat("c", "b", "a:1", 1, timeout_millis=3000)
    clock.now += 2000
    t.on_heartbeat("c", "b", "a:2", 2, timeout_millis=3000)
    clock.now += 1000
    assert t.scan_not_active() == []  # 1 is exactly at its timeout: kept
    clock.now += 1
    assert t.scan_not_active() == [BrokerIdentity("c", "b", 1)]
    assert t.live_info("c", "b", 1) is None and t.live_info("c", "b", 2) is not None


def test_channel_close_removes_its_entry() -> None:
    t = HeartbeatTable(Clock())
    ch1, ch2 = object(), object()
    t.on_heartbeat("c", "b", "a:1", 1, channel=ch1)
    t.on_heartbeat("c", "b", "a:2", 2, channel=ch2)
    t.on_heartbeat("c", "b", "a:1", 1, channel=object())  # the first channel stays recorded
    assert t.on_channel_close(ch1) == BrokerIdentity("c", "b", 1)
    assert not t.is_active("c", "b", 1) and t.is_active("c", "b", 2)
    assert t.on_channel_close(ch1) is None
