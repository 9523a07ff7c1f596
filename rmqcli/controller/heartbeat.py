"""The controller's broker liveness table (5.1.1 ``DefaultBrokerHeartbeatManager``, controller.md
§3.7 and §2.4): one entry per ``(clusterName, brokerName, brokerId)``, kept by each controller for
itself and never replicated.

A heartbeat creates the entry (address and channel are taken from the first one only) or refreshes
it: the time, the timeout and the election priority always; the reported ``(epoch, maxOffset)``, and
the confirm offset with them, only when larger (a larger epoch, or the same epoch and a larger
offset), so a truncated broker keeps advertising its old position until its entry is re-created.
Missing values default to -1, the timeout to 10,000 ms, the priority to ``Integer.MAX_VALUE``. An
entry is alive while ``lastUpdateTimestamp + timeout >= now``; the scan removes the entries silent
for more than their timeout and reports them; a closed channel removes and reports its entry.
Time is the injected ``clock`` (milliseconds), so the table is pure bookkeeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

DEFAULT_TIMEOUT_MILLIS = 10_000
DEFAULT_ELECTION_PRIORITY = 2**31 - 1  # Integer.MAX_VALUE: lower wins
SCAN_FIRST_DELAY_MILLIS = 2_000  # then every scanNotActiveBrokerInterval (5,000 ms, §4.1)


def wall_millis() -> int:
    return time.time_ns() // 1_000_000


class BrokerIdentity(NamedTuple):
    """The table's key."""

    cluster_name: str | None
    broker_name: str
    broker_id: int | None


@dataclass
class BrokerLiveInfo:
    """One broker's last heartbeat as the controller keeps it."""

    broker_name: str
    broker_addr: str | None
    broker_id: int
    last_update_timestamp: int
    heartbeat_timeout_millis: int
    channel: Any = None
    epoch: int = -1
    max_offset: int = -1
    election_priority: int = DEFAULT_ELECTION_PRIORITY
    confirm_offset: int = 0  # a new entry does not take the first heartbeat's confirm offset


class HeartbeatTable:
    """``brokerLiveTable`` with the heartbeat, liveness, scan and channel-close rules."""

    def __init__(self, clock: Callable[[], int] = wall_millis):
        self.clock = clock
        self.table: dict[BrokerIdentity, BrokerLiveInfo] = {}

    def on_heartbeat(
        self,
        cluster_name: str | None,
        broker_name: str,
        broker_addr: str | None,
        broker_id: int | None,
        timeout_millis: int | None = None,
        channel: Any = None,
        epoch: int | None = None,
        max_offset: int | None = None,
        confirm_offset: int | None = None,
        election_priority: int | None = None,
    ) -> None:
        """Record a BROKER_HEARTBEAT (904); a heartbeat without ``broker_id`` is refused before it
        gets here (§2.4)."""
        key = BrokerIdentity(cluster_name, broker_name, broker_id)
        now = self.clock()
        real_epoch = -1 if epoch is None else epoch
        real_offset = -1 if max_offset is None else max_offset
        real_confirm = -1 if confirm_offset is None else confirm_offset
        real_timeout = DEFAULT_TIMEOUT_MILLIS if timeout_millis is None else timeout_millis
        priority = DEFAULT_ELECTION_PRIORITY if election_priority is None else election_priority
        prev = self.table.get(key)
        if prev is None:
            self.table[key] = BrokerLiveInfo(
                broker_name=broker_name,
                broker_addr=broker_addr,
                broker_id=-1 if broker_id is None else broker_id,
                last_update_timestamp=now,
                heartbeat_timeout_millis=real_timeout,
                channel=channel,
                epoch=real_epoch,
                max_offset=real_offset,
                election_priority=priority,
            )
            return
        prev.last_update_timestamp = now
        prev.heartbeat_timeout_millis = real_timeout
        prev.election_priority = priority
        if real_epoch > prev.epoch or (real_epoch == prev.epoch and real_offset > prev.max_offset):
            prev.epoch, prev.max_offset, prev.confirm_offset = real_epoch, real_offset, real_confirm

    def live_info(
        self, cluster_name: str | None, broker_name: str, broker_id: int | None
    ) -> BrokerLiveInfo | None:
        return self.table.get(BrokerIdentity(cluster_name, broker_name, broker_id))

    def is_active(self, cluster_name: str | None, broker_name: str, broker_id: int | None) -> bool:
        """``isBrokerActive``: an entry whose timeout has not passed (the boundary counts as alive)."""
        info = self.live_info(cluster_name, broker_name, broker_id)
        return info is not None and info.last_update_timestamp + info.heartbeat_timeout_millis >= self.clock()

    def scan_not_active(self) -> list[BrokerIdentity]:
        """``scanNotActiveBroker``: remove every entry silent for more than its timeout and return
        their keys, in table order, for the caller to close their channels and report them."""
        now = self.clock()
        gone = [
            k for k, v in self.table.items() if now - v.last_update_timestamp > v.heartbeat_timeout_millis
        ]
        for key in gone:
            del self.table[key]
        return gone

    def on_channel_close(self, channel: Any) -> BrokerIdentity | None:
        """A broker's connection closed, failed or went idle: remove the first entry holding that
        channel and return its key (to report inactive), None when no entry holds it."""
        for key, info in self.table.items():
            if info.channel is channel:
                del self.table[key]
                return key
        return None
