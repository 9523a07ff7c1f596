"""The broker.conf keys of POP (RocketMQ 5.1.1 ``BrokerConfig``; research notes issue21 §2).

Read from the file as given (``BrokerConfig.given``), so that ``rmqcli.broker.config`` needs no
field per key: ``reviveQueueNum`` (8), ``reviveInterval`` (1000 ms), ``popPollingSize`` (1024
requests held per ``topic@group@queueId``), ``maxPopPollingSize`` (100000 held in all). A value
that does not parse or lies outside the range below is refused at start (``givenkeys``).
``pop_config`` takes that mapping, not the ``BrokerConfig``: ``rmqcli.broker.config`` calls it at
start to refuse a bad value, so this module does not import it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rmqcli.broker.givenkeys import given_int

MAX_REVIVE_QUEUES = 64
# broker.conf keys of POP (timerMaxDelaySec is the timer's, also read here)
PROPERTY_NAMES = ("reviveQueueNum", "reviveInterval", "popPollingSize", "maxPopPollingSize")


@dataclass(frozen=True)
class PopConfig:
    revive_queue_num: int = 8
    revive_interval_ms: int = 1000
    pop_polling_size: int = 1024
    max_pop_polling_size: int = 100000
    max_poll_ms: int = 120_000  # rmq's own: no request is held longer, whatever its pollTime says
    max_invisible_ms: int = 259_200_000  # timerMaxDelaySec (3 days): a ck's deliver time must fit


def pop_config(given: Mapping[str, str]) -> PopConfig:
    """The keys from ``given``, broker.conf as read (``dict(BrokerConfig.given)``)."""
    return PopConfig(
        revive_queue_num=given_int(given, "reviveQueueNum", 8, 1, MAX_REVIVE_QUEUES),
        revive_interval_ms=given_int(given, "reviveInterval", 1000, 100, 60_000),
        pop_polling_size=given_int(given, "popPollingSize", 1024, 0, 1_000_000),
        max_pop_polling_size=given_int(given, "maxPopPollingSize", 100000, 0, 10_000_000),
        max_invisible_ms=given_int(given, "timerMaxDelaySec", 259_200, 1, 10 * 365 * 86400) * 1000,
    )
