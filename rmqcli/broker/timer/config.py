"""The broker.conf keys of the timer (RocketMQ 5.1.1 ``MessageStoreConfig``).

Read from the file as given (``BrokerConfig.given``), so that ``rmqcli.broker.config`` needs no
field per key: ``timerMaxDelaySec`` (259200 s: 3 days), ``timerPrecisionMs`` (1000 ms),
``timerWheelEnable`` (true); and rmq's own ``timerMaxPending`` (100000: the timers held in memory,
``service``). A number that does not parse keeps the default; values are clamped to
sane ranges.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqcli.broker.config import BrokerConfig

MAX_DELAY_SEC_LIMIT = 10 * 365 * 86400


@dataclass(frozen=True)
class TimerConfig:
    max_delay_sec: int = 259_200
    precision_ms: int = 1000
    wheel_enable: bool = True
    max_pending: int = 100_000


def _int(given: dict[str, str], key: str, default: int, low: int, high: int) -> int:
    raw = given.get(key)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        return default
    return min(max(value, low), high)


def timer_config(config: BrokerConfig) -> TimerConfig:
    given = dict(config.given)
    return TimerConfig(
        max_delay_sec=_int(given, "timerMaxDelaySec", 259_200, 1, MAX_DELAY_SEC_LIMIT),
        precision_ms=_int(given, "timerPrecisionMs", 1000, 10, 3_600_000),
        max_pending=_int(given, "timerMaxPending", 100_000, 1, 10_000_000),
        wheel_enable=given.get("timerWheelEnable", "true").strip().lower() == "true",
    )
