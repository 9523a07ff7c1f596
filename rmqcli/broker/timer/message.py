"""Timer messages on the put path and at delivery (RocketMQ 5.1.1 ``HookUtils.handleScheduleMessage``,
``checkIfTimerMessage``, ``transformTimerMessage``; ``TimerMessageStore.convert``/``convertMessage``).

``timed`` decides what the put hook does with a message: nothing (not a timer message, or one whose
time has come: stored as sent), a refusal (``TimerRefusal``: 5.1.1's code and remark), or the
properties to store it with in ``rmq_sys_wheel_timer`` queue 0 (``TIMER_OUT_MS``, the deliver time
rounded down to ``timerPrecisionMs`` and one unit earlier when it is a multiple; ``REAL_TOPIC``;
``REAL_QID``). ``delivered`` is the copy put into the real topic when the time comes, ``rolled`` the
copy put back into the timer queue when a rolled timer's window slot comes.
"""

from __future__ import annotations

from formats import commitlog as fmt
from formats import names
from formats.javatext import parse_long
from rmqcli.broker.services.msgext import inner_from_record
from rmqcli.broker.timer.config import TimerConfig
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.remoting.server.refusal import Refusal
from rmqcli.store.read.commitlog import Record
from rmqcli.store.write.messages import InnerMessage

TIMER_TOPIC = names.TIMER_TOPIC  # TimerMessageStore.TIMER_TOPIC
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
TIMER_OUT_MS = "TIMER_OUT_MS"
TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
TRIGGERS = (TIMER_DELIVER_MS, TIMER_DELAY_MS, TIMER_DELAY_SEC)

_QUEUED = (fmt.TransactionType.NOT_TYPE, fmt.TransactionType.COMMIT)


class TimerRefusal(Refusal):
    """A timer message the put hook refuses (``WHEEL_TIMER_MSG_ILLEGAL``, ``WHEEL_TIMER_NOT_ENABLE``)."""


def illegal(config: TimerConfig) -> TimerRefusal:
    """``WHEEL_TIMER_MSG_ILLEGAL`` as ``SendMessageProcessor.handlePutMessageResult`` answers it."""
    return TimerRefusal(
        RS.MESSAGE_ILLEGAL,
        "timer message illegal, the delay time should not be bigger than the max delay "
        f"{config.max_delay_sec * 1000}ms; or if set del msg, the delay time should be bigger than "
        "the current time",
    )


def not_enabled() -> TimerRefusal:
    return TimerRefusal(RS.SYSTEM_ERROR, "accurate timer message is not enabled, timerWheelEnable is false")


def has_trigger(props: dict[str, str]) -> bool:
    """Any of the three properties that make a timer message (the cheap first test)."""
    return TIMER_DELIVER_MS in props or TIMER_DELAY_SEC in props or TIMER_DELAY_MS in props


def delay_level(props: dict[str, str]) -> int:
    """``getDelayTimeLevel`` (0 when absent or not a number)."""
    try:
        return int(props.get(fmt.PROPERTY_DELAY) or 0)
    except ValueError:
        return 0


def timed(
    props: dict[str, str], topic: str, queue_id: int, sys_flag: int, config: TimerConfig, now: int
) -> dict[str, str] | None:
    """The put hook on one message's broker-side property map (changed in place where 5.1.1
    changes it): ``None`` to store the message as it is, else the timer topic's extra properties.
    Raises ``TimerRefusal``."""
    if fmt.TransactionType(sys_flag & fmt.TRANSACTION_MASK) not in _QUEUED or topic == TIMER_TOPIC:
        return None
    if not has_trigger(props):
        return None
    if delay_level(props) > 0:  # a 4.x level wins: the timer properties go
        for key in TRIGGERS:
            props.pop(key, None)
        return None
    if TIMER_OUT_MS in props:  # already transformed once ("double check")
        return None
    if not config.wheel_enable:
        raise not_enabled()
    try:
        if TIMER_DELAY_SEC in props:
            deliver = now + parse_long(props[TIMER_DELAY_SEC]) * 1000  # no wrap-around (rmq's own)
        elif TIMER_DELAY_MS in props:
            deliver = now + parse_long(props[TIMER_DELAY_MS])
        else:
            deliver = parse_long(props[TIMER_DELIVER_MS])
    except ValueError:
        raise illegal(config) from None
    if deliver <= now:
        if TIMER_DEL_UNIQKEY in props:
            raise illegal(config)
        return None  # due already: stored as sent
    if deliver - now > config.max_delay_sec * 1000:
        raise illegal(config)
    precision = config.precision_ms
    out = deliver - precision if deliver % precision == 0 else deliver // precision * precision
    return {TIMER_OUT_MS: str(out), fmt.PROPERTY_REAL_TOPIC: topic, fmt.PROPERTY_REAL_QID: str(queue_id)}


