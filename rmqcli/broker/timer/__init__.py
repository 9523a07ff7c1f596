"""RocketMQ 5.x timer messages in the broker (research notes issue21 §4, §7).

A message with ``TIMER_DELIVER_MS`` (absolute ms), ``TIMER_DELAY_SEC`` or ``TIMER_DELAY_MS``
(relative) is delivered to its topic and queue at that time, as 5.1.1's ``TimerMessageStore``:

* Put path (``put``, ``message.timed``; 5.1.1 ``HookUtils.handleScheduleMessage``): only
  non-transactional or commit messages, not those already transformed (``TIMER_OUT_MS`` set); a 4.x
  ``DELAY`` level wins (the timer properties are dropped); precedence DELAY_SEC, DELAY_MS,
  DELIVER_MS. A time not after now is stored as sent (``TIMER_DEL_UNIQKEY`` then: refused). A delay
  beyond ``timerMaxDelaySec`` (or a value ``Long.parseLong`` refuses; a relative one is added
  without Java's wrap-around) is MESSAGE_ILLEGAL (13) "timer message illegal, ...";
  ``timerWheelEnable=false`` is SYSTEM_ERROR. Otherwise ``TIMER_OUT_MS`` (rounded down to
  ``timerPrecisionMs``, one unit earlier on a multiple), ``REAL_TOPIC``, ``REAL_QID`` are added and
  the message is stored in ``rmq_sys_wheel_timer`` queue 0 (no topic config, as 5.1.1); a send is
  answered SEND_OK with the timer queue's offset.
* Delivery (``service``): at ``TIMER_OUT_MS`` + one precision unit (when 5.1.1 reads the slot), a
  copy goes to ``REAL_TOPIC``/``REAL_QID`` with ``TIMER_ENQUEUE_MS`` and ``TIMER_DEQUEUE_MS`` added;
  its stored properties keep ``REAL_TOPIC``/``REAL_QID`` (as 5.1.1's do).

Where rmq differs from 5.1.1: no ``timerwheel``/``timerlog``/``timercheck`` files; the progress is
the timer queue's delivered prefix, kept as the offset of group ``CID_RMQ_SYS_TIMER_GROUP`` on the
timer topic in consumerOffset.json, and a heap rebuilt at start by reading the queue from there (a
store 5.1.1 wrote is read from the queue's first offset: its timers are delivered again). So after a
SIGKILL a timer is delivered late or twice, never lost; a 4.9.8 or 5.1.1 broker reads the store as
any other (5.1.1 without its timer files starts its own timer from the queue's start). No rolling
(``timerRollWindowSlots``: nothing is held on disk but the queue), no flow control
(``timerCongestNumEachSlot``), no metrics. At most ``timerMaxPending`` (rmq's own broker.conf key,
default 100000) timers are held in memory, the rest wait on disk (see ``service``, ``horizon``).
Batches are not timed (5.1.1's hook sees only single messages); a committed transaction's timer is
the transaction module's to route through ``put.put_inner``.

API: ``put_inner(ctl, inner)`` (any broker-built message, e.g. POP's ck/ack with
``TIMER_DELIVER_MS``), ``put_message(ctl, message)`` (a producer's), both raising
``TimerRefusal``; ``has_trigger(props)``; ``run(ctl)``: the delivery service's coroutine.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from rmqcli.broker.timer.message import TIMER_TOPIC, TimerRefusal, has_trigger
from rmqcli.broker.timer.put import put_inner, put_message

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext

__all__ = ["TIMER_TOPIC", "TimerRefusal", "has_trigger", "put_inner", "put_message", "run"]


def run(ctl: BrokerContext) -> Coroutine[Any, Any, None]:
    """The delivery service until cancelled (the controller starts it on a master)."""
    from rmqcli.broker.timer.service import timer_service

    return timer_service(ctl).run()
