"""The broker.conf keys of the timer (RocketMQ 5.1.1 ``MessageStoreConfig``).

The keys, their defaults and the ranges rmq takes are rows of ``rmqcli.conf.keys``:
``timerMaxDelaySec`` (259200 s: 3 days), ``timerPrecisionMs`` (1000 ms), ``timerWheelEnable``
(true), ``timerRollWindowSlot`` (172800 slots: a timer at least that many precision units ahead is
rolled, ``TimerMessageStore.doEnqueue``); and rmq's own ``timerMaxPending`` (100000: the timers
held in memory, ``service``).
``rmqcli.broker.config`` builds ``TimerConfig`` at start (a bad value stops it there) and keeps it
as ``BrokerConfig.timer``; this module does not import it back.
"""

from __future__ import annotations

from dataclasses import dataclass

from formats import timer as tfmt
from rmqcli.conf.keys import setting


@dataclass(frozen=True)
class TimerConfig:
    max_delay_sec: int = setting("timerMaxDelaySec")
    precision_ms: int = setting("timerPrecisionMs")
    wheel_enable: bool = setting("timerWheelEnable")
    max_pending: int = setting("timerMaxPending")
    roll_window_slot: int = setting("timerRollWindowSlot")

    @property
    def roll_window(self) -> int:
        """``timerRollWindowSlots``: the key, or ``slotsTotal - TIMER_BLANK_SLOTS`` when it is
        below 2 or above that (the ``TimerMessageStore`` constructor)."""
        most = tfmt.SLOTS_TOTAL - tfmt.TIMER_BLANK_SLOTS
        return most if not 2 <= self.roll_window_slot <= most else self.roll_window_slot