def cancelled(markers: set[tuple[str, str]], topic: str, uniq_key: str | None) -> bool:
    """Whether a timer of ``topic`` with ``uniq_key`` is cancelled by the markers of its due time,
    each ``(its real topic, its TIMER_DEL_UNIQKEY)``: a marker of the same topic naming the key bare
    (5.1.1's form) or as ``<topic>+<key>`` (``TimerMessageStore.buildDeleteKey`` of 5.2 on). 5.1.1
    matches on the key alone: a marker sent to any topic cancelled another topic's timer."""
    if not uniq_key:
        return False
    return (topic, uniq_key) in markers or (topic, f"{topic}+{uniq_key}") in markers


def due_ms(out_ms: int, config: TimerConfig) -> int:
    """When 5.1.1 delivers a message of slot ``TIMER_OUT_MS``: its slot is read once the write
    time (now, rounded down to the precision) has passed it, i.e. one precision unit later."""
    return out_ms + config.precision_ms


def delivered(rec: Record, enqueue_ms: int, dequeue_ms: int) -> InnerMessage:
    """``convert`` + ``convertMessage``: the copy stored in ``REAL_TOPIC``/``REAL_QID``. The
    properties string is serialised with ``TIMER_ENQUEUE_MS``/``TIMER_DEQUEUE_MS`` added and before
    ``REAL_TOPIC``/``REAL_QID`` are cleared, so the stored copy keeps both (observed on 5.1.1);
    ``WAIT=false`` is set in the map only. Raises ValueError for a record without a usable real
    topic or queue id."""
    props = dict(rec.properties)
    props[TIMER_ENQUEUE_MS] = str(enqueue_ms)
    props[TIMER_DEQUEUE_MS] = str(dequeue_ms)
    text = fmt.encode_properties_as_broker(props)
    topic = props.pop(fmt.PROPERTY_REAL_TOPIC, "")
    queue_id = int(props.pop(fmt.PROPERTY_REAL_QID, ""))
    props[fmt.PROPERTY_WAIT] = "false"
    return inner_from_record(rec, topic, queue_id, props, text)


def rolled(rec: Record, enqueue_ms: int, dequeue_ms: int) -> InnerMessage:
    """``convert``/``convertMessage`` with ``needRoll``: the timer-queue record ``rec`` put back
    into its own topic and queue with ``TIMER_ENQUEUE_MS``, ``TIMER_ROLL_TIMES`` (one more than it
    had, else 1) and ``TIMER_DEQUEUE_MS`` added, ``REAL_TOPIC``/``REAL_QID`` kept; ``WAIT=false`` in
    the map only."""
    props = dict(rec.properties)
    props[TIMER_ENQUEUE_MS] = str(enqueue_ms)
    props[TIMER_ROLL_TIMES] = str(int(props.get(TIMER_ROLL_TIMES) or 0) + 1)
    props[TIMER_DEQUEUE_MS] = str(dequeue_ms)
    text = fmt.encode_properties_as_broker(props)
    props[fmt.PROPERTY_WAIT] = "false"
    return inner_from_record(rec, rec.topic, rec.queue_id, props, text)


def written_ms(rec: Record) -> int:
    """When a timer-queue record was put there: its store time, or for a rolled one the time of
    the roll (``TIMER_DEQUEUE_MS``) when later."""
    try:
        rolled_at = int(rec.properties.get(TIMER_DEQUEUE_MS) or 0)
    except ValueError:
        rolled_at = 0
    return max(rec.store_timestamp, rolled_at)
