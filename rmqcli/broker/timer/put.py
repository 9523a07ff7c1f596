"""``putMessage`` with 5.1.1's timer hook (``HookUtils.handleScheduleMessage``): a timer message is
stored in ``rmq_sys_wheel_timer`` queue 0 and handed to the timer service; anything else is stored
as it is."""

from __future__ import annotations

from typing import TYPE_CHECKING

from formats import commitlog as fmt
from rmqcli.broker.timer import message as tm
from rmqcli.broker.timer.service import now_ms, timer_service
from rmqcli.store.write.messages import AppendResult, InnerMessage, Message, inner_from_message

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext


def put_inner(ctl: BrokerContext, inner: InnerMessage) -> AppendResult:
    """``MessageStore.putMessage`` of a broker-built message (a POP ck or ack with
    ``TIMER_DELIVER_MS``, say) through the timer hook. Raises ``message.TimerRefusal``."""
    service = timer_service(ctl)
    extra = tm.timed(inner.properties, inner.topic, inner.queue_id, inner.sys_flag, service.config, now_ms())
    if extra is None:  # a delay level's map lost its timer properties: the delay rewrite
        return ctl.store.put_inner(inner)  # serialises it again (apply_delay)
    inner.properties.update(extra)
    inner.properties_string = fmt.encode_properties_as_broker(inner.properties)
    inner.topic = tm.TIMER_TOPIC
    inner.queue_id = 0
    result = ctl.store.put_inner(inner)  # the writer registers no config for the timer's topic
    service.arrived(
        result.queue_offset,
        result.physical_offset,
        int(extra[tm.TIMER_OUT_MS]),
        tm.TIMER_DEL_UNIQKEY in inner.properties,
        result.size,
        extra[fmt.PROPERTY_REAL_TOPIC],
    )
    return result


def put_message(ctl: BrokerContext, message: Message) -> AppendResult:
    """A producer's single message (``SendMessageProcessor`` + the hook) whose properties have a
    timer property (``message.has_trigger``). Raises ``message.TimerRefusal``."""
    return put_inner(ctl, inner_from_message(message, ctl.writer.cluster))
