"""What the rest of the broker uses of the timer (``send``, ``transaction``, POP's ``revivelog``,
the controller): the put hook, its refusal, the trigger test, the timer topic and the delivery
service's coroutine. Callers import this module (``from rmqcli.broker.timer import api as timer``),
so the package's ``__init__`` stays empty and importing one of its modules runs no other.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from rmqcli.broker.timer.message import TIMER_TOPIC, TimerRefusal, has_trigger
from rmqcli.broker.timer.put import put_inner, put_message
from rmqcli.broker.timer.service import timer_service

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext

__all__ = ["TIMER_TOPIC", "TimerRefusal", "has_trigger", "put_inner", "put_message", "run"]


def run(ctl: BrokerContext) -> Coroutine[Any, Any, None]:
    """The delivery service until cancelled (the controller starts it on a master)."""
    return timer_service(ctl).run()
