"""The broker.conf keys of the timer (RocketMQ 5.1.1 ``MessageStoreConfig``).

The keys, their defaults and the ranges rmq takes are rows of ``rmqcli.conf.keys``:
``timerMaxDelaySec`` (259200 s: 3 days), ``timerPrecisionMs`` (1000 ms), ``timerWheelEnable``
(true); and rmq's own ``timerMaxPending`` (100000: the timers held in memory, ``service``).
``rmqcli.broker.config`` builds ``TimerConfig`` at start (a bad value stops it there) and keeps it
as ``BrokerConfig.timer``; this module does not import it back.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqcli.conf.keys import setting


@dataclass(frozen=True)
class TimerConfig:
    max_delay_sec: int = setting("timerMaxDelaySec")
    precision_ms: int = setting("timerPrecisionMs")
    wheel_enable: bool = setting("timerWheelEnable")
    max_pending: int = setting("timerMaxPending")
