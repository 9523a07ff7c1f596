"""The broker.conf keys of the timer (RocketMQ 5.1.1 ``MessageStoreConfig``).

Read from the file as given (``BrokerConfig.given``), so that ``rmqcli.broker.config`` needs no
field per key: ``timerMaxDelaySec`` (259200 s: 3 days), ``timerPrecisionMs`` (1000 ms),
``timerWheelEnable`` (true); and rmq's own ``timerMaxPending`` (100000: the timers held in memory,
``service``). A value that does not parse or lies outside the range below is refused at start
(``givenkeys``). ``timer_config`` takes that mapping, not the ``BrokerConfig``:
``rmqcli.broker.config`` calls it at start to refuse a bad value, so this module does not import
it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rmqcli.broker.givenkeys import given_bool, given_int

MAX_DELAY_SEC_LIMIT = 10 * 365 * 86400
PROPERTY_NAMES = ("timerMaxDelaySec", "timerPrecisionMs", "timerWheelEnable", "timerMaxPending")


@dataclass(frozen=True)
class TimerConfig:
    max_delay_sec: int = 259_200
    precision_ms: int = 1000
    wheel_enable: bool = True
    max_pending: int = 100_000


def timer_config(given: Mapping[str, str]) -> TimerConfig:
    """The keys from ``given``, broker.conf as read (``dict(BrokerConfig.given)``)."""
    return TimerConfig(
        max_delay_sec=given_int(given, "timerMaxDelaySec", 259_200, 1, MAX_DELAY_SEC_LIMIT),
        precision_ms=given_int(given, "timerPrecisionMs", 1000, 10, 3_600_000),
        max_pending=given_int(given, "timerMaxPending", 100_000, 1, 10_000_000),
        wheel_enable=given_bool(given, "timerWheelEnable", True),
    )
