"""The broker.conf keys of POP (RocketMQ 5.1.1 ``BrokerConfig``; research notes issue21 §2).

The keys, their defaults and the ranges rmq takes are rows of ``rmqcli.conf.keys``:
``reviveQueueNum`` (8), ``reviveInterval`` (1000 ms), ``popPollingSize`` (1024 requests held per
``topic@group@queueId``), ``maxPopPollingSize`` (100000 held in all); and the timer's
``timerMaxDelaySec``, which bounds an invisible time. ``rmqcli.broker.config`` builds ``PopConfig``
at start (a bad value stops it there) and keeps it as ``BrokerConfig.pop``; this module does not
import it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rmqcli.conf.keys import KEYS, setting
from rmqcli.conf.parse import conf_of


@dataclass(frozen=True)
class PopConfig:
    revive_queue_num: int = setting("reviveQueueNum")
    revive_interval_ms: int = setting("reviveInterval")
    pop_polling_size: int = setting("popPollingSize")
    max_pop_polling_size: int = setting("maxPopPollingSize")
    max_poll_ms: int = 120_000  # rmq's own: no request is held longer, whatever its pollTime says
    # timerMaxDelaySec (3 days) in ms: a ck's deliver time must fit
    max_invisible_ms: int = KEYS["timerMaxDelaySec"].default * 1000


def pop_config(given: Mapping[str, str]) -> PopConfig:
    """The keys from ``given``, broker.conf as read (a ``BrokerConf`` or a mapping)."""
    conf = conf_of(given)
    return PopConfig(**conf.values(PopConfig), max_invisible_ms=conf.value("timerMaxDelaySec") * 1000)
